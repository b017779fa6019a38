"""The front desk's evaluation and evolution: eval runs, prompt optimisation, A/B experiments.

:class:`Evolution` is a part of the front desk (:class:`~raytroupe.actors.desk.actor.FrontDesk`
answers with it), which keeps the skills and admits the jobs it runs:

- eval runs (:mod:`raytroupe.actors.evals.desk`): a suite's cases as ordinary jobs, scored;
- optimisation (:mod:`raytroupe.actors.evals.optimise`): proposed prompts proven on a suite;
- A/B experiments (:mod:`raytroupe.actors.evals.experiments`): live traffic split between versions,
  decided by a stated test at a fixed horizon.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import structlog

from raytroupe.actors.desk.intent import pool_asker
from raytroupe.actors.endpoint import RouterClient
from raytroupe.actors.evals.desk import EvalDesk, compare_runs
from raytroupe.actors.evals.experiments import ExperimentDesk
from raytroupe.actors.evals.optimise import candidates, optimise_request, parse_variants
from raytroupe.actors.orchestrator.admission import PolicyBook, admit_registered, admit_suite
from raytroupe.actors.skills.desk import SkillDesk
from raytroupe.actors.skills.reflect import lesson_tags
from raytroupe.protocols import (
    AgentMessage,
    Budget,
    InvalidInput,
    JobNotFound,
    JobResult,
    MemoryHits,
    MemoryQuery,
    ModelError,
    TroupeError,
)
from raytroupe.protocols.evals import (
    EvalCase,
    EvalComparison,
    EvalRun,
    EvalSuite,
    OptimisationReport,
    ProposedVersion,
)
from raytroupe.protocols.experiments import ExperimentInfo, ExperimentSpec
from raytroupe.protocols.job_order import JobOrder, Submitter
from raytroupe.protocols.skill import SkillSpec

__all__ = ["Evolution"]

log = structlog.get_logger("raytroupe.desk")


Submit = Callable[[JobOrder, Submitter], Awaitable[str]]
"""The desk's ``submit``: an eval case is an ordinary job."""

Wait = Callable[[str], Awaitable[JobResult | None]]
"""A job's result, from its shard, once it has one."""


class Evolution:
    """Eval runs, optimisation and experiments, as the front desk answers them.

    Args:
        router: how it reaches the LLM pool (the optimiser) and memory (lessons).
        policies, skills, evals, experiments: the desk's.
        submit: the desk's ``submit``.
        wait: a job's result from its shard.
    """

    def __init__(
        self,
        router: RouterClient,
        policies: PolicyBook,
        skills: SkillDesk,
        evals: EvalDesk,
        experiments: ExperimentDesk,
        *,
        submit: Submit,
        wait: Wait,
    ) -> None:
        self._router = router
        self._policies = policies
        self._skills = skills
        self._evals = evals
        self._experiments = experiments
        self._submit = submit
        self._wait = wait

    # -- evaluation (the front desk runs suites) -------------------------------------------

    async def start_eval(
        self,
        suite: EvalSuite,
        *,
        skill: str | None = None,
        team: str | None = None,
        tenant: str = "default",
        admin: bool = True,
        concurrency: int = 4,
        budget: Budget | None = None,
    ) -> str:
        """Run ``suite``'s cases as jobs of ``skill`` (default: the suite's) or ``team``.

        The skill's version is fixed when the run starts (``name@version``), so every case
        runs the same one. Returns the run's id; the run goes on in the background.

        Raises:
            InvalidInput: neither a skill nor a team (and the suite names no skill), or
                both; ``concurrency`` out of 1-64.
            SkillNotFound, TeamNotFound, Forbidden: as :meth:`submit` would raise.
        """
        skill = skill or (None if team else suite.skill)
        if (skill is None) == (team is None):
            raise InvalidInput("an eval runs a skill or a team (one of them)", field="skill")
        policy_name, policy = self._policies.policy(tenant)
        if not admin:
            admit_suite(suite, policy_name, policy)
        ref = None
        if skill is not None:
            ref = self._skills.resolve(skill, policy_name, None if admin else policy).ref
        elif not admin:
            admit_registered(team or "", policy_name, policy)
        target = f"skill:{ref}" if ref else f"team:{team}"

        async def submit(case: EvalCase, left: Budget | None) -> str:
            order = JobOrder(task=case.task, team=team, skill=ref, input=case.input, budget=left)
            return await self._submit(order, Submitter(tenant=tenant, admin=admin, by="eval"))

        async def wait(job_id: str) -> JobResult:
            result = await self._wait(job_id)
            if result is None:  # pragma: no cover - wait(None) returns only with a result
                raise JobNotFound(f"job {job_id} has no result", job_id=job_id)
            return result

        return self._evals.start(suite, target, submit, wait, tenant=tenant,
                                 concurrency=concurrency, budget=budget)  # fmt: skip

    async def optimise_skill(
        self,
        name: str,
        suite: EvalSuite,
        *,
        variants: int = 3,
        model: str = "default",
        concurrency: int = 4,
        budget: Budget | None = None,
        promote: bool = False,
        source: str = "optimiser",
    ) -> OptimisationReport:
        """Propose better prompts for skill ``name`` and prove them on ``suite``.

        Runs the current version on the suite, asks the optimiser model for ``variants``
        (from the failures and the skill's lessons), registers each as a proposed version,
        runs each on the suite and compares it with the current one (see
        :mod:`raytroupe.actors.evals.optimise`). With ``promote``, the best variant that beats the
        current version becomes current. Waits for every run.

        Raises:
            SkillNotFound: no such skill.
            ModelError: the optimiser's answer holds no usable variant.
        """
        skill = self._skills.registry.get(name)
        base = await self._finished(
            await self.start_eval(suite, skill=skill.ref, concurrency=concurrency, budget=budget)
        )
        ask = pool_asker(self._router, base.id, "default")
        lessons = await self._skill_lessons(skill, suite)
        answer = await ask(optimise_request(skill, base, lessons, variants, model))
        try:
            proposals = parse_variants(answer.text, variants)
        except ValueError as exc:
            raise ModelError(f"optimiser: {exc}", answer=answer.text[:2000]) from None
        found = []
        for spec, proposal in zip(
            candidates(skill, proposals, base.id[-4:]), proposals, strict=True
        ):
            self._skills.registry.propose(await self._skills.runnable(spec), source=source)
            run = await self._finished(
                await self.start_eval(suite, skill=spec.ref, concurrency=concurrency, budget=budget)
            )
            compared = compare_runs(base, run)
            found.append(ProposedVersion(
                version=spec.version, run=run.id, score=run.score,
                mean_diff=compared.mean_diff, p_value=compared.p_value,
                beats=compared.mean_diff > 0 and compared.significant,
                instructions=spec.prompt.instructions,
                rationale=str(proposal.get("rationale", "")),
            ))  # fmt: skip
        winners = sorted((c for c in found if c.beats), key=lambda c: -c.score)
        best = winners[0].version if winners else None
        if promote and best is not None:
            self._skills.registry.promote(name, best, source=source)
        log.info("skill_optimised", skill=name, best=best, promoted=promote and bool(best))
        return OptimisationReport(
            skill=name, version=skill.version, suite=suite.name, baseline_run=base.id,
            baseline_score=base.score, candidates=tuple(found), best=best,
            promoted=promote and best is not None,
        )  # fmt: skip

    async def promote_skill(self, name: str, version: str, *, source: str = "api") -> SkillSpec:
        """Make a registered version (an optimiser's proposal) the current one.

        Raises:
            SkillNotFound: no such skill or version.
        """
        return self._skills.registry.promote(name, version, source=source)

    async def _finished(self, run_id: str) -> EvalRun:
        return await self._evals.wait(run_id, None)

    async def _skill_lessons(self, skill: SkillSpec, suite: EvalSuite) -> tuple[str, ...]:
        """The skill's lessons (of the default tenant) closest to the suite's requests."""
        text = " ".join(c.task for c in suite.cases[:20])[:2000] or skill.description
        query = MemoryQuery(query=text, k=10, tags=lesson_tags(skill.name))
        message = AgentMessage(sender="desk", recipient="memory", tenant="default",
                               payload=query)  # fmt: skip
        try:
            reply = await self._router.request(message)
        except TroupeError:
            return ()
        return (
            tuple(h.text for h in reply.payload.hits)
            if isinstance(reply.payload, MemoryHits)
            else ()
        )

    async def eval_run(
        self, run_id: str, timeout: float | None = 0.0, *, tenant: str | None = None
    ) -> EvalRun:
        """An eval run as it stands; with ``timeout``, once it finished (or that long).

        Raises:
            JobNotFound: no such run (of ``tenant``, when given).
        """
        run = self._evals.run(run_id, tenant)  # raises for another tenant's run
        if timeout is None or timeout > 0:
            return await self._evals.wait(run_id, timeout)
        return run

    async def eval_runs(self, *, tenant: str | None = None) -> list[EvalRun]:
        """Eval runs (of ``tenant``, or all), oldest first, without their cases."""
        return self._evals.runs(tenant)

    async def compare_evals(
        self, base: str, other: str, *, tenant: str | None = None
    ) -> EvalComparison:
        """Two runs of one suite, case by case, with a paired significance test.

        Raises:
            JobNotFound: a run that does not exist (of ``tenant``).
            InvalidInput: runs of different suites.
        """
        return compare_runs(self._evals.run(base, tenant), self._evals.run(other, tenant))

    # -- A/B experiments ---------------------------------------------------------------------

    async def start_experiment(self, spec: ExperimentSpec) -> ExperimentInfo:
        """Split the skill's live traffic between versions until the test decides.

        Raises:
            SkillNotFound: the skill, or an arm's version, is not registered.
            Conflict: the name is taken, or the skill has a running experiment.
        """
        return self._experiments.start(spec)

    async def experiment(self, name: str) -> ExperimentInfo:
        """An experiment with each arm's figures (and the decision, once made).

        Raises:
            ExperimentNotFound: no such experiment.
        """
        return self._experiments.info(name)

    async def experiments(self) -> list[ExperimentInfo]:
        """Every experiment, oldest first."""
        return self._experiments.every()

    async def stop_experiment(self, name: str, *, by: str = "api") -> ExperimentInfo:
        """End a running experiment without a verdict; new jobs run the current version.

        Raises:
            ExperimentNotFound: no such experiment.
            Conflict: it has ended already.
        """
        return self._experiments.stop(name, by=by)
