"""Jobs read back from the journal: unfinished ones to resume, finished ones to fork.

:class:`RestoredJobs` reads the journal's tables (:mod:`raytroupe.actors.orchestrator.journal`
writes them): every job without a result, with its plan and finished subtasks, as
:class:`Unfinished` rows or as jobs ready to run again; a finished job with its result and
what it ran under (budget, images, skill and input, how it was admitted).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import TypeAdapter, ValidationError

from raytroupe.actors.orchestrator.jobs import Job, last_event
from raytroupe.actors.state import Database, first
from raytroupe.protocols import (
    Budget,
    ImagePart,
    JobEvent,
    JobResult,
    Plan,
    SubtaskResult,
    TeamSpec,
)
from raytroupe.protocols.job_context import JobContext
from raytroupe.protocols.skill import SkillSpec

__all__ = ["IMAGES", "RestoredJobs", "Unfinished"]

IMAGES: TypeAdapter[tuple[ImagePart, ...]] = TypeAdapter(tuple[ImagePart, ...])
"""How a job's images are kept in the journal (``job_images``)."""


@dataclass(frozen=True)
class Unfinished:
    """A job the journal holds without a result: what is needed to resume it."""

    job_id: str
    context: JobContext
    team: TeamSpec
    tenant: str
    budget: Budget | None
    submitted_at: float
    plan: Plan | None
    done: dict[str, SubtaskResult]
    images: tuple[ImagePart, ...] = ()
    skill: SkillSpec | None = None
    input: Any = None
    admin: bool = False


class RestoredJobs:
    """The journal's jobs, read back from its database ``db``."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def load(self, job_id: str) -> tuple[TeamSpec, str, JobResult] | None:
        """A finished job's team, tenant and result (None if unknown or unfinished)."""
        row = first(
            self._db.execute("SELECT team, tenant, result FROM jobs WHERE id = ?", (job_id,))
        )
        if row is None or row[2] is None:
            return None
        return TeamSpec.model_validate_json(row[0]), row[1], JobResult.model_validate_json(row[2])

    def known(self, job_id: str) -> tuple[bool, JobResult | None]:
        """(whether the job is journaled, its result if it has one)."""
        row = first(self._db.execute("SELECT result FROM jobs WHERE id = ?", (job_id,)))
        if row is None:
            return False, None
        return True, JobResult.model_validate_json(row[0]) if row[0] is not None else None

    def unfinished(self, owns: Callable[[str], bool] = lambda _: True) -> list[Unfinished]:
        """Every job without a result, oldest first, with its plan and finished subtasks.

        Only those whose id ``owns`` (an orchestrator shard's partition of the journal).
        """
        rows = self._db.execute(
            "SELECT id, task, team, tenant, budget, submitted_at, admin, context FROM jobs "
            "WHERE result IS NULL ORDER BY submitted_at"
        )
        found = []
        for job_id, task, team, tenant, budget, submitted_at, admin, context in rows:
            if not owns(job_id):
                continue
            plan_row = first(self._db.execute("SELECT plan FROM plans WHERE job_id = ?", (job_id,)))
            done = {
                sid: SubtaskResult.model_validate_json(result)
                for sid, result in self._db.execute(
                    "SELECT subtask_id, result FROM subtasks WHERE job_id = ?", (job_id,)
                )
            }
            images, skill, given = self._given(job_id)
            found.append(
                Unfinished(
                    skill=skill,
                    input=given,
                    images=images,
                    job_id=job_id,
                    context=_context(task, context),
                    team=TeamSpec.model_validate_json(team),
                    tenant=tenant,
                    budget=None if budget is None else Budget.model_validate_json(budget),
                    submitted_at=submitted_at,
                    plan=None if plan_row is None else Plan.model_validate_json(plan_row[0]),
                    done=done,
                    admin=bool(admin),
                )
            )
        return found

    def _given(self, job_id: str) -> tuple[tuple[ImagePart, ...], SkillSpec | None, Any]:
        """A job's images, and a skill job's skill version and structured input."""
        images_row = first(
            self._db.execute("SELECT images FROM job_images WHERE job_id = ?", (job_id,))
        )
        skill_row = first(
            self._db.execute("SELECT skill, input FROM job_skills WHERE job_id = ?", (job_id,))
        )
        return (
            () if images_row is None else IMAGES.validate_json(images_row[0]),
            None if skill_row is None else SkillSpec.model_validate_json(skill_row[0]),
            None if skill_row is None or skill_row[1] is None else json.loads(skill_row[1]),
        )

    def resumable(self, owns: Callable[[str], bool] = lambda _: True) -> list[Job]:
        """Every unfinished job whose id ``owns``, ready to run again.

        With its plan and finished subtasks.
        """
        return [
            Job(
                id=found.job_id,
                context=found.context,
                team=found.team,
                tenant=found.tenant,
                submitted_at=found.submitted_at,
                budget=found.budget,
                plan=found.plan,
                done=found.done,
                images=found.images,
                skill=found.skill,
                input=found.input,
                admin=found.admin,
                events=self.events(found.job_id),
                taken=self.takers(found.job_id),
            )
            for found in self.unfinished(owns)
        ]

    def takers(self, job_id: str) -> dict[str, str]:
        """The agent each subtask of the job was last taken by."""
        rows = self._db.execute(
            "SELECT task_id, agent FROM subtask_takers WHERE job_id = ?", (job_id,)
        )
        return dict(rows)

    def events(self, job_id: str) -> list[JobEvent]:
        """The job's event log as journaled, in order (empty: journaled before events were).

        An event that does not read back (written by a newer version) ends it there: a job
        goes on numbering after the events it has, and has no gaps.
        """
        rows = self._db.execute(
            "SELECT seq, event FROM job_events WHERE job_id = ? ORDER BY seq", (job_id,)
        )
        events: list[JobEvent] = []
        for seq, text in rows:
            try:
                event = JobEvent.model_validate_json(text)
            except ValidationError:
                break
            if seq != len(events) + 1:
                break
            events.append(event)
        return events

    def finished(self, job_id: str) -> Job | None:
        """A job that finished before this process started, with its result.

        With what it ran under (budget, images, skill and input, how it was admitted): a
        fork of it starts from these, and is admitted again by them.
        """
        loaded = self.load(job_id)
        if loaded is None:
            return None
        team, tenant, result = loaded
        row = first(
            self._db.execute(
                "SELECT budget, submitted_by, admin, task, context FROM jobs WHERE id = ?",
                (job_id,),
            )
        )
        budget, submitted_by, admin, task, context = row or (None, None, None, result.task, None)
        images, skill, given = self._given(job_id)
        events = self.events(job_id)
        if not events:  # journaled before its events were: its last one, in effect
            kind, data = last_event(result)
            events = [JobEvent.model_validate(
                {"job_id": job_id, "seq": 1, "at": result.timings.finished_at, "type": kind,
                 "data": data}
            )]  # fmt: skip
        return Job(
            id=job_id,
            context=_context(task, context),
            team=team,
            tenant=tenant,
            submitted_at=result.timings.submitted_at,
            status=result.status,
            result=result,
            events=events,
            budget=None if budget is None else Budget.model_validate_json(budget),
            images=images,
            skill=skill,
            input=given,
            submitted_by=submitted_by,
            admin=bool(admin),
        )


def _context(task: str, context: str | None) -> JobContext:
    """A journaled job's context, as recorded.

    A job journaled before contexts were (``context`` NULL) has its task column as its
    request: the prompt it was given then, its context glued on.
    """
    if context is None:
        return JobContext(request=task)
    return JobContext.model_validate_json(context)
