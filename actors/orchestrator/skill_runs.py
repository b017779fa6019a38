"""A skill job's parts of a run: its quality gate, its lessons and its reflection.

:class:`SkillRuns` is a part of the job runner
(:class:`~raytroupe.actors.orchestrator.runner.JobRunner` asks it): a react or direct skill's
answer through its quality gate, a team skill's answer gated and revised by its model, the
skill's lessons recalled from memory for a request, and the lesson its reflector writes
about a finished job when the skill's policy says so.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Protocol

import structlog

from raytroupe.actors.endpoint import RouterClient
from raytroupe.actors.orchestrator.dispatch import Dispatcher
from raytroupe.actors.orchestrator.jobs import Job, emit, job_message
from raytroupe.actors.skills.reflect import (
    lesson_write,
    lessons_query,
    reflect_request,
    reflection_due,
)
from raytroupe.actors.skills.run import (
    Produce,
    direct_request,
    gated,
    react_plan,
    request_text,
    revise_request,
)
from raytroupe.actors.telemetry.jobs import add_span
from raytroupe.protocols import (
    ChatMessage,
    JobResult,
    LLMRequest,
    LLMResponse,
    MemoryHits,
    QualityGateFailed,
    SubtaskResult,
    TroupeError,
)
from raytroupe.protocols.skill import SkillSpec

__all__ = ["Answered", "SkillRuns"]

log = structlog.get_logger("raytroupe.orchestrator")

Ask = Callable[[LLMRequest], Awaitable[LLMResponse]]


class Answered(Protocol):
    """What a job's run has come to: its answer and subtasks (the runner's progress)."""

    answer: str
    subtasks: list[SubtaskResult]


class SkillRuns:
    """The skill parts of the jobs a runner runs (the runner's).

    Args:
        router: how it reaches memory (lessons).
        dispatcher: runs a react skill's subtask at its agent.
        ask: a job's model call, as the runner makes it (lessons told, the job's budget).
    """

    def __init__(
        self,
        router: RouterClient,
        dispatcher: Dispatcher,
        ask: Callable[[Job, LLMRequest], Awaitable[LLMResponse]],
    ) -> None:
        self._router = router
        self._dispatcher = dispatcher
        self._ask = ask

    async def skill(self, job: Job, skill: SkillSpec, ask: Ask, done: Answered) -> None:
        """A react or direct skill's answer, through its quality gate."""
        text = request_text(job.prompt, job.input)
        history: list[ChatMessage] = []
        lessons = await self.lessons(job, skill, request_text(job.asked, job.input))

        async def produce(
            attempt: int, previous: str | None, feedback: str | None
        ) -> tuple[str, list[SubtaskResult]]:
            if skill.execution_mode == "direct":
                if previous is not None and feedback is not None:
                    history.extend((ChatMessage(role="assistant", content=previous),
                                    ChatMessage(role="user", content=feedback)))  # fmt: skip
                call = direct_request(skill, text, tuple(history), lessons=lessons)
                return (await ask(call)).text, []
            results = await self._dispatcher.run(
                job, react_plan(text, attempt, previous, feedback, lessons), ask
            )
            return results[0].output, results

        await self._gated(job, skill, text, produce, ask, done)

    async def revised(self, job: Job, skill: SkillSpec, ask: Ask, done: Answered) -> None:
        """A team's answer through the skill's gate; a failing one is revised by its model."""
        text = request_text(job.prompt, job.input)
        answer, team_subtasks = done.answer, done.subtasks

        async def produce(
            _: int, previous: str | None, feedback: str | None
        ) -> tuple[str, list[SubtaskResult]]:
            if previous is None or feedback is None:
                return answer, []
            return (await ask(revise_request(skill, text, previous, feedback))).text, []

        await self._gated(job, skill, text, produce, ask, done)
        done.subtasks = team_subtasks

    async def _gated(  # noqa: PLR0917 - private, the run's parts
        self, job: Job, skill: SkillSpec, text: str, produce: Produce, ask: Ask, done: Answered
    ) -> None:
        """Run the gate loop; keep its report on the job (and raise if the answer failed).

        Raises:
            QualityGateFailed: the last answer failed; ``detail['checks']`` has every check.
        """
        started = time.time()
        result = await gated(skill, text, produce, ask, budget=job.budget)
        done.answer, done.subtasks, report = result.answer, result.subtasks, result.report
        if report is None:  # the skill's subtask failed: the dispatch error says why
            return
        job.quality = report
        add_span(job, "quality_gate", f"quality gate {skill.ref}", started, time.time(),
                 passed=report.passed, score=report.score, retries=report.retries)  # fmt: skip
        await emit(job, "quality_checked", data=report.model_dump(mode="json"))
        if not report.passed:
            raise QualityGateFailed(
                f"the answer failed its quality gate ({report.retries} retries): "
                + "; ".join(report.problems[:5]),
                problems=report.problems,
                checks=[c.model_dump(mode="json") for c in report.checks],
                score=report.score,
            )

    async def lessons(self, job: Job, skill: SkillSpec, text: str) -> tuple[str, ...]:
        """The skill's lessons closest to this request (none if memory cannot say)."""
        query = lessons_query(skill, text)
        if query is None:
            return ()
        try:
            reply = await self._router.request(job_message(job, "memory", query))
        except TroupeError as exc:  # memory is an aid: the job goes on without
            log.warning("lessons_not_recalled", job_id=job.id, code=exc.code.value)
            return ()
        if not isinstance(reply.payload, MemoryHits):
            return ()
        return tuple(hit.text for hit in reply.payload.hits)

    async def reflect(self, job: Job, result: JobResult) -> None:
        """Have the reflector write a lesson about the job, if its skill's policy says so."""
        skill = job.skill
        if skill is None or not reflection_due(skill, result, job.quality):
            return
        request = reflect_request(skill, request_text(job.asked, job.input), result, job.quality)
        try:  # a lesson is an aid: never a reason for the job to fail
            lesson = (await self._ask(job, request)).text.strip()
            if lesson:
                await self._router.request(
                    job_message(job, "memory", lesson_write(skill, job.id, lesson))
                )
                log.info("lesson_written", job_id=job.id, skill=skill.name)
        except TroupeError as exc:
            log.warning("lesson_not_written", job_id=job.id, code=exc.code.value)
