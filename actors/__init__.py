"""The actors of raytroupe, as plain classes; Ray makes them remote when they are spawned.

``MessageRouter`` delivers envelopes; ``Orchestrator`` runs jobs; ``AgentActor`` runs one
agent's loop; ``LLMAdapterPool`` serves model aliases. ``actors._ray`` holds the Ray glue.
"""

from actors._endpoint import Mailbox, RouterClient, serve_envelope
from actors.agent import AgentActor
from actors.llm import LLMAdapterPool
from actors.orchestrator import Orchestrator, TeamProvisioner
from actors.router import LocalRouterClient, MessageRouter, RouterStats

__all__ = [
    "AgentActor",
    "LLMAdapterPool",
    "LocalRouterClient",
    "Mailbox",
    "MessageRouter",
    "Orchestrator",
    "RouterClient",
    "RouterStats",
    "TeamProvisioner",
    "serve_envelope",
]
