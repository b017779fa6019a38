"""The quality gate and redundant dispatch with conflict resolution, without Ray."""

import pytest
from wiring import build_troupe, run

from raytroupe.protocols import (
    AgentSpec,
    ErrorCode,
    LLMRequest,
    PlannedSubtask,
    ScriptedModel,
    ScriptedTurn,
    TeamSpec,
)

SCHEMA = {
    "type": "object",
    "properties": {"answer": {"type": "integer"}},
    "required": ["answer"],
}


def scripted(*texts):
    return ScriptedModel(turns=tuple(ScriptedTurn(text=t) for t in texts))


def team(step, agents, **fields):
    return TeamSpec(name="q", agents=agents, plan=(step,), planner_model="offline", **fields)


def test_an_output_failing_its_schema_goes_back_with_its_problems():
    async def main():
        troupe = await build_troupe({"m": scripted("forty-two", '{"answer": 42}')})
        step = PlannedSubtask(id="s1", role="w", instructions="Give the answer.",
                              output_schema=SCHEMA)  # fmt: skip
        result = await troupe.run("q", team(step, (AgentSpec(name="a", role="w", model="m"),)))
        return result, troupe

    result, troupe = run(main())
    assert result.status == "succeeded", result.error
    (sub,) = result.subtasks
    assert (sub.output, sub.gate_retries) == ('{"answer": 42}', 1)
    work = [r for r in troupe.llm.payloads(LLMRequest) if r.purpose == "work"]
    assert len(work) == 2
    retry_prompt = work[1].messages[-1].text
    assert "why it was rejected" in retry_prompt
    assert "forty-two" in retry_prompt


def test_an_output_that_never_passes_fails_the_subtask_with_its_problems():
    async def main():
        troupe = await build_troupe({"m": scripted("nope", "still nope")})
        step = PlannedSubtask(id="s1", role="w", instructions="Give the answer.",
                              output_schema=SCHEMA)  # fmt: skip
        agents = (AgentSpec(name="a", role="w", model="m"),)
        return await troupe.run("q", team(step, agents, gate_retries=1))

    result = run(main())
    (sub,) = result.subtasks
    assert sub.status == "failed"
    assert sub.error.code is ErrorCode.QUALITY_GATE
    assert sub.gate_retries == 1
    assert result.status == "failed"


def test_redundant_answers_are_resolved_by_majority_with_every_candidate_kept():
    async def main():
        models = {"m1": scripted("42"), "m2": scripted("41"), "m3": scripted("42.0")}
        troupe = await build_troupe(models)
        agents = tuple(AgentSpec(name=f"a{i}", role="w", model=f"m{i}") for i in (1, 2, 3))
        step = PlannedSubtask(id="s1", role="w", instructions="How many?", redundancy=3)
        return await troupe.run("q", team(step, agents))

    result = run(main())
    (sub,) = result.subtasks
    resolution = sub.resolution
    assert resolution.strategy == "majority"
    assert sorted(c.agent for c in resolution.candidates) == ["a1", "a2", "a3"]
    assert resolution.votes == {"42": 2, "41": 1}
    assert sub.output in {"42", "42.0"}
    assert "2" in resolution.rationale
    assert sub.usage.calls == 3


def test_a_judge_model_picks_among_disagreeing_agents():
    async def main():
        troupe = await build_troupe({"m1": scripted("Paris"), "m2": scripted("Lyon")})
        agents = (AgentSpec(name="a1", role="w", model="m1"),
                  AgentSpec(name="a2", role="w", model="m2"))  # fmt: skip
        step = PlannedSubtask(id="s1", role="w", instructions="Capital?", redundancy=2,
                              strategy="judge")  # fmt: skip
        return await troupe.run("q", team(step, agents))

    result = run(main())
    (sub,) = result.subtasks
    assert sub.resolution.strategy == "judge"
    assert sub.output in {"Paris", "Lyon"}
    assert sub.resolution.chosen_agent == sub.agent
    assert sub.resolution.rationale


@pytest.mark.parametrize("planning", ["model", "auto"])
def test_the_jobs_answer_has_its_own_gate(planning):
    """Planned by the model, or sized (the one agent's prose answer fails the team's schema,
    so the model aggregates after all): the aggregate's prose answer is asked for again."""
    plan = '{"subtasks": [{"id": "s1", "role": "w", "instructions": "x"}]}'
    answers = ("a prose answer", '{"answer": 7}')
    turns = (plan, *answers) if planning == "model" else answers

    async def main():
        troupe = await build_troupe({"planner": scripted(*turns)})
        spec = TeamSpec(name="g", planner_model="planner", output_schema=SCHEMA,
                        planning=planning, agents=(AgentSpec(name="a", role="w"),))  # fmt: skip
        result = await troupe.run("q", spec)
        await troupe.pool.remove("planner")  # every scripted turn was played
        return result

    result = run(main())
    assert result.status == "succeeded", result.error
    assert result.answer == '{"answer": 7}'
