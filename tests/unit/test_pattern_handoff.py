"""Handoff: an agent passes control and context to another, whose answer becomes the answer."""

from wiring import build_troupe, run

from raytroupe.protocols import (
    AgentSpec,
    LLMRequest,
    PlannedSubtask,
    ScriptedModel,
    ScriptedTurn,
    TeamSpec,
    ToolCall,
)
from raytroupe.runtime import Team


def test_a_handoff_passes_control_and_context():
    handoff = ToolCall(call_id="h1", tool="handoff", arguments={
        "agent": "billing", "instructions": "Refund the double charge.",
        "context": "Customer 42 was charged twice on May 3.",
    })  # fmt: skip
    triage = ScriptedModel(turns=(ScriptedTurn(tool_calls=(handoff,)),))
    billing = ScriptedModel(turns=(ScriptedTurn(text="Refunded customer 42."),))

    async def main():
        troupe = await build_troupe({"triage-model": triage, "billing-model": billing})
        team = TeamSpec(
            name="helpdesk",
            planner_model="offline",
            agents=(
                AgentSpec(name="triage", role="front", model="triage-model", tools=("handoff",)),
                AgentSpec(name="billing", role="specialist", model="billing-model"),
            ),
            plan=(PlannedSubtask(id="s1", role="front", instructions="{task}"),),
        )
        result = await troupe.run("I was charged twice!", team)
        return result, troupe

    result, troupe = run(main())
    assert result.status == "succeeded", result.error
    (sub,) = result.subtasks
    assert (sub.agent, sub.stop_reason, sub.output) == (
        "triage",
        "handoff",
        "Refunded customer 42.",
    )
    assert sub.turns == 1  # triage made no model call after handing off
    billing_prompt = (
        next(r for r in troupe.llm.payloads(LLMRequest) if r.model == "billing-model")
        .messages[1]
        .text
    )
    assert "Refund the double charge." in billing_prompt
    assert "Customer 42 was charged twice on May 3." in billing_prompt
    assert "Context handed over by triage" in billing_prompt


def test_the_example_handoff_team_loads():
    team = Team.from_yaml("examples/teams/handoff.yaml")
    assert team.agents[0].tools == ("handoff",)
