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

from typing import TYPE_CHECKING

from raytroupe.actors.lazy import lazy_exports
from raytroupe.protocols import (
    AgentInfo,
    AgentNotFound,
    AgentSpec,
    AnthropicModel,
    Attachment,
    Budget,
    BudgetExceeded,
    ConfigError,
    Conflict,
    DeadLetter,
    ExperimentNotFound,
    Forbidden,
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
    UnpricedModel,
    UsageRow,
)
from raytroupe.protocols.intent import IntentChoice, IntentConfig, IntentRule

if TYPE_CHECKING:
    from raytroupe.actors.llm.config import LLMConfig
    from raytroupe.actors.llm.gateway import RetryPolicy
    from raytroupe.actors.memory.config import MemoryConfig
    from raytroupe.actors.outbound import NetworkPolicy
    from raytroupe.actors.skills.config import RoutingConfig, SkillsConfig
    from raytroupe.actors.system_config import ScaleConfig, SystemConfig
    from raytroupe.actors.tools.config import ToolsConfig
    from raytroupe.actors.tools.isolation import ResourceLimits
    from raytroupe.runtime.config import Team
    from raytroupe.runtime.driver import Runtime, connect
    from raytroupe.runtime.handle import JobHandle
    from raytroupe.runtime.logging import configure_logging
    from raytroupe.runtime.tenant import TenantView

__all__ = [
    "AgentInfo",
    "AgentNotFound",
    "AgentSpec",
    "AnthropicModel",
    "Attachment",
    "Budget",
    "BudgetExceeded",
    "ConfigError",
    "Conflict",
    "DeadLetter",
    "ExperimentNotFound",
    "Forbidden",
    "IntentChoice",
    "IntentConfig",
    "IntentRule",
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
    "ToolCall",
    "ToolDef",
    "ToolsConfig",
    "TroupeError",
    "UnpricedModel",
    "UsageRow",
    "configure_logging",
    "connect",
]

# Imported on first use (PEP 562): a process that imports one module of this package (a
# deployment, a script) must not load the driver, Ray glue, Chroma or the provider SDKs for it
# (measured: 78 MB against 57 MB USS per agent, bench/footprint.py, when Ray's worker setup
# hook imported runtime.logging in every worker).
_HOMES = {
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
    "ToolsConfig": "raytroupe.actors.tools.config",
    "configure_logging": "raytroupe.runtime.logging",
    "connect": "raytroupe.runtime.driver",
}


# The names of an earlier release, kept so that scripts written for it still run.
RouterConfig = IntentConfig
RouteRule = IntentRule
Route = IntentChoice

__getattr__, __dir__ = lazy_exports(__name__, _HOMES)
