"""The live spans of a job's work, named and described as OpenTelemetry's GenAI conventions say.

Semantic conventions for generative AI, v1.37 and later: ``gen_ai.provider.name`` (not the
``gen_ai.system`` it replaced), ``gen_ai.operation.name`` ``chat``, ``invoke_agent``,
``execute_tool`` and ``invoke_workflow``, usage as ``gen_ai.usage.input_tokens`` and
``output_tokens``. Span names follow them: ``chat {model}``, ``invoke_agent {agent}``,
``execute_tool {tool}``; the orchestrator's own steps are ``job {team}``, ``plan``,
``subtask {id}`` and ``aggregate``, with ``raytroupe.*`` attributes.

Content stays out: the conventions make prompts, completions, system instructions and tool
arguments and results opt-in (``gen_ai.input.messages`` ...), and raytroupe never records
them, nor a key, a header or an error's message (a failure is its ``error.type``: the
``TroupeError`` code). A job's own trace (``JobResult.trace``) keeps what a person reviewing
it needs; these spans say where the time went, and who called whom.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Final

from raytroupe.actors.telemetry.tracing import OFF, active, failed, note, span
from raytroupe.protocols import (
    ErrorPayload,
    Handoff,
    JobResult,
    LLMRequest,
    LLMResponse,
    ModelSpec,
    PlannedSubtask,
    SubtaskResult,
    TaskRequest,
    TaskResult,
    ToolCall,
    ToolResult,
)

if TYPE_CHECKING:
    from opentelemetry.trace import Span

__all__ = [
    "agent_finished",
    "agent_invocation",
    "chat_answered",
    "chat_call",
    "job_finished",
    "job_run",
    "subtask_finished",
    "subtask_run",
    "tool_execution",
    "tool_finished",
]

OPERATION: Final = "gen_ai.operation.name"
INPUT_TOKENS: Final = "gen_ai.usage.input_tokens"
OUTPUT_TOKENS: Final = "gen_ai.usage.output_tokens"
JOB_ID: Final = "raytroupe.job.id"

Made = AbstractContextManager["Span | None"]


def job_run(
    job_id: str,
    team: str,
    *,
    tenant: str,
    submitted_at: float,
    parent: str | None,
    request_id: str | None = None,
) -> Made:
    """The root span of a job's run, from its submission; under ``parent`` (a caller's)."""
    if not active():  # off: no attributes made either
        return OFF
    attributes: dict[str, str] = {
        OPERATION: "invoke_workflow",
        "gen_ai.workflow.name": team,
        JOB_ID: job_id,
        "raytroupe.team": team,
        "raytroupe.tenant": tenant,
    }
    if request_id is not None:
        attributes["raytroupe.request_id"] = request_id
    return span(f"job {team}", parent=parent, start=submitted_at, attributes=attributes)


def job_finished(made: Span | None, result: JobResult | None) -> None:
    """How the job ended, on its root span (nothing when it has no result: it goes on later)."""
    if made is None or result is None:
        return
    note(
        made,
        **{
            "raytroupe.job.status": result.status,
            INPUT_TOKENS: result.usage.prompt_tokens,
            OUTPUT_TOKENS: result.usage.completion_tokens,
            "raytroupe.cost_usd": result.usage.cost_usd,
        },
    )
    if result.error is not None:
        failed(made, result.error.code.value)


def subtask_run(job_id: str, sub: PlannedSubtask) -> Made:
    """A subtask's run in the orchestrator: its deliveries to agents happen inside."""
    if not active():  # off: no attributes made either
        return OFF
    return span(
        f"subtask {sub.id}",
        attributes={JOB_ID: job_id, "raytroupe.subtask.id": sub.id, "raytroupe.role": sub.role},
    )


def subtask_finished(made: Span | None, result: SubtaskResult) -> None:
    """A subtask's outcome on its span."""
    if made is None:
        return
    note(
        made,
        **{
            "raytroupe.subtask.status": result.status,
            "raytroupe.agent": result.agent,
            "raytroupe.attempt": result.attempt,
        },
    )
    _error(made, result.error)


def agent_invocation(
    agent: str, role: str, job_id: str | None, request: TaskRequest, attempt: int
) -> Made:
    """An agent working on a subtask: its model and tool calls are children."""
    if not active():  # off: no attributes made either
        return OFF
    attributes: dict[str, str | int] = {
        OPERATION: "invoke_agent",
        "gen_ai.agent.name": agent,
        "raytroupe.role": role,
        "raytroupe.subtask.id": request.task_id,
        "raytroupe.attempt": attempt,
    }
    if job_id is not None:
        attributes[JOB_ID] = job_id
    return span(f"invoke_agent {agent}", attributes=attributes)


def agent_finished(made: Span | None, result: TaskResult) -> None:
    """What the agent's loop came to: turns, tool calls, tokens, why it stopped."""
    if made is None:
        return
    note(
        made,
        **{
            "raytroupe.subtask.status": result.status,
            "raytroupe.turns": result.turns,
            "raytroupe.tool_calls": result.tool_calls,
            "raytroupe.stop_reason": result.stop_reason,
            INPUT_TOKENS: result.usage.prompt_tokens,
            OUTPUT_TOKENS: result.usage.completion_tokens,
        },
    )
    _error(made, result.error)


def chat_call(
    request: LLMRequest,
    spec: ModelSpec,
    *,
    deployment: str,
    job_id: str | None,
    agent: str,
) -> Made:
    """One call to a model provider (an attempt: a retry or a fallback is a span of its own).

    Named for the provider's model (``spec.model``; the deployment's alias when it has
    none); ``request``'s own alias goes on as ``raytroupe.model_alias``.
    """
    if not active():
        return OFF
    model = getattr(spec, "model", None) or deployment
    attributes: dict[str, str | int | float | bool] = {
        OPERATION: "chat",
        "gen_ai.provider.name": spec.provider,
        "gen_ai.request.model": model,
        "raytroupe.model_alias": request.model,
        "raytroupe.deployment": deployment,
        "raytroupe.purpose": request.purpose,
    }
    if request.max_tokens is not None:
        attributes["gen_ai.request.max_tokens"] = request.max_tokens
    if request.temperature is not None:
        attributes["gen_ai.request.temperature"] = request.temperature
    if request.stream:
        attributes["gen_ai.request.stream"] = True
    if job_id is not None:
        attributes[JOB_ID] = job_id
    if agent:
        attributes["raytroupe.agent"] = agent
    return span(f"chat {model}", kind="client", attributes=attributes)


def chat_answered(made: Span | None, response: LLMResponse) -> None:
    """The provider's answer on its span: the model that answered, tokens, finish reason."""
    if made is None:
        return
    made.set_attributes(
        {
            "gen_ai.response.model": response.model,
            "gen_ai.response.finish_reasons": [response.finish_reason],
            INPUT_TOKENS: response.usage.prompt_tokens,
            OUTPUT_TOKENS: response.usage.completion_tokens,
        }
    )


def tool_execution(call: ToolCall) -> Made:
    """One tool call, from the agent's side (an approval it waits for is inside)."""
    if not active():  # off: no attributes made either
        return OFF
    attributes: dict[str, str] = {
        OPERATION: "execute_tool",
        "gen_ai.tool.name": call.tool,
        "gen_ai.tool.call.id": call.call_id,
        "gen_ai.tool.type": "function",
    }
    if call.task_id is not None:
        attributes["raytroupe.subtask.id"] = call.task_id
    return span(f"execute_tool {call.tool}", attributes=attributes)


def tool_finished(made: Span | None, outcome: ToolResult | Handoff) -> None:
    """A tool call's outcome: failed with its error code, or handed off to another agent."""
    if made is None:
        return
    if isinstance(outcome, Handoff):
        note(made, **{"raytroupe.handed_off_to": outcome.to_agent})
        return
    _error(made, outcome.error)


def _error(made: Span | None, error: ErrorPayload | None) -> None:
    if error is not None:
        failed(made, error.code.value)
