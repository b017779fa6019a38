"""Model calls made once per place of a durable run (``LLMRequest.replay``).

An agent names each model call of a subtask by its place in the subtask's run: the call's
number and a digest of the conversation it continues
(:meth:`raytroupe.actors.agent.turns.Loop.placed`). The pool keeps each answered call's answer
with its cost, in the transaction that bills it (:meth:`raytroupe.actors.llm.budget.Ledger.settle`):
a call is billed if and only if its answer is kept. When the subtask is run again from its
first turn (its agent died, or the whole deployment restarted), it asks the same calls at the
same places, and each one answered before is given its kept answer, marked ``replayed``,
without calling the provider or billing anyone; the first call never answered is made for real.

A run that went another way (a gate sent the answer back with its problems, a tool answered
differently) continues another conversation: its places differ, and its calls are made. The
key holds the tenant and the job of the envelope, so one tenant or job can never be given
another's answers, whatever place it names.
"""

from __future__ import annotations

import hashlib

from raytroupe.protocols import LLMRequest

__all__ = ["turn_key"]


def turn_key(tenant: str, job_id: str | None, request: LLMRequest) -> str | None:
    """The name of ``request``'s call in its job's run; None: it is not one to keep."""
    if request.replay is None or job_id is None:
        return None
    digest = hashlib.sha256()
    for part in (tenant, job_id, request.replay):
        digest.update(part.encode())
        digest.update(b"\0")
    return digest.hexdigest()
