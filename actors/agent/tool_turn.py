"""One turn's tool calls: checked, run in the sandboxes (at once or in order), answered.

:class:`ToolTurn` is the part of an agent's :class:`~raytroupe.actors.agent.react.ReAct` loop
that runs the tool calls of one model answer. The calls of one answer run at once
(``AgentSpec.parallel_tool_calls``): a model that asks for three lookups waits for the
slowest, not for their sum, and a call held for a person's approval does not hold the others.
What the model is shown next is the same as if they had run one after another: the results in
the order it asked for them. Each call passes the job's ``tool_call`` guardrails before its
sandbox sees it, and its result the ``tool_result`` ones before the model does.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, assert_never

from raytroupe.actors.agent.checks import Calculation
from raytroupe.actors.agent.stop import Stop
from raytroupe.actors.agent.turns import HANDOFF_TOOL, NOT_RUN, Loop, handoff_result, tool_text
from raytroupe.actors.agent.written_calls import without_schema_words
from raytroupe.actors.endpoint import RouterClient, expected, request_through_restarts
from raytroupe.actors.guardrails.check import Ask, guard, guard_json
from raytroupe.actors.telemetry.calls import tool_span
from raytroupe.actors.telemetry.genai import tool_execution, tool_finished
from raytroupe.protocols import (
    AgentMessage,
    ChatMessage,
    ErrorCode,
    ErrorPayload,
    Handoff,
    LLMRequest,
    LLMResponse,
    TaskRequest,
    ToolCall,
    ToolError,
    ToolResult,
    ToolSpec,
    TroupeError,
)

__all__ = ["ToolTurn"]


@dataclass(frozen=True)
class _Ran:
    """One tool call, what it came to, and when it was sent and answered."""

    call: ToolCall
    outcome: ToolResult | Handoff
    called: float
    finished: float


def _same_call(call: ToolCall) -> str:
    """What identical calls share: the tool and its arguments (not the call's id)."""
    return json.dumps([call.tool, call.arguments], sort_keys=True, default=str)


def _not_run(loop: Loop, calls: Sequence[ToolCall]) -> None:
    """Answer ``calls`` :data:`NOT_RUN`.

    Every call is answered, for the model's next turn: providers demand it.
    """
    loop.messages.extend(
        ChatMessage(role="tool", tool_call_id=call.call_id, content=NOT_RUN) for call in calls
    )


class ToolTurn:
    """Runs the tool calls of one model answer for an agent's loop (the agent's).

    Args:
        name: the agent's name (the sender of its calls).
        router: how it reaches the tool sandboxes.
        clock: the current UNIX time (for the calls' spans).
        tools: the agent's tools as configured now (their schemas, for the calls it runs).
        ask: how the agent asks its model (a judge rule of the job's guardrails asks so).
    """

    def __init__(
        self,
        name: str,
        router: RouterClient,
        clock: Callable[[], float],
        tools: Callable[[], Sequence[ToolSpec]],
        ask: Callable[[AgentMessage, LLMRequest], Awaitable[LLMResponse]],
    ) -> None:
        self._name = name
        self._router = router
        self._clock = clock
        self._tools = tools
        self._ask = ask

    async def run(
        self,
        cause: AgentMessage,
        request: TaskRequest,
        loop: Loop,
        answer: LLMResponse,
        bound: Any,
        *,
        parallel: bool,
    ) -> Stop | None:
        """Run the tool calls of one turn, unless a limit stops the loop first.

        ``parallel``: the calls run at once (:meth:`_at_once`), their results shown in the
        order the model asked for them; otherwise, or when one of them hands the subtask
        off (which ends the agent's part in it: who owns the subtask must not change while
        its other calls run), one after another (:meth:`_one_by_one`).

        A failed call's error is shown to the model, which may correct itself; but not a
        ``ToolInfrastructureError`` (the tool's host failed it): that fails the subtask.
        """
        loop.messages.append(
            ChatMessage(
                role="assistant",
                content=answer.text,
                tool_calls=answer.tool_calls,
                thoughts=answer.thoughts,  # a provider's thinking goes back with its calls
            )
        )
        schemas = {t.name: t.parameters for t in self._tools()}
        calls = [without_schema_words(c, schemas.get(c.tool, {})) for c in answer.tool_calls]
        if parallel and all(call.tool != HANDOFF_TOOL for call in calls):
            return await self._at_once(cause, request, loop, answer, calls=calls, bound=bound)
        return await self._one_by_one(cause, request, loop, answer, calls=calls, bound=bound)

    async def _one_by_one(
        self,
        cause: AgentMessage,
        request: TaskRequest,
        loop: Loop,
        answer: LLMResponse,
        *,
        calls: Sequence[ToolCall],
        bound: Any,
    ) -> Stop | None:
        """Run ``calls`` in order, each after the one before it answered.

        A handoff ends the turn: its answer is the subtask's. A host's failure fails the
        subtask at once, before the calls after it run.
        """
        results: list[tuple[str, str]] = []
        for index, call in enumerate(calls):
            if stop := loop.limits.before_tool_call(call):
                _not_run(loop, answer.tool_calls[index:])
                return stop
            ran = await self._run_call(cause, request, loop, index, call)
            if failed := self._take(cause, loop, ran, results, bound):
                raise failed
            if loop.handed_off is not None:
                return None
        return loop.limits.after_turn(answer.text, results)

    async def _at_once(
        self,
        cause: AgentMessage,
        request: TaskRequest,
        loop: Loop,
        answer: LLMResponse,
        *,
        calls: Sequence[ToolCall],
        bound: Any,
    ) -> Stop | None:
        """Run ``calls`` at once; take their results in the order the model asked for them.

        The limits see the calls in order before any runs: the calls before the first one
        that stops the loop run, and the others are answered :data:`NOT_RUN`, as they would
        be one after another. A host's failure fails the subtask once every call that runs
        has finished (the first such failure, in the model's order).
        """
        admitted = list(calls)
        stop: Stop | None = None
        for index, call in enumerate(calls):
            if stop := loop.limits.before_tool_call(call):
                admitted = admitted[:index]
                break
        results: list[tuple[str, str]] = []
        failures = [
            failed
            for ran in await self._run_all(cause, request, loop, admitted)
            if (failed := self._take(cause, loop, ran, results, bound)) is not None
        ]
        if failures:
            raise failures[0]
        if stop:
            _not_run(loop, answer.tool_calls[len(admitted) :])
            return stop
        return loop.limits.after_turn(answer.text, results)

    async def _run_all(
        self, cause: AgentMessage, request: TaskRequest, loop: Loop, calls: Sequence[ToolCall]
    ) -> list[_Ran]:
        """Run ``calls`` at once, except that identical calls run one after another.

        Identical calls (the same tool and arguments) are the same side effect, run at most
        once (``raytroupe.actors.tools.idempotency.effect_key``): the later one waits for
        the first to finish and is given its recorded result, whichever sandbox it reaches.
        At once, it could reach another sandbox while the first still runs there, and be
        refused.

        A call that raises cancels the others, and so does the subtask's cancellation: no
        call is left running. What the first call to raise raised is raised on its own (not
        in an exception group), as it would be one after another: the loop fails the subtask
        with a ``TroupeError``.
        """
        lanes: dict[str, list[int]] = {}
        for index, call in enumerate(calls):
            lanes.setdefault(_same_call(call), []).append(index)
        ran: dict[int, _Ran] = {}

        async def one_after_another(indices: list[int]) -> None:
            for index in indices:
                ran[index] = await self._run_call(cause, request, loop, index, calls[index])

        try:
            async with asyncio.TaskGroup() as group:  # each task has its own trace context
                for indices in lanes.values():
                    group.create_task(one_after_another(indices))
        except BaseExceptionGroup as failed:
            raise failed.exceptions[0] from None
        return [ran[index] for index in range(len(calls))]

    async def _run_call(
        self, cause: AgentMessage, request: TaskRequest, loop: Loop, index: int, call: ToolCall
    ) -> _Ran:
        """Run ``call``, the ``index``-th of the turn's calls, under its own telemetry span.

        Its step is its place in the subtask's run (turn and index in the model's answer),
        however the turn's calls are run: the key a call without side effects is kept
        under, and its approval's id.
        """
        loop.tool_calls += 1
        step = loop.turns * 1000 + index
        called = self._clock()
        call = await self._guarded_call(cause, request, loop, call)
        with tool_execution(call) as made:
            outcome = await self._tool(cause, request, step, call)
            tool_finished(made, outcome)
        outcome = await self._guarded_result(cause, request, loop, outcome)
        return _Ran(call, outcome, called, self._clock())

    def _judge(self, cause: AgentMessage, request: TaskRequest) -> Ask:
        """How a judge rule of the job's guardrails asks its model: as the job, on its budget."""

        async def ask(judging: LLMRequest) -> LLMResponse:
            return await self._ask(cause, judging.model_copy(update={"budget": request.budget}))

        return ask

    async def _guarded_call(
        self, cause: AgentMessage, request: TaskRequest, loop: Loop, call: ToolCall
    ) -> ToolCall:
        """``call`` after the job's ``tool_call`` guardrails (its arguments redacted).

        Raises:
            GuardrailTripped: a blocking guardrail refused it: the call is not made, and the
                subtask (then its job) fails with it.
        """
        bound = request.job.guardrails
        if not any(g.at("tool_call", call.tool) for g in bound):
            return call
        judge = self._judge(cause, request)
        arguments, decided = await guard_json(
            call.arguments, "tool_call", bound, ask=judge, tool=call.tool
        )
        loop.guardrails += decided
        return call.model_copy(update={"arguments": arguments}) if decided else call

    async def _guarded_result(
        self, cause: AgentMessage, request: TaskRequest, loop: Loop, outcome: ToolResult | Handoff
    ) -> ToolResult | Handoff:
        """A tool's result after the job's ``tool_result`` guardrails, before the model sees it.

        Raises:
            GuardrailTripped: a blocking guardrail refused it (the model never sees it).
        """
        bound = request.job.guardrails
        if not isinstance(outcome, ToolResult) or not outcome.ok:
            return outcome
        if not any(g.at("tool_result", outcome.tool) for g in bound):
            return outcome
        judge = self._judge(cause, request)
        if isinstance(outcome.data, str):
            guarded = await guard(outcome.data, "tool_result", bound, ask=judge, tool=outcome.tool)
            data, decided = guarded.text, guarded.decisions
        else:
            data, decided = await guard_json(
                outcome.data, "tool_result", bound, ask=judge, tool=outcome.tool
            )
        loop.guardrails += decided
        return outcome.model_copy(update={"data": data}) if decided else outcome

    def _take(
        self,
        cause: AgentMessage,
        loop: Loop,
        ran: _Ran,
        results: list[tuple[str, str]],
        bound: Any,
    ) -> TroupeError | None:
        """Keep what a call came to: its span, and its result for the model (and ``results``).

        A handoff's answer becomes the subtask's (``loop.handed_off``). A host's failure is
        returned, to be raised: it is not the model's to see.
        """
        call, outcome = ran.call, ran.outcome
        if isinstance(outcome, Handoff):  # control passed on: its answer is the answer
            shown = handoff_result(outcome)
            loop.spans.append(tool_span(shown, ran.called, ran.finished, call.arguments))
            bound.info("tool_called", tool=call.tool, ok=True, handed_off_to=outcome.to_agent)
            loop.handed_off = outcome.output
            return None
        loop.spans.append(tool_span(outcome, ran.called, ran.finished, call.arguments))
        bound.info("tool_called", tool=call.tool, ok=outcome.ok)
        if outcome.error is not None and outcome.error.code is ErrorCode.TOOL_INFRASTRUCTURE:
            return outcome.error.to_exception()  # the host failed, not the tool: not the model's
        text = tool_text(outcome, cause.tenant)
        if call.tool == "calculator":
            expression = str(call.arguments.get("expression", ""))
            loop.calculated.append(Calculation(expression, text, outcome.ok))
        results.append((call.tool, text))
        loop.messages.append(ChatMessage(role="tool", tool_call_id=call.call_id, content=text))
        return None

    async def _tool(
        self, cause: AgentMessage, request: TaskRequest, step: int, call: ToolCall
    ) -> ToolResult | Handoff:
        """Run ``call`` in a sandbox; an undeliverable call is a failed result the model sees.

        A delivery failure that may pass (a sandbox restarting: ``retryable``; the router
        dying with the call) is tried again first, in a fresh envelope, a few times within the
        deadline: the model should see what the tool did, not that its sandbox was restarting.
        Safe for side-effecting tools, which run at most once per idempotency key (job,
        subtask, tool, arguments).
        """
        stamped = call.model_copy(
            update={"task_id": request.task_id, "step": step, "budget": request.budget}
        )
        reply = await request_through_restarts(
            self._router,
            lambda: cause.derive(sender=self._name, recipient="role:tools", payload=stamped),
            again=lambda error: error.retryable,
            repeats_answered=True,
        )
        match expected(reply, ToolResult, Handoff, unexpected=ToolError):
            case ToolResult() | Handoff() as result:
                return result
            case ErrorPayload() as error:
                return ToolResult(call_id=call.call_id, tool=call.tool, ok=False, error=error)
            case unexpected:
                assert_never(unexpected)
