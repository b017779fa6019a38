"""A tool that waits for a person: the driver sees each call's exact arguments and decides.

Usage: python examples/approvals.py [--limit USD]

``refund`` is declared with ``requires_approval=True``: every call of it is held by the
sandbox until someone approves or rejects that very call (its approval id is bound to the
job, subtask, step, tool and arguments, so a different call cannot ride on a decision). This
script plays the person: it follows the job's events, and on each ``approval_requested``
prints the tool and its arguments and approves refunds up to ``--limit`` dollars (100 by
default), rejecting the others with a reason. Over HTTP the same calls wait in ``GET
/v1/approvals``, and the console's Approvals page shows them.

Which refunds to ask for is a model's decision: the agent here runs on a ScriptedModel that
plays the turns a real model would (two refund calls, then an answer), so the holds, the
decisions and what the sandbox ran are real and the agent's last sentence is the script's.
Runs on an embedded local Ray of its own, with no keys and no network.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import raytroupe
from raytroupe.protocols import PlannedSubtask


@raytroupe.tool(requires_approval=True, side_effects=True)
def refund(order_id: str, amount_usd: float) -> str:
    """Refund an order: money goes back to the customer's card."""
    return f"refunded ${amount_usd:.2f} on order {order_id}"


def team() -> raytroupe.Team:
    """One support agent with the refund tool; its model's decisions are scripted."""
    ask = [("A-1001", 25.0), ("B-2002", 4800.0)]  # what a real model would ask to refund
    turns = [
        raytroupe.ScriptedTurn(
            tool_calls=(
                raytroupe.ToolCall(
                    call_id=f"call-{order}",
                    tool="refund",
                    arguments={"order_id": order, "amount_usd": amount},
                ),
            )
        )
        for order, amount in ask
    ]
    turns.append(raytroupe.ScriptedTurn(text="A-1001 is refunded; B-2002 waits for a manager."))
    return raytroupe.Team(
        name="support",
        agents=[{"name": "sam", "role": "support", "model": "sam-model", "tools": [refund]}],
        models={"sam-model": raytroupe.ScriptedModel(turns=tuple(turns))},
        planner_model="offline",
        plan=[PlannedSubtask(id="s1", role="support", instructions="Refund the two late orders.")],
    )


def main() -> None:
    """Run the job, decide each held call as it comes, print what ran."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--limit", type=float, default=100.0, help="approve refunds up to this")
    limit = parser.parse_args().limit
    with tempfile.TemporaryDirectory(prefix="troupe-approvals-") as tmp:
        state = Path(tmp)
        rt = raytroupe.connect(
            address="local",  # a Ray of its own, even if another runs on this machine
            num_cpus=2,
            include_dashboard=False,
            log_level="warning",
            journal=state / "journal.sqlite",
            tools_config=raytroupe.ToolsConfig(
                state_dir=state / "tools", scratch_root=state / "scratch"
            ),
            memory_config=raytroupe.MemoryConfig(path=state / "memory"),
        )
        try:
            job = rt.submit("Refund the two late orders.", team=team())
            print(f"submitted {job.job_id}")
            for event in job.events(timeout=120):
                if event.type == "approval_requested":
                    decide(job, event.data, limit)
                elif event.type == "approval_decided":
                    verdict = "approved" if event.data["approved"] else "rejected"
                    print(f"  [{event.seq:>2}] {event.type}: {verdict}, {event.data['reason']}")
                elif event.terminal:
                    print(f"  [{event.seq:>2}] {event.type}")
            result = job.result(timeout=60)
            print(f"\nstatus: {result.status}")
            for span in result.trace:
                if span.kind == "tool_call":
                    a = span.attributes
                    outcome = "ran" if a["ok"] else f"not run ({a['error_code']})"
                    print(f"  {a['tool']}({a['arguments']}): {outcome}: {a['result']}")
            print(f"answer: {result.answer}")
        finally:
            rt.shutdown()


def decide(job: raytroupe.JobHandle, request: dict[str, object], limit: float) -> None:
    """Approve or reject one held call, by the amount in its arguments."""
    held = {a.approval_id: a for a in job.approvals()}  # the same call, as the job lists it
    approval_id = str(request["approval_id"])
    call = held[approval_id]
    amount = float(call.arguments["amount_usd"])
    print(f"  held for approval {approval_id[:12]}: {call.tool}({call.arguments}) by {call.agent}")
    if amount <= limit:
        job.approve(approval_id, reason=f"within the ${limit:.0f} limit")
    else:
        job.reject(approval_id, reason=f"over the ${limit:.0f} limit: a manager must decide")


if __name__ == "__main__":
    main()
