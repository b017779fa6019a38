"""Provider-neutral model traffic: chat messages, tool specs, requests, responses, usage."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Literal, TypeAlias

from pydantic import BaseModel, ConfigDict, Field, model_validator

from raytroupe.protocols.addresses import Name
from raytroupe.protocols.json_data import JsonSchema

__all__ = [
    "Budget",
    "ChatMessage",
    "ContentPart",
    "FinishReason",
    "ImagePart",
    "LLMDelta",
    "LLMRequest",
    "LLMResponse",
    "Purpose",
    "Reasoning",
    "Spend",
    "TextPart",
    "Thought",
    "ToolCall",
    "ToolSpec",
    "Usage",
]

FinishReason = Literal["stop", "tool_calls", "length", "content_filter", "error"]
"""Why a model stopped, normalized across providers."""

Purpose = Literal[
    "chat",
    "plan",
    "work",
    "aggregate",
    "summarize",
    "classify",
    "judge",
    "merge",
    "grade",
    "skill",
    "reflect",
    "optimize",
]
"""What the caller uses the answer for. Real models ignore it; the offline provider keys on it."""


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)


class ToolSpec(_Frozen):
    """A tool as a model sees it: name, description and JSON Schema of its arguments."""

    name: Name = Field(description="Tool name, unique within an agent's tool set.")
    description: str = Field(description="What the tool does, written for the model.")
    parameters: JsonSchema = Field(
        default_factory=lambda: {"type": "object", "properties": {}},
        description="JSON Schema (an object schema) of the tool's arguments.",
    )


class Budget(_Frozen):
    """A spending limit in tokens, US dollars, or both (None: no limit on that measure)."""

    tokens: int | None = Field(default=None, ge=0)
    usd: float | None = Field(default=None, ge=0.0)
    account: str | None = Field(
        default=None,
        max_length=100,
        description="The job whose budget account pays, when not the calling job's: set by "
        "the orchestrator on a graph node's child job (so a job and its children share one "
        "budget); refused when a caller sets it.",
    )


class Reasoning(_Frozen):
    """How much a reasoning model thinks before it answers, for providers that let it be set.

    OpenAI's reasoning models (and servers that take the parameter) are sent ``effort`` as
    ``reasoning_effort``; Anthropic's are sent a thinking budget of ``budget_tokens`` (or
    the effort's: 1,024, 2,048, 8,192 or 24,576 tokens), on top of the answer's own
    ``max_tokens``. A provider without such a control is sent nothing.
    """

    effort: Literal["minimal", "low", "medium", "high"] = Field(
        default="medium", description="How hard the model thinks."
    )
    budget_tokens: int | None = Field(
        default=None,
        ge=1024,
        le=128_000,
        description="Tokens of thinking, for providers that take a budget (Anthropic); None: "
        "the effort's.",
    )


ToolArguments: TypeAlias = dict[str, Any]
"""A tool call's arguments by parameter name, JSON values as the model wrote them: what they
must be is the tool's parameters schema, checked where the tool runs."""


class ToolCall(_Frozen):
    """A request to run a tool; also an envelope payload when sent to a tool sandbox."""

    kind: Literal["tool_call"] = "tool_call"
    call_id: str = Field(min_length=1, description="Id the model gave this call.")
    tool: Name = Field(description="Name of the tool to run.")
    arguments: ToolArguments = Field(
        default_factory=dict, description="Parsed arguments; empty arguments are {}."
    )
    task_id: str | None = Field(
        default=None, description="Set by the agent: the subtask the call is made for."
    )
    step: int | None = Field(
        default=None, description="Set by the agent: the call's place in the subtask's loop."
    )
    budget: Budget | None = Field(
        default=None,
        description="Set by the agent: the job's budget, which the work a tool asks of other "
        "agents (delegate, handoff) is held to as well.",
    )


class TextPart(_Frozen):
    """Text inside a multi-part message."""

    type: Literal["text"] = "text"
    text: str


class ImagePart(_Frozen):
    """An image inside a multi-part message: a URL, or base64 data with its media type."""

    type: Literal["image"] = "image"
    url: str | None = Field(default=None, description="http(s) or data: URL of the image.")
    data_b64: str | None = Field(default=None, description="Base64 image bytes.")
    media_type: str = Field(default="image/png", description="MIME type of ``data_b64``.")

    @model_validator(mode="after")
    def _one_source(self) -> ImagePart:
        if (self.url is None) == (self.data_b64 is None):
            raise ValueError("an image needs exactly one of url or data_b64")
        return self


ContentPart = Annotated[TextPart | ImagePart, Field(discriminator="type")]


class Thought(_Frozen):
    """A block of a model's thinking that its provider wants back on the next turn.

    Anthropic's extended thinking with tool use needs the assistant turn's thinking blocks
    sent back as they came, signature and all (a redacted one as its opaque ``data``); other
    providers' turns carry none.
    """

    provider: str = Field(description="The provider whose model thought it, e.g. 'anthropic'.")
    text: str = Field(default="", description="The thinking, as the provider showed it.")
    signature: str | None = Field(default=None, description="The provider's seal on it.")
    redacted: str | None = Field(
        default=None, description="An encrypted block's opaque data (no text is shown)."
    )


class ChatMessage(_Frozen):
    """One turn of a conversation: plain text, or parts (text and images)."""

    role: Literal["system", "user", "assistant", "tool"]
    content: str | tuple[ContentPart, ...] = Field(default="", description="Text or parts.")
    tool_calls: tuple[ToolCall, ...] = Field(
        default=(), description="Tool calls the assistant asked for in this turn."
    )
    tool_call_id: str | None = Field(
        default=None, description="For role 'tool': the call this message answers."
    )
    thoughts: tuple[Thought, ...] = Field(
        default=(),
        description="For role 'assistant': the thinking its provider wants back (``Thought``).",
    )

    @property
    def text(self) -> str:
        """The text of the turn (text parts joined by blank lines; images left out)."""
        if isinstance(self.content, str):
            return self.content
        return "\n\n".join(p.text for p in self.content if isinstance(p, TextPart))


@dataclass
class Spend:
    """Tokens and dollars, spent or held (what the pool's ``spent`` remote method returns)."""

    tokens: int = 0
    usd: float = 0.0


class Usage(_Frozen):
    """Tokens and money one or more model calls cost."""

    prompt_tokens: int = Field(default=0, ge=0)
    completion_tokens: int = Field(default=0, ge=0)
    cost_usd: float = Field(default=0.0, ge=0.0)
    calls: int = Field(default=0, ge=0, description="Number of model calls summed here.")
    cached_tokens: int = Field(
        default=0, ge=0, description="Of the prompt tokens, those read from the provider's cache."
    )
    cache_write_tokens: int = Field(
        default=0, ge=0, description="Of the prompt tokens, those written to the provider's cache."
    )
    reasoning_tokens: int = Field(
        default=0, ge=0, description="Of the completion tokens, those the model spent thinking."
    )

    @property
    def total_tokens(self) -> int:
        """Prompt plus completion tokens."""
        return self.prompt_tokens + self.completion_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            cost_usd=self.cost_usd + other.cost_usd,
            calls=self.calls + other.calls,
            cached_tokens=self.cached_tokens + other.cached_tokens,
            cache_write_tokens=self.cache_write_tokens + other.cache_write_tokens,
            reasoning_tokens=self.reasoning_tokens + other.reasoning_tokens,
        )


class LLMRequest(_Frozen):
    """A provider-neutral model call."""

    kind: Literal["llm_request"] = "llm_request"
    model: Name = Field(description="Model alias, resolved by the LLM pool.")
    messages: tuple[ChatMessage, ...] = Field(min_length=1)
    tools: tuple[ToolSpec, ...] = Field(default=(), description="Tools the model may call.")
    tool_choice: Literal["auto", "none", "required"] = "auto"
    response_format: dict[str, Any] | None = Field(
        default=None, description="JSON Schema the answer must satisfy, if any."
    )
    temperature: float | None = Field(default=None, ge=0.0, le=2.0)
    max_tokens: int | None = Field(default=None, gt=0)
    stop: tuple[str, ...] = ()
    parallel_tool_calls: bool = Field(
        default=True,
        description="False: the provider is asked for at most one tool call per answer, where "
        "it can be (OpenAI's parallel_tool_calls, Anthropic's disable_parallel_tool_use).",
    )
    reasoning: Reasoning | None = Field(
        default=None, description="Reasoning effort or thinking budget, where supported."
    )
    purpose: Purpose = "chat"
    stream: bool = Field(
        default=False, description="Stream from the provider; deltas become job events."
    )
    retry_partial_stream: bool = Field(
        default=False,
        description="Allow a retry after a stream already delivered content (may repeat text).",
    )
    budget: Budget | None = Field(
        default=None, description="The job's budget; the pool holds the job to it."
    )
    replay: str | None = Field(
        default=None,
        max_length=200,
        description="The call's place in its job's durable run (an agent's: "
        "'<subtask>/<n>/<digest of the conversation>'). A call the pool already answered at "
        "this place of this job is answered from its record, unbilled.",
    )


class LLMResponse(_Frozen):
    """A provider-neutral model answer; ``provider`` says who actually answered."""

    kind: Literal["llm_response"] = "llm_response"
    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    finish_reason: FinishReason = "stop"
    usage: Usage = Field(default_factory=Usage)
    model: str = Field(description="Model that answered (the provider's name for it).")
    provider: str = Field(description="Provider that answered, e.g. 'openai', 'offline'.")
    deployment: str = Field(default="", description="Pool deployment that answered.")
    latency_s: Annotated[float, Field(ge=0.0)] = 0.0
    context_window: int | None = Field(
        default=None,
        gt=0,
        description="Tokens the deployment that answered takes (its spec's context_window; "
        "None: not configured). Set by the LLM pool.",
    )
    thoughts: tuple[Thought, ...] = Field(
        default=(), description="Thinking the provider wants back with this turn (``Thought``)."
    )
    replayed: bool = Field(
        default=False,
        description="Answered from the pool's record of this very call (``LLMRequest.replay``): "
        "the provider was not called again and nothing was billed.",
    )


class LLMDelta(_Frozen):
    """A piece of a streamed answer: text, or a fragment of tool call ``index``."""

    kind: Literal["llm_delta"] = "llm_delta"
    text: str = ""
    tool_call_index: int | None = None
    tool_call_id: str | None = None
    tool_name: str | None = None
    arguments: str = Field(default="", description="A fragment of the tool call's JSON.")
