"""The agent actor: a ReAct loop per subtask (ask the model, run its tool calls, repeat).

Each subtask's loop state (messages, usage, turn count) lives in its own coroutine, never on
the actor, so concurrent subtasks of one agent cannot see each other's state. The number of
subtasks worked on at once is bounded by ``AgentSpec.max_concurrency``. Before each model
call the conversation is kept within the model's context window: the oldest turns are
summarized by the agent's own model (``raytroupe.actors.agent.context``). What the loop decides from
a turn's text (calls written in it, corrective turns, the answer kept) is
``raytroupe.actors.agent.turns``; the loop itself is ``raytroupe.actors.agent.react``, and
the tool calls of one of its turns ``raytroupe.actors.agent.tool_turn``.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, assert_never

import structlog

from raytroupe.actors.agent.react import ReAct
from raytroupe.actors.agent.slots import Slots
from raytroupe.actors.agent.turns import run_of
from raytroupe.actors.endpoint import (
    RestartStore,
    RouterClient,
    TakesBatches,
    expected,
    request_through_restarts,
    serve_envelope,
)
from raytroupe.actors.telemetry.genai import agent_finished, agent_invocation
from raytroupe.protocols import (
    AgentMessage,
    AgentSpec,
    CancelJob,
    Cancelled,
    ErrorCode,
    ErrorPayload,
    InvalidInput,
    SubtaskTaken,
    TaskRequest,
    TaskResult,
    ToolSpec,
    orchestrator_address,
    parse_address,
)

__all__ = ["AgentActor"]

log = structlog.get_logger("raytroupe.agent")

TAKE_WAIT_S = 2.0
"""How long an agent that had a dispatch through its role waits for the job's shard to say
whether another agent took that dispatch first; then it runs it."""


_RESTARTING = frozenset(
    {ErrorCode.UNKNOWN_RECIPIENT, ErrorCode.RECIPIENT_UNAVAILABLE, ErrorCode.DELIVERY}
)
"""What a teammate that is restarting answers, through the router, for a moment."""


def _past(deadline: float | None, pause: float) -> bool:
    return deadline is not None and time.time() + pause >= deadline


@dataclass
class _Joined:
    """A subtask under way, and how many callers wait for it."""

    run: asyncio.Future[TaskResult]
    waiting: int = 0


class AgentActor(TakesBatches):
    """One agent. A plain class; Ray makes it the ``agent/<name>`` actor.

    Tools run in the tool sandboxes (``role:tools``), which enforce the agent's allow-list
    whatever its model asks for; the agent only tells its model about them.

    Args:
        spec: who the agent is (name, role, instructions, model alias, tools, limits).
        router: how it reaches the LLM pool, the tool sandboxes and other actors.
        tools: what the model is told about the agent's tools (from the sandbox's grant).
        clock: the current UNIX time (for deadlines and timestamps; tests pass a fake one).
        restart_store: where :meth:`configure` keeps the configuration, so that a restarted agent
            comes back as it was configured last, roles included (under Ray:
            ``GcsRestartStore("agent/<name>")``), not as it was created.
        team: the team it was made for (shown in its ``repr``, the Ray dashboard's).
    """

    def __init__(
        self,
        spec: AgentSpec,
        router: RouterClient,
        tools: Sequence[ToolSpec] = (),
        *,
        clock: Callable[[], float] = time.time,
        restart_store: RestartStore | None = None,
        team: str = "",
    ) -> None:
        self._team = team
        self._router = router
        self._clock = clock
        self._restart_store = restart_store
        self._roles: tuple[str, ...] = ()
        self._by_job: dict[str, set[asyncio.Task[Any]]] = {}
        self._subtasks: dict[tuple[str | None, str], _Joined] = {}
        self._telling: set[asyncio.Future[str]] = set()
        self._cancelled: deque[str] = deque(maxlen=1000)
        self._spec = spec
        self._tools = tuple(tools)
        self._slots = Slots(spec.max_concurrency)
        self._react = ReAct(spec.name, router, clock, lambda: self._tools)

    def __repr__(self) -> str:
        """What the Ray dashboard shows of it (taken once, when Ray creates the actor)."""
        spec = self._spec
        team = f"team {self._team}, " if self._team else ""
        return (
            f"Agent({spec.name}: {team}role {spec.role}, model {spec.model}, "
            f"{spec.max_concurrency} subtask(s) at once)"
        )

    # -- lifecycle --------------------------------------------------------------------------

    async def on_start(self) -> None:
        """Reach the router; come back as configured last, roles included, when a restart.

        Reaching it now, while the GCS answers, lets the agent serve through a GCS outage
        (see :meth:`RouterClient.connect`).
        """
        await self._router.connect()
        if self._restart_store is None:
            return
        state = await asyncio.to_thread(self._restart_store.load)
        if state is not None and state[0].name == self._spec.name:
            spec, tools, self._roles = state
            self._spec, self._tools = spec, tuple(tools)
            await self._slots.resize(spec.max_concurrency)

    async def on_stop(self) -> None:
        """Stop every subtask running here."""
        for running in self._by_job.values():
            for task in running:
                task.cancel()

    async def spec(self) -> AgentSpec:
        """The agent's current configuration."""
        return self._spec

    async def configure(
        self, spec: AgentSpec, tools: Sequence[ToolSpec] = (), roles: Sequence[str] = ()
    ) -> None:
        """Replace the configuration; subtasks already running keep the one they started with.

        ``roles`` are the router roles the agent is registered under (kept so that a
        restarted router can register it again).

        Raises:
            InvalidInput: ``spec`` names another agent.
        """
        if spec.name != self._spec.name:
            raise InvalidInput(f"agent {self._spec.name!r} cannot become {spec.name!r}")
        self._tools = tuple(tools)
        self._roles = tuple(roles)
        await self._slots.resize(spec.max_concurrency)  # counting the subtasks running now
        self._spec = spec
        if self._restart_store is not None:
            self._restart_store.save((spec, self._tools, self._roles))

    async def registration(self) -> list[str]:
        """The router roles this agent holds."""
        return list(self._roles)

    async def receive(self, data: bytes) -> bytes | None:
        """Envelope entry point (called by the router)."""
        return await serve_envelope(
            data, self._handle, me=self._spec.name, accepts=(TaskRequest, CancelJob)
        )

    async def _handle(
        self, message: AgentMessage, payload: TaskRequest | CancelJob
    ) -> AgentMessage:
        match payload:
            case TaskRequest() as request:
                return message.reply(await self._subtask(message, request), sender=self._spec.name)
            case CancelJob():
                stopped = self._cancel(message.job_id) if message.job_id is not None else 0
                return message.reply(Cancelled(stopped=stopped), sender=self._spec.name)
            case _:
                assert_never(payload)

    def _cancel(self, job_id: str) -> int:
        """Stop the job's subtasks running here; how many there were."""
        self._cancelled.append(job_id)
        running = self._by_job.pop(job_id, set())
        for task in running:
            task.cancel()
        return len(running)

    async def _subtask(self, message: AgentMessage, request: TaskRequest) -> TaskResult:
        """Run a subtask, or join the run of the same subtask already under way here.

        An orchestrator that restarts dispatches its unfinished subtasks again, possibly while
        the first dispatch still runs: both get the one run's result instead of two runs
        racing each other (and their tools) for the same subtask. Each candidate of a
        subtask dispatched redundantly is a run of its own (:func:`run_of`).
        """
        key = (message.job_id, run_of(request))
        joined = self._subtasks.get(key)
        if joined is None:
            holder = await self._taker(message, request)
            if holder != self._spec.name:
                return await self._hand_over(message, request, holder)
            joined = self._subtasks.get(key)  # it may have come again meanwhile
        if joined is None:
            run = asyncio.ensure_future(self._work(message, request))
            joined = self._subtasks[key] = _Joined(run)
            run.add_done_callback(lambda _done: self._subtasks.pop(key, None))
        else:
            log.info("subtask_joined", agent=self._spec.name, job_id=message.job_id,
                     task_id=request.task_id, attempt=message.attempt)  # fmt: skip
        joined.waiting += 1
        try:
            return await asyncio.shield(joined.run)
        except asyncio.CancelledError:
            if joined.waiting == 1:  # the last caller gave up: so does the run
                joined.run.cancel()
            raise
        finally:
            joined.waiting -= 1

    async def _taker(self, message: AgentMessage, request: TaskRequest) -> str:
        """The agent that runs the subtask: this one, unless the job's shard names another.

        This agent tells the job's orchestrator that it takes the subtask. It journals it:
        dispatched again after it restarted, the subtask comes back here, to join this run
        or resume it, not to a teammate that would start it over. A dispatch that came
        through the role waits for the answer (:data:`TAKE_WAIT_S` at most): if another
        agent of the role took the same dispatch first (a router that died sent it again),
        that agent runs it. One sent by name is this agent's: the word goes in the
        background. Only for an orchestrator's dispatch; a word that is lost costs only that.
        """
        me = self._spec.name
        if message.job_id is None or message.sender != orchestrator_address(message.job_id):
            return me
        by_role = parse_address(message.recipient)[0] == "role"
        word = message.derive(
            sender=me,
            recipient=message.sender,
            payload=SubtaskTaken(task_id=request.task_id, agent=me, by_role=by_role),
        )

        async def say() -> str:
            try:
                reply = await asyncio.wait_for(self._router.request(word), TAKE_WAIT_S)
            except Exception as exc:  # noqa: BLE001 - a lost word must not fail the subtask
                log.info("subtask_taken_not_told", job_id=message.job_id, error=repr(exc))
                return me
            answer = reply.payload
            return answer.agent if isinstance(answer, SubtaskTaken) and by_role else me

        if by_role:
            return await say()
        told = asyncio.ensure_future(say())
        self._telling.add(told)
        told.add_done_callback(self._telling.discard)
        return me

    async def _hand_over(
        self, message: AgentMessage, request: TaskRequest, holder: str
    ) -> TaskResult:
        """``holder``'s answer to the dispatch: it took the same one first, and runs it.

        A holder that is restarting (killed since it said so: the router knows no actor of its
        name for a moment) is waited for; it joins or resumes the run it took, so asking it
        again is safe.
        """
        log.info("subtask_handed_over", agent=self._spec.name, holder=holder,
                 job_id=message.job_id, task_id=request.task_id)  # fmt: skip
        reply = await request_through_restarts(
            self._router,
            lambda: message.derive(sender=self._spec.name, recipient=holder, payload=request),
            again=lambda error: error.code in _RESTARTING,
            repeats_answered=True,
        )
        answer = expected(reply, TaskResult, unexpected=InvalidInput)
        if isinstance(answer, ErrorPayload):
            raise answer.to_exception()
        return answer

    async def _work(self, message: AgentMessage, request: TaskRequest) -> TaskResult:
        """Run one subtask; a ``cancel_job`` for its job ends it as ``cancelled``.

        The subtask counts as running from the moment it arrives, so a cancel also reaches
        one still waiting for a free slot.
        """
        started = self._clock()
        task = asyncio.current_task()
        key = message.job_id or ""
        running = self._by_job.setdefault(key, set())
        if task is not None:
            running.add(task)
        try:
            async with self._slots:
                return await self._invoked(message, request)
        except asyncio.CancelledError:
            if task is None or message.job_id not in self._cancelled:
                raise  # not a cancel_job: the caller gave up, or the actor is going away
            task.uncancel()
            return TaskResult(
                task_id=request.task_id,
                agent=self._spec.name,
                status="failed",
                stop_reason="cancelled",
                error=ErrorPayload(code=ErrorCode.CANCELLED, message="the job was cancelled"),
                started_at=started,
                finished_at=self._clock(),
            )
        finally:
            if task is not None:
                running.discard(task)
            if not running and self._by_job.get(key) is running:
                del self._by_job[key]  # nothing left of this job here

    async def _invoked(self, message: AgentMessage, request: TaskRequest) -> TaskResult:
        """:meth:`run_task`, in the agent's span when tracing is on (a child of the subtask's)."""
        spec = self._spec
        with agent_invocation(
            spec.name, spec.role, message.job_id, request, message.attempt
        ) as made:
            result = await self.run_task(message, request)
            agent_finished(made, result)
            return result

    async def run_task(self, message: AgentMessage, request: TaskRequest) -> TaskResult:
        """Run the loop for one subtask; failures are reported in the result, not raised.

        Besides a final answer, an error and ``max_turns``, the loop stops when one of the
        agent's limits is reached (budget, deadline, repeated tool call, stagnation: see
        ``raytroupe.actors.agent.stop``); ``TaskResult.stop_reason`` says which.
        """
        return await self._react.run(message, request, self._spec, self._tools)
