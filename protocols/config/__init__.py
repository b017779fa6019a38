"""Configuration models: what the system actors, the HTTP app and the CLI are started with.

Each section of a ``troupe.yaml`` (:class:`SystemConfig`) is a frozen pydantic model, read
from a mapping or a YAML file with one kind of error (:class:`~raytroupe.protocols.ConfigError`).
Only the models and their pure checks are here; what enforces them (the LLM pool, the
sandboxes' isolation, the outbound guard, the stores) is in ``raytroupe.actors``.
"""

from raytroupe.protocols.config.files import read_yaml, validated
from raytroupe.protocols.config.guardrails import GuardrailsConfig
from raytroupe.protocols.config.llm import LLMConfig, RetryPolicy, refuse_own_api
from raytroupe.protocols.config.memory import MemoryConfig
from raytroupe.protocols.config.network import NetworkPolicy
from raytroupe.protocols.config.shares import Shares
from raytroupe.protocols.config.skills import RoutingConfig, SkillsConfig
from raytroupe.protocols.config.state import checked_state_url, is_postgres, redact_url, state_url
from raytroupe.protocols.config.system import (
    OTEL_FLAG_DEPRECATED,
    PlacementConfig,
    ScaleConfig,
    StateConfig,
    SystemConfig,
    TracingConfig,
)
from raytroupe.protocols.config.tools import (
    RESERVED_TOOL_NAMES,
    FunctionTool,
    Limits,
    ResourceLimits,
    ToolsConfig,
    default_scratch_root,
)
from raytroupe.protocols.config.webhooks import WebhooksConfig

__all__ = [
    "OTEL_FLAG_DEPRECATED",
    "RESERVED_TOOL_NAMES",
    "FunctionTool",
    "GuardrailsConfig",
    "LLMConfig",
    "Limits",
    "MemoryConfig",
    "NetworkPolicy",
    "PlacementConfig",
    "ResourceLimits",
    "RetryPolicy",
    "RoutingConfig",
    "ScaleConfig",
    "Shares",
    "SkillsConfig",
    "StateConfig",
    "SystemConfig",
    "ToolsConfig",
    "TracingConfig",
    "WebhooksConfig",
    "checked_state_url",
    "default_scratch_root",
    "is_postgres",
    "read_yaml",
    "redact_url",
    "refuse_own_api",
    "state_url",
    "validated",
]
