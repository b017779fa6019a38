"""A team's own Python functions as its tools: ``@raytroupe.tool``, team-wide and per agent.

Usage: python examples/custom_tools.py

``stock`` is given to every agent of the team (``Team(functions=[stock])``); ``reorder`` to
the buyer only (a function inside that agent's ``tools``). The driver ships both, pickled by
value, to the tool sandboxes when it submits the job; the sandboxes check each call against
the calling agent's grants and the function's signature, convert the arguments to the
annotated types (the model's "20" reaches ``reorder`` as the int 20) and run it.

Which tool to call with which arguments is a model's decision. The offline model calls only
the built-in calculator, so each agent here runs on a ScriptedModel that plays the turns a
real model would (call the tool, then answer): the tool calls, their checks and their results
below are real, the agents' final sentences are the script's. Runs on an embedded local Ray
of its own, with no keys and no network.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Annotated

from pydantic import Field

import raytroupe
from raytroupe.protocols import PlannedSubtask

STOCK = {"A-1": 12, "B-2": 0}


@raytroupe.tool
def stock(sku: str) -> dict[str, object]:
    """Units of an item on hand in the warehouse."""
    return {"sku": sku, "on_hand": STOCK.get(sku, 0)}


@raytroupe.tool(side_effects=True)  # run at most once per call, even if a subtask is retried
def reorder(sku: str, units: Annotated[int, Field(ge=1, le=100)]) -> dict[str, object]:
    """Order more units of an item from the supplier (1 to 100 at a time)."""
    return {"sku": sku, "ordered": units, "status": "purchase order placed"}


def scripted(*turns: raytroupe.ScriptedTurn) -> raytroupe.ScriptedModel:
    """A stand-in for a real model's decisions (see the module docstring)."""
    return raytroupe.ScriptedModel(turns=turns)


def calls(*pairs: tuple[str, dict[str, object]]) -> raytroupe.ScriptedTurn:
    """One model turn that calls ``tool(arguments)`` for each pair."""
    made = tuple(
        raytroupe.ToolCall(call_id=f"call-{i}", tool=tool, arguments=arguments)
        for i, (tool, arguments) in enumerate(pairs, 1)
    )
    return raytroupe.ScriptedTurn(tool_calls=made)


def answer(text: str) -> raytroupe.ScriptedTurn:
    """One model turn that answers ``text``."""
    return raytroupe.ScriptedTurn(text=text)


def team() -> raytroupe.Team:
    """The shop team: a clerk who may look stock up, a buyer who may also reorder."""
    return raytroupe.Team(
        name="shop",
        functions=[stock],  # every agent of the team may call it
        agents=[
            {"name": "clerk", "role": "clerk", "model": "clerk-model"},
            {"name": "buyer", "role": "buyer", "model": "buyer-model", "tools": [reorder]},
        ],
        models={
            # a real model decides these calls; the arguments are what it would write
            "clerk-model": scripted(
                calls(("stock", {"sku": "A-1"})),
                calls(("reorder", {"sku": "A-1", "units": 5})),  # not the clerk's tool
                answer("12 units of A-1 are on hand; I may not reorder."),
            ),
            "buyer-model": scripted(
                calls(("stock", {"sku": "B-2"})),
                calls(("reorder", {"sku": "B-2", "units": "20"})),
                answer("B-2 was out of stock: 20 units ordered."),
            ),
        },
        planner_model="offline",  # joins the two answers into the job's answer
        plan=[
            PlannedSubtask(id="count", role="clerk", instructions="How many A-1 do we have?"),
            PlannedSubtask(id="restock", role="buyer", instructions="Restock B-2 if it ran out."),
        ],
    )


def main() -> None:
    """Run one job of the shop team and print each tool call as the sandbox answered it."""
    print(f"stock is still a function: stock('A-1') = {stock('A-1')}")
    print(f"tools: {stock.name} ({stock.description}), {reorder.name} ({reorder.description})")
    with tempfile.TemporaryDirectory(prefix="troupe-tools-") as tmp:
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
            result = rt.submit("Check A-1 and restock B-2.", team=team()).result(timeout=120)
            for sub in result.subtasks:
                print(f"\n{sub.id} [{sub.role} -> {sub.agent}]: {sub.status}")
                for call in tool_calls(result, sub.id):
                    shown = call["result"] if call["ok"] else f"refused, {call['error_code']}"
                    print(f"  {call['tool']}({call['arguments']}) -> {shown}")
                print(f"  => {sub.output}")
            print(f"\nanswer:\n{result.answer}")
        finally:
            rt.shutdown()


def tool_calls(result: raytroupe.JobResult, subtask: str) -> list[dict[str, object]]:
    """The tool calls of ``subtask``, in order, from the job's trace (as the sandbox ran them)."""
    spans = {s.span_id: s for s in result.trace}

    def subtask_of(span_id: str | None) -> str | None:
        span = spans.get(span_id or "")
        while span is not None and span.kind != "subtask":
            span = spans.get(span.parent_id or "")
        return None if span is None else str(span.attributes["subtask_id"])

    called = [s for s in result.trace if s.kind == "tool_call" and subtask_of(s.span_id) == subtask]
    return [dict(s.attributes) for s in sorted(called, key=lambda s: s.start)]


if __name__ == "__main__":
    main()
