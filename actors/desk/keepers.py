"""What the front desk keeps, on one journal: the parts it is composed of.

:class:`Keepers` opens the desk's parts on a journal (or in memory, before the journal is
open): sessions, the team catalog, tenant policies, inline teams, skills, experiments, what a
job runs, and the evolution of skills (eval runs, optimisation, experiments).
:class:`~raytroupe.actors.desk.actor.FrontDesk` makes a new one when it opens its journal.
"""

from __future__ import annotations

from raytroupe.actors.desk.catalog import TeamCatalog
from raytroupe.actors.desk.evolution import Evolution, Submit, Wait
from raytroupe.actors.desk.inline import InlineTeams
from raytroupe.actors.desk.intent import TeamChooser, pool_asker
from raytroupe.actors.desk.sessions import SessionDesk, SessionStore
from raytroupe.actors.desk.what_runs import WhatRuns
from raytroupe.actors.endpoint import RouterClient
from raytroupe.actors.evals.desk import EvalDesk, EvalStore
from raytroupe.actors.evals.experiment_store import ExperimentStore
from raytroupe.actors.evals.experiments import ExperimentDesk
from raytroupe.actors.guardrails.store import GuardrailStore
from raytroupe.actors.orchestrator.admission import PolicyBook
from raytroupe.actors.orchestrator.journal import Journal
from raytroupe.actors.orchestrator.shards import TeamProvisioner
from raytroupe.actors.skills.config import SkillsConfig
from raytroupe.actors.skills.desk import SkillDesk
from raytroupe.actors.skills.registry import SkillStore
from raytroupe.protocols.config.guardrails import GuardrailsConfig

__all__ = ["Keepers"]


class Keepers:
    """The desk's parts, keeping teams, policies, skills, sessions, evals in ``journal``.

    Args:
        journal: where they are kept; None keeps them in memory.
        router: how evals and the evolution of skills reach the LLM pool.
        provisioner: makes a registered team's agents ready when it is put.
        skills_config: where skill files are loaded from, and how unnamed jobs are routed.
        chooser: the intent cascade among teams and skills.
        submit: how the evolution of skills submits a job (the desk's own ``submit``).
        wait: how it waits for a job's result.
        guardrails: what guardrails may run (the callables a rule may name).
    """

    def __init__(
        self,
        journal: Journal | None,
        router: RouterClient,
        provisioner: TeamProvisioner,
        skills_config: SkillsConfig,
        chooser: TeamChooser,
        *,
        submit: Submit,
        wait: Wait,
        guardrails: GuardrailsConfig | None = None,
    ) -> None:
        db = journal.db if journal is not None else None
        callables = guardrails.callables if guardrails is not None else ()
        self.guardrails = (
            GuardrailStore(db, callables) if db else GuardrailStore.in_memory(callables)
        )
        self.sessions = SessionDesk(SessionStore(db) if db else SessionStore.in_memory())
        self.catalog = TeamCatalog(journal, provisioner)
        self.policies = PolicyBook(journal.policies() if journal else None)
        self.inline = InlineTeams(journal, provisioner)
        self.skills = SkillDesk(
            skills_config, SkillStore(db) if db else None, provisioner, self.catalog.team,
        )  # fmt: skip
        evals = EvalDesk(
            EvalStore(db) if db else None,
            lambda run_id, tenant: pool_asker(router, run_id, tenant),
        )
        self.experiments = ExperimentDesk(  # the shards write outcomes to the journal's
            ExperimentStore(db) if db else ExperimentStore.in_memory(),
            self.skills.registry,
            journal.known if journal is not None else lambda _: (False, None),
            shared=journal is not None,
        )
        self.what_runs = WhatRuns(
            self.policies, self.skills, self.experiments, self.catalog,
            chooser=chooser, routing=skills_config.routing,
        )  # fmt: skip
        self.evolution = Evolution(
            router, self.policies, self.skills, evals, self.experiments,
            submit=submit, wait=wait,
        )  # fmt: skip
