"""The driver API of raytroupe.

```python
from raytroupe import runtime
rt = runtime.connect()
team = runtime.Team.from_yaml("examples/teams/research.yaml")
job = rt.submit("task text", team=team)
res = job.result(timeout=60)
for ev in job.events(): ...
rt.shutdown()
```
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from raytroupe.protocols import (
        A2AAgentSpec,
        AgentInfo,
        AgentNotFound,
        AgentSpec,
        AnthropicModel,
        Attachment,
        BadResponse,
        Budget,
        BudgetExceeded,
        ConfigError,
        Conflict,
        DeadLetter,
        ExperimentNotFound,
        Forbidden,
        InvalidInput,
        InvalidRequest,
        JobCancelled,
        JobEvent,
        JobFailed,
        JobNotFound,
        JobResult,
        JobStatus,
        JobTimeout,
        LocalModel,
        MCPServerSpec,
        MemoryPolicy,
        MemoryQuery,
        MemoryWrite,
        OfflineModel,
        OpenAICompatibleModel,
        OpenAIModel,
        QualityReport,
        Reasoning,
        RouteSpec,
        ScriptedModel,
        ScriptedTurn,
        SkillInfo,
        SkillNotFound,
        SkillSpec,
        StandardOutput,
        SubtaskResult,
        TeamNotFound,
        TenantPolicy,
        ToolCall,
        ToolDef,
        TroupeError,
        Unauthorized,
        UnpricedModel,
        Unreachable,
        UsageRow,
    )
    from raytroupe.protocols.config.llm import LLMConfig, RetryPolicy
    from raytroupe.protocols.config.memory import MemoryConfig
    from raytroupe.protocols.config.network import NetworkPolicy
    from raytroupe.protocols.config.skills import RoutingConfig, SkillsConfig
    from raytroupe.protocols.config.system import ScaleConfig, SystemConfig
    from raytroupe.protocols.config.tools import ResourceLimits, ToolsConfig
    from raytroupe.protocols.intent import IntentChoice, IntentConfig, IntentRule
    from raytroupe.protocols.spend import SpendLimit
    from raytroupe.runtime.config import Team
    from raytroupe.runtime.connecting import connect
    from raytroupe.runtime.driver import Runtime
    from raytroupe.runtime.handle import JobHandle
    from raytroupe.runtime.http_client import AsyncClient, Client
    from raytroupe.runtime.logging import configure_logging
    from raytroupe.runtime.tenant import TenantView
    from raytroupe.runtime.tools import Tool, tool

__all__ = [
    "A2AAgentSpec",
    "AgentInfo",
    "AgentNotFound",
    "AgentSpec",
    "AnthropicModel",
    "AsyncClient",
    "Attachment",
    "BadResponse",
    "Budget",
    "BudgetExceeded",
    "Client",
    "ConfigError",
    "Conflict",
    "DeadLetter",
    "ExperimentNotFound",
    "Forbidden",
    "GuardrailsConfig",
    "IntentChoice",
    "IntentConfig",
    "IntentRule",
    "InvalidInput",
    "InvalidRequest",
    "JobCancelled",
    "JobEvent",
    "JobFailed",
    "JobHandle",
    "JobNotFound",
    "JobResult",
    "JobStatus",
    "JobTimeout",
    "LLMConfig",
    "LocalModel",
    "MCPServerSpec",
    "MemoryConfig",
    "MemoryPolicy",
    "MemoryQuery",
    "MemoryWrite",
    "NetworkPolicy",
    "OfflineModel",
    "OpenAICompatibleModel",
    "OpenAIModel",
    "QualityReport",
    "Reasoning",
    "ResourceLimits",
    "RetryPolicy",
    "RouteSpec",
    "RoutingConfig",
    "Runtime",
    "ScaleConfig",
    "ScriptedModel",
    "ScriptedTurn",
    "SkillInfo",
    "SkillNotFound",
    "SkillSpec",
    "SkillsConfig",
    "SpendLimit",
    "StandardOutput",
    "SubtaskResult",
    "SystemConfig",
    "Team",
    "TeamNotFound",
    "TenantPolicy",
    "TenantView",
    "Tool",
    "ToolCall",
    "ToolDef",
    "ToolsConfig",
    "TroupeError",
    "Unauthorized",
    "UnpricedModel",
    "Unreachable",
    "UsageRow",
    "WebhooksConfig",
    "configure_logging",
    "connect",
    "tool",
]

# Imported on first use (PEP 562): a process that imports one module of this package (a
# deployment, a script) must not load the driver, Ray glue, Chroma or the provider SDKs for it
# (measured: 78 MB against 57 MB USS per agent, bench/footprint.py, when Ray's worker setup
# hook imported runtime.logging in every worker). The protocols (pydantic) wait too: the CLI
# imports this package, and `troupe --help` loads no pydantic (runtime/cli/_app.py).
_HOMES = {
    "AgentInfo": "raytroupe.protocols",
    "AgentNotFound": "raytroupe.protocols",
    "A2AAgentSpec": "raytroupe.protocols",
    "AgentSpec": "raytroupe.protocols",
    "AnthropicModel": "raytroupe.protocols",
    "Attachment": "raytroupe.protocols",
    "Budget": "raytroupe.protocols",
    "BudgetExceeded": "raytroupe.protocols",
    "ConfigError": "raytroupe.protocols",
    "Conflict": "raytroupe.protocols",
    "DeadLetter": "raytroupe.protocols",
    "ExperimentNotFound": "raytroupe.protocols",
    "Forbidden": "raytroupe.protocols",
    "JobCancelled": "raytroupe.protocols",
    "JobEvent": "raytroupe.protocols",
    "JobFailed": "raytroupe.protocols",
    "JobNotFound": "raytroupe.protocols",
    "JobResult": "raytroupe.protocols",
    "JobStatus": "raytroupe.protocols",
    "JobTimeout": "raytroupe.protocols",
    "LocalModel": "raytroupe.protocols",
    "MCPServerSpec": "raytroupe.protocols",
    "MemoryPolicy": "raytroupe.protocols",
    "MemoryQuery": "raytroupe.protocols",
    "MemoryWrite": "raytroupe.protocols",
    "OfflineModel": "raytroupe.protocols",
    "OpenAICompatibleModel": "raytroupe.protocols",
    "OpenAIModel": "raytroupe.protocols",
    "QualityReport": "raytroupe.protocols",
    "Reasoning": "raytroupe.protocols",
    "RouteSpec": "raytroupe.protocols",
    "ScriptedModel": "raytroupe.protocols",
    "ScriptedTurn": "raytroupe.protocols",
    "SkillInfo": "raytroupe.protocols",
    "SkillNotFound": "raytroupe.protocols",
    "SkillSpec": "raytroupe.protocols",
    "StandardOutput": "raytroupe.protocols",
    "SubtaskResult": "raytroupe.protocols",
    "TeamNotFound": "raytroupe.protocols",
    "TenantPolicy": "raytroupe.protocols",
    "ToolCall": "raytroupe.protocols",
    "ToolDef": "raytroupe.protocols",
    "TroupeError": "raytroupe.protocols",
    "UnpricedModel": "raytroupe.protocols",
    "UsageRow": "raytroupe.protocols",
    "BadResponse": "raytroupe.protocols",
    "InvalidInput": "raytroupe.protocols",
    "InvalidRequest": "raytroupe.protocols",
    "Unauthorized": "raytroupe.protocols",
    "Unreachable": "raytroupe.protocols",
    "AsyncClient": "raytroupe.runtime.http_client",
    "Client": "raytroupe.runtime.http_client",
    "IntentChoice": "raytroupe.protocols.intent",
    "IntentConfig": "raytroupe.protocols.intent",
    "IntentRule": "raytroupe.protocols.intent",
    "JobHandle": "raytroupe.runtime.handle",
    "NetworkPolicy": "raytroupe.protocols.config.network",
    "WebhooksConfig": "raytroupe.protocols.config.webhooks",
    "GuardrailsConfig": "raytroupe.protocols.config.guardrails",
    "TenantView": "raytroupe.runtime.tenant",
    "LLMConfig": "raytroupe.protocols.config.llm",
    "ResourceLimits": "raytroupe.protocols.config.tools",
    "Limits": "raytroupe.protocols.config.tools",  # the earlier name of ResourceLimits
    "MemoryConfig": "raytroupe.protocols.config.memory",
    "RetryPolicy": "raytroupe.protocols.config.llm",
    "Runtime": "raytroupe.runtime.driver",
    "ScaleConfig": "raytroupe.protocols.config.system",
    "RoutingConfig": "raytroupe.protocols.config.skills",
    "SkillsConfig": "raytroupe.protocols.config.skills",
    "SpendLimit": "raytroupe.protocols.spend",
    "SystemConfig": "raytroupe.protocols.config.system",
    "Team": "raytroupe.runtime.config",
    "Tool": "raytroupe.runtime.tools",
    "tool": "raytroupe.runtime.tools",
    "ToolsConfig": "raytroupe.protocols.config.tools",
    "configure_logging": "raytroupe.runtime.logging",
    "connect": "raytroupe.runtime.connecting",
}


# The names of an earlier release, kept so that scripts written for it still run.
_ALIASES = {"RouterConfig": "IntentConfig", "RouteRule": "IntentRule", "Route": "IntentChoice"}
if TYPE_CHECKING:
    RouterConfig = IntentConfig
    RouteRule = IntentRule
    Route = IntentChoice


# The hook is written out here, not raytroupe.actors.lazy's: this package reaches the actors
# only through raytroupe.actors.spawn (tests/unit/test_rooms.py), and raytroupe.protocols
# would load pydantic with it.
def __getattr__(name: str) -> Any:
    """A public name, imported on first use; an earlier release's name, as its new one."""
    real = _ALIASES.get(name, name)
    home = _HOMES.get(real)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(home), real)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
