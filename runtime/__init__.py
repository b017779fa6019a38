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

from protocols import (
    AgentSpec,
    ConfigError,
    DeadLetter,
    JobEvent,
    JobFailed,
    JobNotFound,
    JobResult,
    JobStatus,
    JobTimeout,
    OfflineModel,
    ScriptedModel,
    ScriptedTurn,
    SubtaskResult,
    ToolCall,
    TroupeError,
)
from runtime.config import Team
from runtime.driver import JobHandle, Runtime, connect
from runtime.logging import configure_logging

__all__ = [
    "AgentSpec",
    "ConfigError",
    "DeadLetter",
    "JobEvent",
    "JobFailed",
    "JobHandle",
    "JobNotFound",
    "JobResult",
    "JobStatus",
    "JobTimeout",
    "OfflineModel",
    "Runtime",
    "ScriptedModel",
    "ScriptedTurn",
    "SubtaskResult",
    "Team",
    "ToolCall",
    "TroupeError",
    "configure_logging",
    "connect",
]
