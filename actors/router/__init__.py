"""The message router: envelopes delivered by name, role or topic (the data plane).

``actor`` holds :class:`MessageRouter` and its in-process client; ``registry`` the addresses
it delivers to; ``delivery`` the calls of the recipients' mailboxes; ``ledger`` the ids seen,
the dead letters and the counters.
"""

from raytroupe.actors.router.actor import LocalRouterClient, MessageRouter, RouterStats

__all__ = ["LocalRouterClient", "MessageRouter", "RouterStats"]
