"""A shard's graph operations: checkpoints, resume, fork, and the child jobs of nodes.

:class:`GraphControl` is a part of a job shard (:class:`~raytroupe.actors.orchestrator.actor.
Orchestrator` answers with it): it reaches the front desk to admit what a graph starts (a
child job, a fork's inline team, today's policies) and the child's shard to wait for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any, Final

import structlog

from raytroupe.actors.offload import on_loop
from raytroupe.actors.orchestrator.admission import PolicyBook, readmit, runs_inline
from raytroupe.actors.orchestrator.graphs.desk import GraphDesk
from raytroupe.actors.orchestrator.jobs import Job
from raytroupe.actors.orchestrator.shards import Admitted, Desk, Shards, new_job_id
from raytroupe.protocols import InvalidInput, JobResult, TroupeError
from raytroupe.protocols.bounded import ANSWER_WORK_S
from raytroupe.protocols.graph import GraphNode
from raytroupe.protocols.graph_checkpoints import GraphCheckpoint, GraphInterrupt, GraphState
from raytroupe.protocols.job_order import JobOrder, Submitter

__all__ = ["MAX_CHILD_DEPTH", "GraphControl"]

MAX_CHILD_DEPTH: Final = 4
"""Graph jobs within graph jobs (team or skill nodes whose teams have graphs), at most."""

log = structlog.get_logger("raytroupe.orchestrator")


class GraphControl:
    """Checkpoints, interrupts, forks and child jobs of one shard's graph jobs.

    Args:
        graphs: the shard's checkpoints and interrupts (in memory or in its journal).
        desk: the front desk (admits child jobs, counts inline teams, keeps policies).
        shards: every job shard (a child may run on any).
        shard: which shard this one is (a fork runs where its original ran).
    """

    def __init__(self, graphs: GraphDesk, desk: Desk, shards: Shards, shard: int) -> None:
        self._graphs = graphs
        self._front = desk
        self._shards = shards
        self._shard = shard

    async def checkpoints(self, job: Job) -> list[GraphCheckpoint]:
        """The job's checkpoints, by subgraph then superstep (none: not a graph job)."""
        return await asyncio.to_thread(self._graphs.checkpoints, job.id)

    async def resume(
        self, job: Job, value: Any, state: GraphState | None, interrupt: str | None
    ) -> GraphInterrupt:
        """Let a paused graph go on: with a ``value`` (for the node), a ``state`` edit, both.

        ``interrupt`` names the interrupt (needed only when several wait). The answer is
        journaled before the graph is woken: a restart finds it. A tenant's job is admitted
        again first, under its policy of today (see ``admission.readmit``): refused, it stays
        paused where it is, nothing recorded.

        Raises:
            Forbidden: today's policy refuses a field of the job.
            Conflict: the job waits at no interrupt (or not at that one).
            InvalidInput: the edit or value would leave the state invalid.
        """
        await self._readmit(job, by_admin=job.admin)  # an admin's job goes on as admitted
        return await self._graphs.resume(job, value, state, interrupt)

    async def fork(
        self, source: Job, step: int, state: GraphState | None, *, admin: bool
    ) -> Admitted:
        """A new job of the same task and team from checkpoint ``step`` of ``source``.

        ``state`` edits the checkpoint's state first (a "what if"); the new job is recorded
        as a fork of the original. The fork is the forker's job: unless an admin forks
        (``admin``: an admin's key, or a driver's call without a tenant), it is admitted
        again first, under the tenant's policy of today (see ``admission.readmit``),
        whoever submitted the original, and an inline team is counted within the tenant's
        live agents: refused, nothing is recorded. The caller starts the returned job.

        Raises:
            Forbidden: today's policy refuses a field of the job.
            InvalidInput: the job is not a graph's, has no such checkpoint, or the edit
                leaves the state invalid.
        """
        graph = source.team.graph
        if graph is None:
            raise InvalidInput(f"job {source.id} is not a graph's: it has no checkpoints")
        await self._readmit(source, by_admin=admin)
        new_id = new_job_id(self._shard)
        # the edit against the state's schema (the tenant's patterns): off the loop, in time
        start = await on_loop().run(
            source.tenant, ANSWER_WORK_S, "answer_work_s",
            self._graphs.fork_point, source.id, graph, step, state, new_id,
        )  # fmt: skip
        if runs_inline(source):  # its agents run again: within the tenant's live agents
            await self._front.use_inline(source.tenant, source.team, refuse=not admin)
        await asyncio.to_thread(self._graphs.store.fork, new_id, start, (source.id, step, state))
        return Admitted(
            id=new_id,
            context=source.context.model_copy(update={"lessons": ()}),  # recalled again
            team=source.team,
            tenant=source.tenant,
            submitted_at=time.time(),
            budget=source.budget,
            route=source.route,
            images=source.images,
            request_id=None,
            registered=source.registered,
            skill=source.skill,
            input=source.input if source.skill else None,
            submitted_by=source.submitted_by,
            admin=admin,
            forked_from={"job_id": source.id, "step": step, "state": state},
        )

    async def child(
        self, parent: Job, node: GraphNode, task: str, given: Any, key: str
    ) -> JobResult:
        """Run a graph's team or skill node as a job of the parent's tenant; its result.

        The child's id is journaled as soon as it exists: a resumed parent waits for the
        same child (resumed by its own shard) instead of starting another. The child is
        admitted by the front desk as a tenant's job, under the tenant's policy, whoever
        submitted the parent, and its model calls draw on the parent's budget account:
        together they keep one budget.
        """
        store = self._graphs.store
        child_id = await asyncio.to_thread(store.child, parent.id, key)
        if child_id is None:
            depth = await asyncio.to_thread(store.depth, parent.id, MAX_CHILD_DEPTH)
            if depth >= MAX_CHILD_DEPTH:
                raise InvalidInput(
                    f"job {parent.id} is already {depth} team or skill nodes deep (a cycle of "
                    f"teams naming each other?): at most {MAX_CHILD_DEPTH}",
                    node=node.id,
                )
            budget = parent.budget  # one budget for the job and its children: its account
            account = (budget.account or parent.id) if budget is not None else None
            budget = None if budget is None else budget.model_copy(update={"account": None})
            order = JobOrder(
                task=task, team=node.team, budget=budget, skill=node.skill, input=given,
                user=parent.context.user,  # the parent's end user: its spend, its jobs list
            )  # fmt: skip
            caller = Submitter(  # the parent's key: its guardrails and spend limits bind it
                tenant=parent.tenant, admin=False, account=account, by=parent.submitted_by
            )
            child_id = await self._front.submit(order, caller)
            await asyncio.to_thread(store.child, parent.id, key, child_id)
            log.info("graph_child_started", job_id=parent.id, node=node.id, child=child_id)
        try:
            result = await self._shards.wait(child_id, None)
        except asyncio.CancelledError:
            if parent.cancel_requested:
                with contextlib.suppress(TroupeError):
                    await self._shards.cancel(child_id)
            raise
        assert result is not None  # noqa: S101 - waited without a timeout
        return result

    async def _readmit(self, job: Job, *, by_admin: bool) -> None:
        """Admit ``job`` again under its tenant's policy of today, before it runs again.

        See :func:`raytroupe.actors.orchestrator.admission.readmit`; ``by_admin``: an admin asks
        (taken as it is). The front desk keeps the policies: it is asked for them.

        Raises:
            Forbidden: a field today's policy refuses.
        """
        if by_admin:
            return
        readmit(job, *PolicyBook(await self._front.policies()).policy(job.tenant))
