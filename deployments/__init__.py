"""The HTTP entry point: a Ray Serve application, its configuration and API keys.

```python
import runtime, deployments
rt = runtime.connect()
url = deployments.deploy(port=8000, config=deployments.APIConfig(...))
```
"""

from deployments.app import build, deploy
from deployments.config import APIConfig, APIKey
from deployments.keys import hash_key, new_key

__all__ = ["APIConfig", "APIKey", "build", "deploy", "hash_key", "new_key"]
