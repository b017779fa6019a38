"""A model that aggregates a job to nothing: the subtasks' outputs are the answer."""

import asyncio

from raytroupe.actors.orchestrator.planner import aggregate
from raytroupe.protocols import AgentSpec, LLMRequest, LLMResponse, SubtaskResult, TeamSpec, Usage
from raytroupe.protocols.job_context import JobContext

TEAM = TeamSpec(agents=(AgentSpec(name="a", role="r"),))
RESULTS = [
    SubtaskResult(id="1", role="r", instructions="What is 2+2?", status="succeeded", output="4"),
    SubtaskResult(id="2", role="r", instructions="Skipped one", status="skipped"),
    SubtaskResult(id="3", role="r", instructions="Capital?", status="succeeded", output=" Oslo\n"),
]


def _answering(text: str):
    async def ask(request: LLMRequest) -> LLMResponse:
        return LLMResponse(text=text, finish_reason="stop", usage=Usage(), model="m", provider="p")

    return ask


def test_a_blank_aggregate_becomes_the_subtasks_outputs():
    answer = asyncio.run(
        aggregate(JobContext(request="job"), RESULTS, TEAM, _answering("  \n"), tenant="t")
    )
    assert answer == "- What is 2+2?: 4\n- Capital?: Oslo"


def test_a_real_aggregate_is_kept():
    assert (
        asyncio.run(
            aggregate(
                JobContext(request="job"), RESULTS, TEAM, _answering("4, and Oslo."), tenant="t"
            )
        )
        == "4, and Oslo."
    )
