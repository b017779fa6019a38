"""The HTTP entry point: a Ray Serve application, its configuration and API keys.

```python
from raytroupe import runtime, deployments
rt = runtime.connect()
url = deployments.deploy(port=8000, config=deployments.APIConfig(...))
```
"""

from raytroupe.deployments.app import build, deploy
from raytroupe.deployments.config import APIConfig, APIKey
from raytroupe.deployments.keys import hash_key, new_key

__all__ = ["APIConfig", "APIKey", "build", "deploy", "hash_key", "new_key"]
