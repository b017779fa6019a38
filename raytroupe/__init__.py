"""raytroupe: an actor-model multi-agent runtime on Ray.

```python
import raytroupe

rt = raytroupe.connect()
team = raytroupe.Team.from_yaml("examples/teams/research.yaml")
job = rt.submit("task text", team=team)
print(job.result(timeout=60).answer)
rt.shutdown()
```

Everything :mod:`raytroupe.runtime` exports is importable from here, on first use: importing
this package loads nothing else (the CLI's ``--help`` and ``--version`` rely on it). The
implementation lives in the subpackages ``raytroupe.runtime`` (driver, CLI),
``raytroupe.actors`` (the Ray actors), ``raytroupe.protocols`` (the typed messages and
specifications) and ``raytroupe.deployments`` (Ray Serve): in the repository, the top-level
folders of those names, linked here.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # what __getattr__ gives, as type checkers see it (nothing runs here)
    from raytroupe.runtime import *  # noqa: F403

__version__ = "0.2.0"


def __getattr__(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(name)
    runtime = importlib.import_module(f"{__name__}.runtime")
    try:
        value = getattr(runtime, name)
    except AttributeError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    runtime = importlib.import_module(f"{__name__}.runtime")
    return sorted({*globals(), *runtime.__all__})
