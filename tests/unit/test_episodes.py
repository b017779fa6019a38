"""Episodic memory: successful jobs are kept as episodes (request, plan, tools, answer,
score) when the team says so, and the most similar are shown to the team's next jobs of the
same tenant, after the task; the offline planner plans the request, not the examples."""

import asyncio

from wiring import build_troupe, order, run

from raytroupe.actors.orchestrator.episodes import episode_write, examples_of, examples_query
from raytroupe.protocols import (
    AgentSpec,
    EpisodePolicy,
    ErrorCode,
    ErrorPayload,
    JobResult,
    LLMRequest,
    MemoryHit,
    OfflineModel,
    TeamSpec,
    Timings,
)
from raytroupe.protocols.job_context import Example, JobContext
from raytroupe.protocols.prompts import EXAMPLES_HEADING, asked, job_prompt
from raytroupe.protocols.quality import QualityReport, StandardOutput
from tests.support.inline import agent_name

KEEP = EpisodePolicy(keep=True, examples=2)


def _result(status="succeeded", answer="Water boils at 100 C.", score=None) -> JobResult:
    output = None
    if score is not None:
        report = QualityReport(passed=True, score=score)
        output = StandardOutput(text=answer, team="lab", produced_at=1.0, quality=report)
    error = None if status == "succeeded" else ErrorPayload(code=ErrorCode.JOB_FAILED, message="x")
    return JobResult(job_id="job-1", task="t", team="lab", status=status, answer=answer,
                     timings=Timings(submitted_at=0, finished_at=1), output=output,
                     error=error)  # fmt: skip


class TestEpisodesAsData:
    def test_a_success_is_kept_with_its_request_plan_tools_and_score(self):
        kept = episode_write(_result(score=0.8), KEEP, "team:lab", "How hot does water boil?")
        assert kept is not None
        assert kept.text == "How hot does water boil?"
        assert kept.tags == ("episode", "team:lab")
        assert kept.importance == 0.8
        assert kept.metadata["answer"] == "Water boils at 100 C."
        assert kept.metadata["score"] == 0.8

    def test_nothing_is_kept_unless_the_policy_keeps_a_good_success(self):
        assert episode_write(_result(), EpisodePolicy(), "team:lab", "q") is None
        assert episode_write(_result(status="failed", answer=""), KEEP, "team:lab", "q") is None
        picky = EpisodePolicy(keep=True, min_score=0.9)
        assert episode_write(_result(score=0.5), picky, "team:lab", "q") is None
        assert episode_write(_result(score=0.95), picky, "team:lab", "q") is not None

    def test_examples_follow_the_task_and_are_not_the_request(self):
        hit = MemoryHit(id="1", text="How hot does water boil?", score=1, similarity=1,
                        importance=1, created_at=0, metadata={"plan": "chemist: look it up",
                        "tools": "calculator", "answer": "100 C"})  # fmt: skip
        examples = examples_of((hit,))
        assert examples == (
            Example(request="How hot does water boil?", plan="chemist: look it up",
                    tools="calculator", answer="100 C"),
        )  # fmt: skip
        context = JobContext(request="At what temperature does ice melt?", examples=examples)
        shown = job_prompt(context)
        assert shown.splitlines() == [
            "At what temperature does ice melt?",
            "",
            EXAMPLES_HEADING,
            "[1] request: How hot does water boil?",
            "    plan: chemist: look it up",
            "    tools called: calculator",
            "    answer: 100 C",
        ]
        assert asked(context) == "At what temperature does ice melt?"
        assert job_prompt(JobContext(request="task")) == "task"
        assert examples_query(EpisodePolicy(keep=True), "team:lab", "q") is None


TEAM = TeamSpec(
    name="lab",
    planner_model="offline",
    agents=(AgentSpec(name="lab-ada", role="chemist", model="offline"),),
    episodes=KEEP,
)
MODELS = {"offline": OfflineModel()}
FIRST = "What is the boiling point of water at sea level in Celsius?"
SECOND = "What is the boiling point of ethanol at sea level in Celsius?"


async def _episodes(memory, tenant, count):
    for _ in range(300):  # the episode reaches the memory actor in the background
        # an inline team's episodes are tagged with its name in the tenant's scope
        found = await memory.listed(tenant, tags=("episode", f"team:{agent_name('lab', tenant)}"))
        if len(found) >= count:
            return found
        await asyncio.sleep(0.01)
    return found


def _prompts(troupe, job_id):
    return [
        "\n".join(msg.text for msg in m.payload.messages)
        for m in troupe.llm.seen
        if m.job_id == job_id and isinstance(m.payload, LLMRequest)
    ]


def test_a_teams_next_job_is_shown_its_similar_earlier_success():
    async def main():
        troupe = await build_troupe(MODELS)
        orch = troupe.orchestrator
        first = await orch.wait(await troupe.desk.submit(*order(FIRST, TEAM, tenant="acme")), 30)
        kept = await _episodes(troupe.memory, "acme", 1)
        second = await orch.wait(await troupe.desk.submit(*order(SECOND, TEAM, tenant="acme")), 30)
        other = await orch.wait(await troupe.desk.submit(*order(SECOND, TEAM, tenant="globex")), 30)
        return troupe, first, kept, second, other

    troupe, first, kept, second, other = run(main(), 60)
    assert first.status == "succeeded"
    assert [(e.text, e.metadata["job_id"]) for e in kept] == [(FIRST, first.job_id)]
    assert kept[0].metadata["answer"] == first.answer.strip()[:1500]
    assert kept[0].metadata["plan"].startswith("chemist: ")
    assert second.status == "succeeded"
    assert second.task == SECOND  # what was asked: the examples are beside it, not in it
    prompts = _prompts(troupe, second.job_id)
    assert prompts
    assert all(f"{EXAMPLES_HEADING}\n[1] request: {FIRST}" in p for p in prompts)
    # sized as one part (the examples are not parts): one agent is given the request, and
    # sees the examples beside it
    assert [s.instructions for s in second.subtasks] == [SECOND]
    # another tenant's job is shown none of acme's episodes
    assert other.task == SECOND
    assert not any(FIRST in p for p in _prompts(troupe, other.job_id))
