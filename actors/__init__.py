"""The actors of raytroupe, as plain classes; Ray makes them remote when they are spawned.

``MessageRouter`` delivers envelopes; ``FrontDesk`` admits jobs; ``Orchestrator`` (a job
shard) runs them; ``AgentActor`` runs one
agent's loop; ``LLMAdapterPool`` serves model aliases. ``raytroupe.actors.spawn`` holds the Ray
glue.

The names below are imported on first use (PEP 562): an agent's worker process imports
``raytroupe.actors.agent``, which runs this file, and must not pay for the orchestrator (Chroma,
numpy, OpenTelemetry) or the LLM pool (provider SDKs) that it never uses.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from raytroupe.actors.lazy import lazy_exports

if TYPE_CHECKING:
    from raytroupe.actors.agent import AgentActor
    from raytroupe.actors.desk import FrontDesk
    from raytroupe.actors.endpoint import Mailbox, RouterClient, serve_envelope
    from raytroupe.actors.llm import LLMAdapterPool
    from raytroupe.actors.orchestrator import Orchestrator
    from raytroupe.actors.orchestrator.shards import TeamProvisioner
    from raytroupe.actors.router import LocalRouterClient, MessageRouter, RouterStats

__all__ = [
    "AgentActor",
    "FrontDesk",
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

_HOMES = {
    "AgentActor": "raytroupe.actors.agent",
    "FrontDesk": "raytroupe.actors.desk",
    "LLMAdapterPool": "raytroupe.actors.llm",
    "LocalRouterClient": "raytroupe.actors.router",
    "Mailbox": "raytroupe.actors.endpoint",
    "MessageRouter": "raytroupe.actors.router",
    "Orchestrator": "raytroupe.actors.orchestrator",
    "RouterClient": "raytroupe.actors.endpoint",
    "RouterStats": "raytroupe.actors.router",
    "TeamProvisioner": "raytroupe.actors.orchestrator.shards",
    "serve_envelope": "raytroupe.actors.endpoint",
}


__getattr__, __dir__ = lazy_exports(__name__, _HOMES)
