"""Manager-as-tools: an agent calls other agents through the delegate tool."""

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


def delegate(call_id, agent, instructions):
    return ToolCall(call_id=call_id, tool="delegate",
                    arguments={"agent": agent, "instructions": instructions})  # fmt: skip


def test_a_manager_calls_its_specialists_as_tools():
    manager_script = ScriptedModel(turns=(
        ScriptedTurn(tool_calls=(delegate("c1", "numbers", "What is 6 * 7?"),
                                 delegate("c2", "words", "Say hello politely."))),
        ScriptedTurn(text="Combined."),
    ))  # fmt: skip

    async def main():
        troupe = await build_troupe({"boss-model": manager_script})
        team = TeamSpec(
            name="managed",
            planner_model="offline",
            agents=(
                AgentSpec(name="boss", role="manager", model="boss-model", tools=("delegate",)),
                AgentSpec(name="numbers", role="specialist", tools=("calculator",)),
                AgentSpec(name="words", role="specialist"),
            ),
            plan=(PlannedSubtask(id="s1", role="manager", instructions="{task}"),),
        )
        result = await troupe.run("Answer two things.", team)
        return result, troupe

    result, troupe = run(main())
    assert result.status == "succeeded", result.error
    (sub,) = result.subtasks
    assert (sub.agent, sub.output, sub.tool_calls) == ("boss", "Combined.", 2)
    work = [r for r in troupe.llm.payloads(LLMRequest) if r.purpose == "work"]
    results = [m.text for m in work[-1].messages if m.role == "tool"]
    assert '"output": "6 * 7 = 42"' in results[0]
    assert '"agent": "numbers"' in results[0]
    assert '"agent": "words"' in results[1]


def test_delegating_to_oneself_is_refused():
    script = ScriptedModel(turns=(
        ScriptedTurn(tool_calls=(delegate("c1", "boss", "Do it yourself."),)),
        ScriptedTurn(text="Fine."),
    ))  # fmt: skip

    async def main():
        troupe = await build_troupe({"boss-model": script})
        team = TeamSpec(
            name="selfish",
            planner_model="offline",
            agents=(AgentSpec(name="boss", role="m", model="boss-model", tools=("delegate",)),),
        )
        await troupe.run("Go.", team)
        return troupe

    troupe = run(main())
    work = [r for r in troupe.llm.payloads(LLMRequest) if r.purpose == "work"]
    assert "cannot delegate to itself" in work[-1].messages[-1].text


def test_the_example_manager_team_loads():
    team = Team.from_yaml("examples/teams/manager.yaml")
    assert [a.name for a in team.agents] == ["boss", "numbers", "words"]
    assert team.plan is not None
