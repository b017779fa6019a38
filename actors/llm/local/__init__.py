"""Models raytroupe serves itself: ``llama-server`` supervised by the actor ``model/<alias>``."""

from raytroupe.actors.llm.local.binary import find_llama_server, install_llama_server
from raytroupe.actors.llm.local.provider import InProcessServers, LocalModelProvider, LocalServers
from raytroupe.actors.llm.local.server import LlamaServer, LocalEndpoint

__all__ = [
    "InProcessServers",
    "LlamaServer",
    "LocalEndpoint",
    "LocalModelProvider",
    "LocalServers",
    "find_llama_server",
    "install_llama_server",
]
