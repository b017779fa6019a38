"""The orchestrator's graph methods: checkpoints, resume, fork, and child jobs of nodes.

:class:`GraphControl` is a part of :class:`~raytroupe.actors.orchestrator.actor.Orchestrator` (a
mixin: its methods are the actor's). Each method is answered by the shard that owns the
job, as the other job methods are.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from typing import Any, Final, cast

import structlog

from raytroupe.actors.offload import on_loop
from raytroupe.actors.orchestrator.admission import runs_inline
from raytroupe.actors.orchestrator.graphs.desk import GraphDesk
from raytroupe.actors.orchestrator.jobs import Job
from raytroupe.actors.orchestrator.shards import Admitted, job_owner, new_job_id
from raytroupe.protocols import InvalidInput, JobResult, TroupeError
from raytroupe.protocols.bounded import ANSWER_WORK_S
from raytroupe.protocols.graph import GraphCheckpoint, GraphInterrupt, GraphNode

__all__ = ["MAX_CHILD_DEPTH", "GraphControl"]

MAX_CHILD_DEPTH: Final = 4
"""Graph jobs within graph jobs (team or skill nodes whose teams have graphs), at most."""

log = structlog.get_logger("raytroupe.orchestrator")


class GraphControl:
    """Checkpoints, interrupts and forks of graph jobs: methods of every shard."""

    _shard: int
    _graphs: GraphDesk
    _owns: Callable[[str], bool]
    _job: Callable[..., Job]
    _adopt: Callable[[Admitted], Awaitable[None]]
    _readmit: Callable[..., Awaitable[None]]
    use_inline: Callable[..., Awaitable[None]]
    submit: Callable[..., Awaitable[str]]
    _at_owner: Callable[..., Awaitable[Any]]

    @job_owner
    async def checkpoints(self, job_id: str, *, tenant: str | None = None) -> list[GraphCheckpoint]:
        """The job's checkpoints, by subgraph then superstep (none: not a graph job).

        Raises:
            JobNotFound: no such job (of ``tenant``, when given).
        """
        self._job(job_id, tenant)
        return await asyncio.to_thread(self._graphs.checkpoints, job_id)

    @job_owner
    async def resume(
        self,
        job_id: str,
        *,
        value: Any = None,
        state: dict[str, Any] | None = None,
        interrupt: str | None = None,
        tenant: str | None = None,
    ) -> GraphInterrupt:
        """Let a paused graph go on: with a ``value`` (for the node), a ``state`` edit, both.

        ``interrupt`` names the interrupt (needed only when several wait). The answer is
        journaled before the graph is woken: a restart finds it. A tenant's job is admitted
        again first, under its policy of today (see ``admission.readmit``): refused, it stays
        paused where it is, nothing recorded.

        Raises:
            JobNotFound: no such job (of ``tenant``, when given).
            Forbidden: today's policy refuses a field of the job.
            Conflict: the job waits at no interrupt (or not at that one).
            InvalidInput: the edit or value would leave the state invalid.
        """
        job = self._job(job_id, tenant)
        await self._readmit(job, by_admin=job.admin)  # an admin's job goes on as admitted
        return await self._graphs.resume(job, value, state, interrupt)

    @job_owner
    async def fork(
        self,
        job_id: str,
        step: int,
        *,
        state: dict[str, Any] | None = None,
        tenant: str | None = None,
        admin: bool = False,
    ) -> str:
        """Start a new job of the same task and team from checkpoint ``step`` of ``job_id``.

        ``state`` edits the checkpoint's state first (a "what if"); the new job is recorded
        as a fork of the original, and runs on the original's shard. The fork is the
        forker's job: unless an admin forks (``admin``, or a driver's call without a
        ``tenant``), it is admitted again first, under the tenant's policy of today (see
        ``admission.readmit``), whoever submitted the original, and an inline team is counted
        within the tenant's live agents: refused, nothing is recorded or started.

        Raises:
            JobNotFound: no such job (of ``tenant``, when given).
            Forbidden: today's policy refuses a field of the job.
            InvalidInput: the job is not a graph's, has no such checkpoint, or the edit
                leaves the state invalid.
        """
        source = self._job(job_id, tenant)
        graph = source.team.graph
        if graph is None:
            raise InvalidInput(f"job {job_id} is not a graph's: it has no checkpoints")
        # a new job, the forker's: an admin's fork runs as it is, a tenant's under today's
        # policy, whoever submitted the original (unscoped, a driver's call: an admin's)
        admin = admin or tenant is None
        await self._readmit(source, by_admin=admin)
        new_id = new_job_id(self._shard)
        # the edit against the state's schema (the tenant's patterns): off the loop, in time
        start = await on_loop().run(
            source.tenant, ANSWER_WORK_S, "answer_work_s",
            self._graphs.fork_point, job_id, graph, step, state, new_id,
        )  # fmt: skip
        if runs_inline(source):  # its agents run again: within the tenant's live agents
            if self._shard == 0:
                await self.use_inline(source.tenant, source.team)
            else:
                await self._other().ask(0, "use_inline", source.tenant, source.team)
        await asyncio.to_thread(self._graphs.store.fork, new_id, start, (job_id, step, state))
        await self._adopt(
            Admitted(
                id=new_id,
                task=source.task,
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
                forked_from={"job_id": job_id, "step": step, "state": state},
            )
        )
        log.info("job_forked", job_id=new_id, parent=job_id, step=step)
        return new_id

    async def graph_child(
        self, parent: Job, node: GraphNode, task: str, given: Any, key: str
    ) -> JobResult:
        """Run a graph's team or skill node as a job of the parent's tenant; its result.

        The child's id is journaled as soon as it exists: a resumed parent waits for the
        same child (resumed by its own shard) instead of starting another. The child is
        admitted as a tenant's job, under the tenant's policy, whoever submitted the parent,
        and its model calls draw on the parent's budget account: together they keep one budget.
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
            submit = self.submit if self._shard == 0 else self._front_submit
            budget = parent.budget  # one budget for the job and its children: its account
            account = (budget.account or parent.id) if budget is not None else None
            budget = None if budget is None else budget.model_copy(update={"account": None})
            child_id = await submit(
                task,
                node.team,
                tenant=parent.tenant,
                budget=budget,
                admin=False,
                skill=node.skill,
                input=given,
                account=account,
            )
            await asyncio.to_thread(store.child, parent.id, key, child_id)
            log.info("graph_child_started", job_id=parent.id, node=node.id, child=child_id)
        try:
            result: JobResult | None = await self._at_owner(child_id, "wait", None)
        except asyncio.CancelledError:
            if parent.cancel_requested:
                with contextlib.suppress(TroupeError):
                    await self._at_owner(child_id, "cancel")
            raise
        assert result is not None  # noqa: S101 - waited without a timeout
        return result

    async def _front_submit(self, *args: Any, **kwargs: Any) -> str:
        return cast("str", await self._other().ask(0, "submit", *args, **kwargs))

    _other: Callable[[], Any]
