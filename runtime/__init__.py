"""The driver API of raytroupe.

```python
import runtime
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

from actors.lazy import lazy_exports
from protocols import (
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
from protocols.intent import IntentChoice, IntentConfig, IntentRule

if TYPE_CHECKING:
    from actors.llm.config import LLMConfig
    from actors.llm.gateway import RetryPolicy
    from actors.memory.config import MemoryConfig
    from actors.outbound import NetworkPolicy
    from actors.skills.config import RoutingConfig, SkillsConfig
    from actors.system_config import ScaleConfig, SystemConfig
    from actors.tools.config import ToolsConfig
    from actors.tools.isolation import ResourceLimits
    from runtime.config import Team
    from runtime.driver import Runtime, connect
    from runtime.handle import JobHandle
    from runtime.logging import configure_logging
    from runtime.tenant import TenantView

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
    "JobHandle": "runtime.handle",
    "NetworkPolicy": "actors.outbound",
    "TenantView": "runtime.tenant",
    "LLMConfig": "actors.llm.config",
    "ResourceLimits": "actors.tools.isolation",
    "Limits": "actors.tools.isolation",  # the earlier name of ResourceLimits
    "MemoryConfig": "actors.memory.config",
    "RetryPolicy": "actors.llm.gateway",
    "Runtime": "runtime.driver",
    "ScaleConfig": "actors.system_config",
    "RoutingConfig": "actors.skills.config",
    "SkillsConfig": "actors.skills.config",
    "SystemConfig": "actors.system_config",
    "Team": "runtime.config",
    "ToolsConfig": "actors.tools.config",
    "configure_logging": "runtime.logging",
    "connect": "runtime.driver",
}


# The names of an earlier release, kept so that scripts written for it still run.
RouterConfig = IntentConfig
RouteRule = IntentRule
Route = IntentChoice

__getattr__, __dir__ = lazy_exports(__name__, _HOMES)
