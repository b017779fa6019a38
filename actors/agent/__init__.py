"""One agent: its actor (the ReAct loop), its stop conditions, its memory use.

``actor`` holds :class:`AgentActor`; ``stop`` the conditions that end a subtask's loop;
``memory`` recall before model calls and writing results. Its spans are built by
``raytroupe.actors.telemetry.calls``.
"""

from raytroupe.actors.agent.actor import AgentActor

__all__ = ["AgentActor"]
