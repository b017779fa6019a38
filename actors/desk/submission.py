"""The admission of a submitted job, from its request to its hand-off to a job shard.

:class:`Submission` is a part of the front desk
(:class:`~raytroupe.actors.desk.actor.FrontDesk` asks it to admit each job): what the job
runs, the tenant's policy and budget, its inline team, the context it is shown (a session's
history, its team's or skill's episodes), and the hand-off to the job shard whose turn it
is, counted in its experiment and its session first.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from typing import Any

import structlog

from raytroupe.actors.desk.intake import (
    admitted_documents,
    checked_schema,
    checked_task,
    drawing_on,
    no_account,
    scoped_teams,
    shaped,
    state_input,
)
from raytroupe.actors.desk.intent import TeamChooser, pool_asker
from raytroupe.actors.desk.keepers import Keepers
from raytroupe.actors.desk.sessions import ResultOf
from raytroupe.actors.endpoint import RouterClient
from raytroupe.actors.evals.experiments import Assignment
from raytroupe.actors.guardrails.check import decision_of, guard, guard_json
from raytroupe.actors.offload import on_loop
from raytroupe.actors.orchestrator.admission import admit_budget, admit_registered
from raytroupe.actors.orchestrator.episodes import recalled_examples
from raytroupe.actors.orchestrator.graphs.desk import first_checkpoint
from raytroupe.actors.orchestrator.journal import Journal
from raytroupe.actors.orchestrator.shards import Admitted, Shards, new_job_id
from raytroupe.actors.telemetry.tracing import received
from raytroupe.protocols import GuardrailTripped, InvalidInput, JobResult, TeamSpec
from raytroupe.protocols.bounded import ADMISSION_WORK_S
from raytroupe.protocols.guardrails import BoundGuardrail
from raytroupe.protocols.job_context import JobContext
from raytroupe.protocols.job_order import JobOrder, Submitter
from raytroupe.protocols.policy import unscoped
from raytroupe.protocols.prompts import asked
from raytroupe.protocols.skill import SkillSpec

__all__ = ["Submission"]

log = structlog.get_logger("raytroupe.desk")


class Submission:
    """Admits submitted jobs and hands them to the job shards, in turn (the desk's).

    Args:
        kept: the desk's parts, on its journal.
        journal: the job shards' journal, if any (the teams of unfinished jobs).
        router: how it reaches the LLM pool and memory (a session's summary, episodes).
        chooser: chooses a team by intent, for a job that names none.
        shards: the job shards it hands admitted jobs to.
        turns: the desk's count of jobs, whose next value picks the shard.
    """

    def __init__(
        self,
        kept: Keepers,
        journal: Journal | None,
        *,
        router: RouterClient,
        chooser: TeamChooser,
        shards: Shards,
        turns: itertools.count[int],
    ) -> None:
        self._kept = kept
        self._journal = journal
        self._router = router
        self._chooser = chooser
        self._shards = shards
        self._turns = turns

    async def submit(self, order: JobOrder, caller: Submitter) -> str:
        """Admit ``order`` for ``caller``, hand it to a job shard, and return the job's id.

        ``order.skill`` (``name`` or ``name@version``) runs a registered skill: its current
        version (or that one), kept by the job whatever happens to the registry meanwhile;
        ``input`` is its structured input, checked against its ``input_schema``. A job that
        names no skill, no team and no ``intent`` is routed among the tenant's skills and
        registered teams (see :mod:`raytroupe.actors.skills.routing`); the route is on the
        result.

        ``order.budget`` (default: the team's) bounds every model call made for the job; once
        a call is refused for it, no further subtask starts and the job fails with
        ``budget_exceeded``. Without a ``team``, ``intent`` chooses one of ``teams`` (by
        keyword, then embedding similarity, then a model classifier) before the job starts;
        the route is kept on the result. Text ``attachments`` join its context; images are
        shown to every agent. ``session`` (an id of the tenant's sessions) shows the job the
        session's history beside its task (see :mod:`.sessions`) and records it as the
        session's next turn. ``output_schema`` (a driver's ``output_type``) is the JSON
        Schema the job's answer must satisfy, in place of its team's or skill's: the
        aggregation is held to it by the quality gate, and the answer's data is normalized
        by it. ``stream_answer`` has the aggregation stream its tokens as ``llm_delta``
        events of the job's shard's address, when its text is the answer as it comes (see
        ``runner.streams_answer``).

        ``caller.request_id`` is kept on the job's events and trace; ``by`` on jobs lists;
        ``traceparent``'s span (with tracing on) is the parent of the job's root span.
        ``account`` (a job shard's, for a graph node's child job) is the job whose budget
        account its model calls draw on; an order's budget naming one is refused.
        ``admin=False`` submits for ``tenant`` as a tenant: the job must pass the tenant's
        policy (see :mod:`raytroupe.actors.orchestrator.admission`). Inline teams, an
        admin's too, run under names scoped to ``tenant`` (an admin's may still delegate to
        registered teams' agents by name).

        Raises:
            Forbidden: (a tenant's job) a field its policy refuses; nothing was started.
            ConfigError: no team and no intent configuration, or a target not in ``teams``.
            TeamNotFound: ``team`` names no registered team.
            PlanError: the classifier's answer names no target.
            InvalidInput: the task or a text attachment holds a NUL character; a skill and
                a team both named; ``input`` failing the skill's input schema
                (``detail['fields']``); ``output_schema`` not a valid JSON Schema.
            SkillNotFound: ``skill`` names no registered skill or version.
            SessionNotFound: ``tenant`` has no session ``session``.
            Forbidden: the session is for another end user than ``order.user``.
        """
        tenant, admin, traceparent = caller.tenant, caller.admin, caller.traceparent
        given = checked_task(order.task, order.attachments, order.history)
        output_schema = checked_schema(order.output_schema)
        no_account(order.budget)
        user = (  # a session for an end user takes that user's jobs only
            order.user
            if order.session is None
            else self._kept.sessions.user_of(tenant, order.session, order.user)
        )
        owner = next(self._turns) % len(self._shards)  # in turn
        job_id = new_job_id(owner)
        policy_name, policy = self._kept.policies.policy(tenant)
        team, teams, intent = order.team, order.teams or {}, order.intent
        if order.skill is not None and (team is not None or intent is not None or teams):
            raise InvalidInput("a job names a skill or a team, not both", field="skill")
        if not admin:  # the tenant's own documents: off the loop, in its share, within time
            team, teams = await on_loop().run(
                tenant, ADMISSION_WORK_S, "admission_work_s", admitted_documents,
                tenant, policy_name, policy, order.attachments, team=team, teams=teams,
            )  # fmt: skip
        else:  # an admin's inline teams are its tenant's too: no name of theirs is taken
            kept_names = {agent.name for agent in self._kept.catalog.agents()}
            team, teams = scoped_teams(tenant, team, teams, kept_names)
        # the guardrails that bind whatever runs it check the input before any routing model
        # reads it; those of a team or skill, once it is known
        early = await asyncio.to_thread(
            self._kept.guardrails.binding, tenant, None, None, caller.by
        )
        given, data = await self.guarded(job_id, tenant, given, order.input, early)
        with received(traceparent):  # a routing model's calls: in the caller's trace
            spec, named, route, arm = await self._kept.what_runs.skill_for(
                job_id, asked(given), tenant=tenant, admin=admin, skill=order.skill,
                input=data, routed=team is None and intent is None and not teams,
            )  # fmt: skip
        team = named or team
        registered = isinstance(team, str)
        if isinstance(team, str):
            if not admin:  # a team skill runs its team: the tenant must be allowed that team
                admit_registered(team, policy_name, policy)
            team = self._kept.catalog.team(team)
        elif team is None:
            with received(traceparent):
                team, route = await self._chooser.choose(
                    job_id, given.request, tenant, teams, intent
                )
        elif spec is None:
            self._kept.catalog.check_unregistered(team)
        team, spec = shaped(team, spec, output_schema)
        bound = await asyncio.to_thread(  # a team by the name its author gave it
            self._kept.guardrails.binding, tenant, unscoped(team.name, tenant),
            spec.name if spec else None, caller.by,
        )  # fmt: skip
        late = tuple(g for g in bound if g not in early)
        given, data = await self.guarded(job_id, tenant, given, data, late)
        if spec is None and team.graph is not None and data is not None:
            # the door checks it, against the state's schema: the tenant's patterns
            await on_loop().run(
                tenant, ADMISSION_WORK_S, "admission_work_s",
                first_checkpoint, job_id, team.graph, state_input(data),
            )  # fmt: skip
        budget = order.budget
        if not admin:
            budget = admit_budget(budget, team, policy_name, policy)
        if not registered and spec is None:  # an admin's too: its idle teams make room
            await self._kept.inline.use(
                tenant, team, policy_name, policy, await self.running_teams(), refuse=not admin
            )
        with received(traceparent):
            context = await self.in_context(
                job_id, given, tenant=tenant, session=order.session, team=team, skill=spec,
                user=user,
            )  # fmt: skip
        context = context.model_copy(update={"guardrails": bound, "user": user})
        admitted = Admitted(
            id=job_id,
            context=context,
            team=team,
            tenant=tenant,
            submitted_at=time.time(),
            budget=drawing_on(budget or team.budget, caller.account),
            route=route,
            images=tuple(image for a in order.attachments if (image := a.image()) is not None),
            request_id=caller.request_id,
            registered=registered,
            skill=spec,
            input=data,
            submitted_by=caller.by,
            admin=admin,
            stream_answer=order.stream_answer,
            traceparent=traceparent,
        )
        turn = (order.session, asked(given)) if order.session else None
        await self.hand_off(admitted, arm, turn)
        log.info("job_submitted", job_id=job_id, team=team.name, tenant=tenant,
                 request_id=caller.request_id, shard=owner, session=order.session)  # fmt: skip
        return job_id

    async def guarded(
        self,
        job_id: str,
        tenant: str,
        given: JobContext,
        data: Any,
        bound: tuple[BoundGuardrail, ...],
    ) -> tuple[JobContext, Any]:
        """The job's task, text files, history and structured input after ``input`` guardrails.

        Every decision is kept (:meth:`GuardrailStore.record`): a refusal with no job, as
        nothing was started.

        Raises:
            GuardrailTripped: a blocking guardrail's rule matched; nothing was started.
        """
        if not any(g.at("input") for g in bound):
            return given, data
        ask = pool_asker(self._router, job_id, tenant)
        store = self._kept.guardrails
        try:
            request = await guard(given.request, "input", bound, ask=ask)
            files = [await guard(f.text, "input", bound, ask=ask) for f in given.files]
            turns = [await guard(t.text, "input", bound, ask=ask) for t in given.history.turns]
            data, redacted = (
                await guard_json(data, "input", bound, ask=ask) if data is not None else (None, ())
            )
        except GuardrailTripped as exc:
            await asyncio.to_thread(store.record, tenant, None, decision_of(exc))
            log.info("guardrail_refused_input", tenant=tenant, **exc.detail)
            raise
        decisions = [
            *request.decisions,
            *(d for f in files for d in f.decisions),
            *(d for t in turns for d in t.decisions),
            *redacted,
        ]
        for decision in decisions:
            await asyncio.to_thread(store.record, tenant, job_id, decision)
        history = given.history.model_copy(
            update={
                "turns": tuple(
                    t.model_copy(update={"text": g.text})
                    for t, g in zip(given.history.turns, turns, strict=True)
                )
            }
        )
        update = {
            "request": request.text,
            "files": tuple(
                f.model_copy(update={"text": g.text})
                for f, g in zip(given.files, files, strict=True)
            ),
            "history": history,
        }
        return given.model_copy(update=update), data

    async def in_context(
        self,
        job_id: str,
        given: JobContext,
        *,
        tenant: str,
        session: str | None,
        team: TeamSpec,
        skill: SkillSpec | None,
        user: str | None = None,
    ) -> JobContext:
        """The job's context: what it was ``given``, its history, the episodes it is offered.

        The session's history, and the episodes its team or skill offers it (see
        :mod:`.sessions`, :mod:`raytroupe.actors.orchestrator.episodes`).

        Raises:
            SessionNotFound: ``tenant`` has no session ``session``.
        """
        history = given.history
        if session is not None:  # what the caller gave first (an OpenAI chat's system turns)
            asker = pool_asker(self._router, job_id, tenant)
            kept = await self._kept.sessions.history(tenant, session, self.result_of(tenant), asker)
            history = kept.model_copy(update={"turns": (*history.turns, *kept.turns)})
        examples = await recalled_examples(
            self._router, job_id, asked(given), tenant=tenant, team=team, skill=skill, user=user
        )
        update = {"history": history, "examples": examples, "session": session}
        return given.model_copy(update=update)

    async def hand_off(
        self, admitted: Admitted, arm: Assignment | None, turn: tuple[str, str] | None
    ) -> None:
        """Start an admitted job on its shard, counted in its experiment (if any) first.

        The assignment is written before the job can finish (its outcome updates it) and
        dropped again if the job could not be started. So is the job's ``turn`` of a
        session (the session's id, the task as the caller wrote it): the job is its next
        turn, a failed one if it could not be started.
        """
        if arm is not None:
            self._kept.experiments.record(admitted.id, arm)
        seq = None
        if turn is not None:
            seq = self._kept.sessions.store.add_turn(admitted.tenant, turn[0], admitted.id, turn[1])
        try:
            await self._shards.adopt(admitted)
        except BaseException:
            if arm is not None:
                self._kept.experiments.forget(admitted.id)
            if turn is not None and seq is not None:
                self._kept.sessions.store.settle(admitted.tenant, turn[0], seq, "failed", None)
            raise

    async def running_teams(self) -> set[str]:
        """The teams of unfinished jobs, every shard's (as the journal has them, if any)."""
        if self._journal is not None:
            return await asyncio.to_thread(self._journal.running_teams)
        return await self._shards.running_teams()

    def result_of(self, tenant: str) -> ResultOf:
        """A job of ``tenant``'s result, if it has one yet, asked of its shard."""

        async def result_of(job_id: str) -> JobResult | None:
            return await self._shards.wait(job_id, 0.0, tenant=tenant)

        return result_of
