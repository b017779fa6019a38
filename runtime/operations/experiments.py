"""A/B experiments on skills' live traffic: start, list, read, stop. For admins only.

An experiment changes which version every tenant's jobs run and is measured over every
tenant's jobs, so only an admin key (or the driver) may start, read or stop one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Final

from pydantic import Field

from raytroupe.protocols.addresses import NAME_PATTERN
from raytroupe.protocols.experiments import ExperimentInfo, ExperimentSpec
from raytroupe.runtime.operations.declare import At, given, operation

__all__ = ["experiment", "experiments", "start_experiment", "stop_experiment"]

TAG: Final = "evaluation"

Name = Annotated[str, Field(pattern=rf"^{NAME_PATTERN}$")]


@operation("POST", "/v1/experiments", cli="experiments start", admin=True, status=201)
async def start_experiment(at: At, spec: ExperimentSpec | Mapping[str, Any]) -> ExperimentInfo:
    """Split a skill's live traffic between versions until the stated test decides.

    Jobs asking for the skill by name go to an arm by a hash of their id (see
    :mod:`raytroupe.actors.evals.experiments`); ``name@version`` jobs are left as they are.

    Raises:
        SkillNotFound: the skill or an arm's version is not registered.
        Conflict: the name is taken, or the skill has a running experiment.
    """
    return await at.system.evolution.start_experiment(given(ExperimentSpec, spec))


@operation("GET", "/v1/experiments", cli="experiments list", admin=True)
async def experiments(at: At) -> list[ExperimentInfo]:
    """Every experiment, oldest first, with each arm's figures."""
    return await at.system.evolution.experiments()


@operation("GET", "/v1/experiments/{name}", cli="experiments show", admin=True)
async def experiment(at: At, name: Name) -> ExperimentInfo:
    """One experiment: each arm's figures, and the decision once made.

    Raises:
        JobNotFound: no experiment of that name.
    """
    return await at.system.evolution.experiment(name)


@operation("POST", "/v1/experiments/{name}/stop", cli="experiments stop", admin=True)
async def stop_experiment(at: At, name: Name) -> ExperimentInfo:
    """End a running experiment without a verdict; new jobs run the current version."""
    return await at.system.evolution.stop_experiment(name, by=at.source)
