"""Human approval of tool calls, in process."""

from wiring import build_troupe, order, run

from raytroupe.protocols import (
    AgentSpec,
    LLMRequest,
    ScriptedModel,
    ScriptedTurn,
    TeamSpec,
    ToolCall,
    ToolDef,
)

PAY = ToolDef(
    name="pay",
    description="Pays an invoice.",
    parameters={"type": "object", "properties": {"amount": {"type": "integer"}}},
    requires_approval=True,
    side_effects=True,
)


def script():
    call = ToolCall(call_id="c1", tool="pay", arguments={"amount": "120"})
    return ScriptedModel(turns=(ScriptedTurn(tool_calls=(call,)), ScriptedTurn(text="done")))


async def held_job(troupe, paid):
    async def pay(arguments, _ctx):
        paid.append(arguments)
        return {"paid": arguments["amount"]}

    troupe.provisioner.sandbox.register(PAY, pay)
    clerk = AgentSpec(name="clerk", role="w", model="m", tools=("pay",))
    team = TeamSpec(name="pay", planner_model="offline", agents=(clerk,))
    job_id = await troupe.desk.submit(*order("Pay the invoice.", team))
    seen = 0
    while True:  # bounded by the test's guard: the request shows up as an event
        events = await troupe.orchestrator.events(job_id, seen, timeout=None)
        seen = events[-1].seq
        asked = [e for e in events if e.type == "approval_requested"]
        if asked:
            return job_id, asked[0]


def test_a_held_call_runs_once_approved_with_its_exact_arguments():
    paid = []

    async def main():
        troupe = await build_troupe({"m": script()})
        job_id, asked = await held_job(troupe, paid)
        status = await troupe.orchestrator.status(job_id)
        pending = await troupe.orchestrator.approvals(job_id)
        assert paid == []  # nothing ran before the decision
        ok = await troupe.orchestrator.decide(job_id, asked.data["approval_id"], approved=True)
        result = await troupe.orchestrator.wait(job_id, 10)
        again = await troupe.orchestrator.decide(job_id, asked.data["approval_id"], approved=True)
        return status, pending, asked, ok, again, result

    status, pending, asked, ok, again, result = run(main())
    assert status == "awaiting_approval"
    assert [(p.tool, p.arguments) for p in pending] == [("pay", {"amount": 120})]
    assert asked.data["arguments"] == {"amount": 120}  # after coercion: what will run
    assert (ok, again) == (True, False)
    assert paid == [{"amount": 120}]
    assert result.status == "succeeded"


def test_a_rejected_call_never_runs_and_the_model_hears_why():
    paid = []

    async def main():
        troupe = await build_troupe({"m": script()})
        job_id, asked = await held_job(troupe, paid)
        await troupe.orchestrator.decide(
            job_id, asked.data["approval_id"], approved=False, reason="over the limit"
        )
        result = await troupe.orchestrator.wait(job_id, 10)
        return result, troupe

    result, troupe = run(main())
    assert paid == []
    assert result.status == "succeeded"  # the agent went on and answered
    work = [r for r in troupe.llm.payloads(LLMRequest) if r.purpose == "work"]
    tool_turn = work[-1].messages[-1]
    assert tool_turn.role == "tool"
    assert "a human rejected 'pay': over the limit" in tool_turn.text


def test_without_an_orchestrator_to_ask_the_call_is_refused():
    async def main():
        troupe = await build_troupe({"m": script()})
        paid = []

        async def pay(arguments, _ctx):
            paid.append(arguments)
            return "paid"

        sandbox = troupe.provisioner.sandbox
        sandbox.register(PAY, pay)
        await sandbox.grant("clerk", ["pay"])
        call = ToolCall(call_id="c", tool="pay", arguments={"amount": 1})
        return await sandbox.call(call, agent="clerk", job_id=None), paid

    result, paid = run(main())
    assert not result.ok
    assert "needs a human's approval" in result.error.message
    assert paid == []
