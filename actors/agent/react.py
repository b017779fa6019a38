"""The ReAct loop of one subtask: ask the model, run its tool calls, repeat.

:class:`ReAct` is the agent's loop (:class:`~raytroupe.actors.agent.actor.AgentActor` runs
it for each subtask): the model's calls through the LLM pool, the conversation kept within
the context window (memories recalled, the oldest turns summarized), the tool calls run in
the sandboxes, and the result of the subtask, with its stop reason. Its state is the
subtask's :class:`~raytroupe.actors.agent.turns.Loop`, never its own.

The tool calls of one answer are :class:`~raytroupe.actors.agent.tool_turn.ToolTurn`'s to run
(at once, by default).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, assert_never

import structlog

from raytroupe.actors.agent.context import (
    SUMMARY_TOKENS,
    Cut,
    dropped_note,
    plan_cut,
    reserved_tokens,
    summary_message,
    summary_prompt,
)
from raytroupe.actors.agent.memory import recall, remember
from raytroupe.actors.agent.stop import Stop, StopConditions
from raytroupe.actors.agent.tool_turn import ToolTurn
from raytroupe.actors.agent.turns import (
    UNREADABLE_CALL,
    Loop,
    calls_in_text,
    final_answer,
    next_tool_choice,
    one_more_turn,
    run_of,
    system_prompt,
    task_content,
    what_to_tell,
    write_again,
)
from raytroupe.actors.agent.written_calls import WrittenCalls
from raytroupe.actors.endpoint import RouterClient, expected, request_through_restarts
from raytroupe.actors.llm.tokens import messages_tokens, tools_tokens, upper_bound
from raytroupe.actors.telemetry.calls import model_span
from raytroupe.protocols import (
    LLM_POOL,
    AgentMessage,
    AgentSpec,
    ChatMessage,
    ErrorCode,
    ErrorPayload,
    LLMRequest,
    LLMResponse,
    ModelError,
    TaskRequest,
    TaskResult,
    ToolSpec,
    TroupeError,
)

__all__ = ["ReAct"]

log = structlog.get_logger("raytroupe.agent")


class ReAct:
    """The loop an agent runs for each of its subtasks (the agent's).

    Args:
        name: the agent's name (the sender of its requests).
        router: how it reaches the LLM pool, the tool sandboxes and the memory store.
        clock: the current UNIX time (for deadlines and timestamps).
        tools: the agent's tools as configured now (their schemas, for the calls it runs).
    """

    def __init__(
        self,
        name: str,
        router: RouterClient,
        clock: Callable[[], float],
        tools: Callable[[], Sequence[ToolSpec]],
    ) -> None:
        self._name = name
        self._router = router
        self._clock = clock
        self._turn = ToolTurn(name, router, clock, tools, self._ask)

    async def run(
        self,
        message: AgentMessage,
        request: TaskRequest,
        spec: AgentSpec,
        tools: tuple[ToolSpec, ...],
    ) -> TaskResult:
        """Run the loop for one subtask, as ``spec`` and ``tools`` say (``AgentActor.run_task``)."""
        started = self._clock()
        prompt = system_prompt(spec, message.tenant)
        loop = Loop(
            [
                ChatMessage(role="system", content=prompt),
                ChatMessage(role="user", content=task_content(request)),
            ],
            StopConditions(spec, self._clock, message.deadline),
            tools_tokens=tools_tokens(tools),
            role_prompt=(prompt, system_prompt(spec, message.tenant, named=False)),
        )
        bound = log.bind(
            agent=spec.name, job_id=message.job_id, msg_id=message.id, task_id=request.task_id
        )
        max_turns = request.max_turns or spec.max_turns

        def result(**fields: object) -> TaskResult:
            return TaskResult.model_validate(
                {
                    "task_id": request.task_id,
                    "agent": spec.name,
                    "turns": loop.turns,
                    "tool_calls": loop.tool_calls,
                    "guardrails": tuple(loop.guardrails),
                    "providers": tuple(dict.fromkeys(loop.providers)),
                    "usage": loop.usage,
                    "spans": tuple(loop.spans),
                    "started_at": started,
                    "finished_at": self._clock(),
                    **fields,
                }
            )

        stop: Stop | None = None
        try:
            while loop.turns < max_turns:
                if stop := loop.limits.before_model_call():
                    break
                choice = next_tool_choice(loop, tools, max_turns)
                recalled = await self._recall_and_fit(
                    message, request, loop, spec=spec, bound=bound
                )
                asked = self._clock()
                call = LLMRequest(
                    model=spec.model,
                    messages=tuple(loop.messages),
                    tools=tools,
                    tool_choice=choice,
                    purpose="work",
                    stream=spec.stream,
                    temperature=spec.temperature,
                    parallel_tool_calls=spec.parallel_tool_calls,
                    reasoning=spec.reasoning,
                    budget=request.budget,
                )
                try:
                    answer = await self._ask(message, loop.placed(run_of(request), call, recalled))
                except ModelError as exc:  # a call the provider could not read: written again
                    if exc.detail.get("reason") not in UNREADABLE_CALL:
                        raise
                    loop.turns += 1
                    bound.info("tool_call_unreadable", problem=exc.message)
                    loop.messages.append(ChatMessage(role="user", content=write_again(exc.message)))
                    continue
                loop.turns += 1
                loop.answered(answer)
                loop.spans.append(model_span(spec.model, answer, asked, self._clock()))
                loop.providers.append(answer.provider)
                if not answer.tool_calls:
                    written = calls_in_text(loop, tools, answer.text)
                    told = what_to_tell(
                        loop, request, tools, answer.text, written, max_turns, bound
                    )
                    if told is not None:  # an unreadable call, or an answer to check once
                        loop.messages += [
                            ChatMessage(role="assistant", content=answer.text),
                            ChatMessage(role="user", content=told),
                        ]
                        continue
                    if not isinstance(written, WrittenCalls):  # an answer (Unreadable: told)
                        bound.info("subtask_done", turns=loop.turns)
                        output = final_answer(loop, request, answer.text, bound)
                        return await self._answered(message, spec, request, output, result)
                    bound.info("tool_calls_in_text", calls=len(written.calls))
                    answer = answer.model_copy(
                        update={"text": written.text, "tool_calls": written.calls}
                    )
                stop = one_more_turn(
                    loop,
                    loop.limits.after_model_call(loop.usage)
                    or await self._turn.run(
                        message, request, loop, answer, bound, parallel=spec.parallel_tool_calls
                    ),
                    max_turns,
                )
                if loop.handed_off is not None:
                    bound.info("subtask_handed_off", turns=loop.turns)
                    return result(status="succeeded", output=loop.handed_off, stop_reason="handoff")
                if stop:
                    break
        except TroupeError as exc:
            bound.warning("subtask_failed", code=exc.code.value, error=exc.message)
            return result(
                status="failed", stop_reason="error", error=ErrorPayload.from_exception(exc)
            )
        if stop:
            bound.warning("subtask_stopped", reason=stop.reason, error=stop.error.message)
            return result(status="failed", stop_reason=stop.reason, error=stop.error)
        bound.warning("subtask_max_turns", turns=loop.turns)
        return result(
            status="failed",
            stop_reason="max_turns",
            error=ErrorPayload(
                code=ErrorCode.MAX_TURNS, message=f"no final answer within {max_turns} turns"
            ),
        )

    async def _answered(
        self,
        message: AgentMessage,
        spec: AgentSpec,
        request: TaskRequest,
        output: str,
        result: Callable[..., TaskResult],
    ) -> TaskResult:
        """The subtask's answer, kept in memory as the spec says, as a succeeded result."""
        await remember(self._router, message, spec, request, output)
        return result(status="succeeded", output=output)

    async def _recall_and_fit(
        self, cause: AgentMessage, request: TaskRequest, loop: Loop, *, spec: AgentSpec, bound: Any
    ) -> tuple[ChatMessage, ...]:
        """The memories recalled for the next model call, the conversation cut to fit with them.

        The oldest turns that keep the call from fitting the context window are replaced by
        their summary in ``loop.messages`` (see ``raytroupe.actors.agent.context``). A summary that
        fails or does not fit gives way to a note of how many turns went: the subtask goes
        on either way.
        """
        recalled = await recall(self._router, cause, spec, request, loop.messages)
        window = loop.window(spec)
        if window is None:
            return recalled
        reserved = reserved_tokens(
            window=window, answer=None, tools=loop.tools_tokens, recalled=recalled
        )
        cut = plan_cut(loop.messages, window=window, reserved=reserved, summary=loop.summary)
        if cut is None:
            return recalled
        text = await self._summarize(
            cause, request, loop, cut, spec=spec, window=window, bound=bound
        )
        summary = summary_message(cut, text) if text is not None else None
        loop.summary = summary or dropped_note(cut)
        loop.messages = cut.apply(loop.summary)
        loop.calls_cut += cut.tool_calls
        bound.info(
            "context_trimmed",
            turns_cut=len(cut.cut),
            summarized=summary is not None,
            tokens_before=cut.before,
            tokens_after=upper_bound(messages_tokens(loop.messages)),
            room=cut.room,
        )
        return recalled

    async def _summarize(
        self,
        cause: AgentMessage,
        request: TaskRequest,
        loop: Loop,
        cut: Cut,
        *,
        spec: AgentSpec,
        window: int,
        bound: Any,
    ) -> str | None:
        """The agent's model's summary of ``cut``'s turns; None if it could not be had."""
        asked = self._clock()
        try:
            call = LLMRequest(
                model=spec.model,
                messages=summary_prompt(cut, window),
                max_tokens=SUMMARY_TOKENS,
                purpose="summarize",
                temperature=spec.temperature,
                budget=request.budget,
            )
            answer = await self._ask(cause, loop.placed(run_of(request), call))
        except TroupeError as exc:
            bound.warning("context_summary_failed", code=exc.code.value, error=exc.message)
            return None
        loop.answered(answer)
        loop.spans.append(model_span(spec.model, answer, asked, self._clock()))
        return answer.text

    async def _ask(self, cause: AgentMessage, request: LLMRequest) -> LLMResponse:
        """The model's answer; a pool that is restarting (its node lost, say) is waited for.

        Only delivery failures are tried again: the pool retries the providers itself. A call
        the router lost as it died is asked again too: named by its place in the run
        (``LLMRequest.replay``), it is made once, whichever asking reaches the pool first.
        """
        reply = await request_through_restarts(
            self._router,
            lambda: cause.derive(sender=self._name, recipient=LLM_POOL, payload=request),
            repeats_answered=request.replay is not None,
        )
        match expected(reply, LLMResponse, unexpected=ModelError):
            case LLMResponse() as response:
                return response
            case ErrorPayload() as error:
                raise error.to_exception()
            case unexpected:
                assert_never(unexpected)
