"""Eval runs: start one on the cluster, follow it, list and compare runs.

Any caller may run a suite: its cases run as the caller's tenant's jobs, under its policy (a
tenant's suite may not name custom scorers, and its judges use models it may use). A run is
seen only by its tenant (and admins).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Final

from pydantic import Field

from raytroupe.protocols import Budget
from raytroupe.protocols.evals import EvalComparison, EvalRun, EvalSuite
from raytroupe.protocols.http import EvalAccepted
from raytroupe.runtime.operations.declare import At, given, operation

__all__ = ["compare_evals", "eval_run", "evals", "start_eval"]

TAG: Final = "evaluation"

MAX_WAIT_S: Final = 60.0
RunId = Annotated[str, Field(pattern=r"^eval-[0-9a-f]{16}$")]
"""What a run id looks like (anything else is refused before it reaches the store)."""


@operation("POST", "/v1/evals", cli="eval", status=202)
async def start_eval(
    at: At,
    suite: EvalSuite | Mapping[str, Any],
    *,
    skill: Annotated[str, Field(max_length=81)] | None = None,
    team: Annotated[str, Field(max_length=64)] | None = None,
    concurrency: Annotated[int, Field(ge=1, le=64)] = 4,
    budget: Budget | None = None,
) -> EvalAccepted:
    """Start running an eval suite against a skill or team; follow it with :func:`eval_run`.

    Its cases run as jobs of ``skill`` (default: the suite's; its version is fixed when the
    run starts) or ``team``, ``concurrency`` at once, within ``budget``, as the caller's
    tenant.

    Raises:
        SkillNotFound, TeamNotFound: the target is not registered (or not the caller's).
        Forbidden: the tenant's policy refuses a field of the suite.
    """
    run_id = await at.system.evolution.start_eval(
        given(EvalSuite, suite), skill=skill, team=team, tenant=at.tenant, admin=at.admin,
        concurrency=concurrency, budget=budget,
    )  # fmt: skip
    return EvalAccepted(id=run_id, url=f"/v1/evals/{run_id}")


@operation("GET", "/v1/evals", cli="evals list")
async def evals(at: At) -> list[EvalRun]:
    """The caller's tenant's eval runs (an admin's: every run), oldest first, without cases."""
    return await at.system.evolution.eval_runs(tenant=at.scope)


@operation("GET", "/v1/evals/compare", cli="evals compare")
async def compare_evals(at: At, base: RunId, other: RunId) -> EvalComparison:
    """Two runs of one suite, case by case, with a paired sign-flip permutation test."""
    return await at.system.evolution.compare_evals(base, other, tenant=at.scope)


@operation("GET", "/v1/evals/{run_id}", cli="evals show")
async def eval_run(
    at: At, run_id: RunId, *, wait: Annotated[float, Field(ge=0.0, le=MAX_WAIT_S)] = 0.0
) -> EvalRun:
    """An eval run with each case's result; ``wait`` seconds (at most 60) for it to finish.

    Raises:
        JobNotFound: no such run (or not the caller's tenant's).
    """
    return await at.system.evolution.eval_run(run_id, wait, tenant=at.scope)
