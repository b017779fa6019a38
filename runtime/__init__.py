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

from typing import TYPE_CHECKING, Any

from raytroupe.actors.lazy import lazy_exports

if TYPE_CHECKING:
    from raytroupe.actors.llm.config import LLMConfig
    from raytroupe.actors.llm.gateway import RetryPolicy
    from raytroupe.actors.memory.config import MemoryConfig
    from raytroupe.actors.outbound import NetworkPolicy
    from raytroupe.actors.skills.config import RoutingConfig, SkillsConfig
    from raytroupe.actors.system_config import ScaleConfig, SystemConfig
    from raytroupe.actors.tools.config import ToolsConfig
    from raytroupe.actors.tools.isolation import ResourceLimits
    from raytroupe.protocols import (
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
    from raytroupe.protocols.intent import IntentChoice, IntentConfig, IntentRule
    from raytroupe.runtime.config import Team
    from raytroupe.runtime.connecting import connect
    from raytroupe.runtime.driver import Runtime
    from raytroupe.runtime.handle import JobHandle
    from raytroupe.runtime.http_client import AsyncClient, Client
    from raytroupe.runtime.logging import configure_logging
    from raytroupe.runtime.tenant import TenantView
    from raytroupe.runtime.tools import Tool, tool

__all__ = [
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
    "NetworkPolicy": "raytroupe.actors.outbound",
    "TenantView": "raytroupe.runtime.tenant",
    "LLMConfig": "raytroupe.actors.llm.config",
    "ResourceLimits": "raytroupe.actors.tools.isolation",
    "Limits": "raytroupe.actors.tools.isolation",  # the earlier name of ResourceLimits
    "MemoryConfig": "raytroupe.actors.memory.config",
    "RetryPolicy": "raytroupe.actors.llm.gateway",
    "Runtime": "raytroupe.runtime.driver",
    "ScaleConfig": "raytroupe.actors.system_config",
    "RoutingConfig": "raytroupe.actors.skills.config",
    "SkillsConfig": "raytroupe.actors.skills.config",
    "SystemConfig": "raytroupe.actors.system_config",
    "Team": "raytroupe.runtime.config",
    "Tool": "raytroupe.runtime.tools",
    "tool": "raytroupe.runtime.tools",
    "ToolsConfig": "raytroupe.actors.tools.config",
    "configure_logging": "raytroupe.runtime.logging",
    "connect": "raytroupe.runtime.connecting",
}


# The names of an earlier release, kept so that scripts written for it still run.
_ALIASES = {"RouterConfig": "IntentConfig", "RouteRule": "IntentRule", "Route": "IntentChoice"}
if TYPE_CHECKING:
    RouterConfig = IntentConfig
    RouteRule = IntentRule
    Route = IntentChoice

_exported, __dir__ = lazy_exports(__name__, _HOMES)


def __getattr__(name: str) -> Any:
    """A public name, imported on first use; an earlier release's name, as its new one."""
    value = _exported(_ALIASES.get(name, name))
    globals()[name] = value
    return value
