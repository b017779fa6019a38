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

import asyncio
import hashlib
import time
from collections.abc import Awaitable, Callable

import structlog

from raytroupe.actors.llm.budget import Ledger
from raytroupe.actors.llm.gateway import CallContext
from raytroupe.protocols import LLMRequest, LLMResponse, TroupeError

__all__ = ["CLAIM_LEASE_S", "CLAIM_POLL_S", "KeptCalls", "turn_key"]

log = structlog.get_logger("raytroupe.llm")

CLAIM_LEASE_S = 300.0
"""How long a kept call another replica makes is waited for, at most: a replica that died
clears its claims when Ray starts it again; this bounds the wait when it is not started."""

CLAIM_POLL_S = 0.1
"""How often a call waiting for another replica's answer looks for it."""


def turn_key(tenant: str, job_id: str | None, request: LLMRequest) -> str | None:
    """The name of ``request``'s call in its job's run; None: it is not one to keep."""
    if request.replay is None or job_id is None:
        return None
    digest = hashlib.sha256()
    for part in (tenant, job_id, request.replay):
        digest.update(part.encode())
        digest.update(b"\0")
    return digest.hexdigest()


class KeptCalls:
    """One pool replica's kept calls: answered as kept, joined, or made and kept.

    Every ledger read and claim runs on the event loop, as holds and settlements do: the
    ledger's one connection must never run two transactions at once.
    """

    def __init__(self, ledger: Ledger) -> None:
        self._ledger = ledger
        self._making: dict[str, asyncio.Future[LLMResponse]] = {}
        """Kept calls being made here, by key: the same call asked again waits for them."""

    async def call(
        self,
        key: str,
        make: Callable[[], Awaitable[LLMResponse]],
        context: CallContext,
        request: LLMRequest,
    ) -> LLMResponse:
        """The call named ``key`` (:func:`turn_key`): its kept answer, or ``make()``'s.

        Its kept answer; else the answer of the same call being made (here, or by another
        replica); else the call, made (and kept by the settlement that bills it). The same
        call asked twice at once (its first asking's reply lost with a router or a replica
        that died, while the call went on) is made once: the second waits for it.
        """
        waited = time.monotonic() + CLAIM_LEASE_S
        while True:
            kept = self._ledger.turn(key)
            if kept is not None:  # made before, in an earlier run of its subtask
                log.info("model_call_replayed", job_id=context.job_id, agent=context.agent,
                         place=request.replay)  # fmt: skip
                return kept.model_copy(update={"replayed": True, "latency_s": 0.0})
            making = self._making.get(key)
            if making is not None:  # made here now: its answer, or a try of our own
                try:
                    answer = await asyncio.shield(making)
                except TroupeError:
                    continue
                except asyncio.CancelledError:
                    current = asyncio.current_task()
                    if current is not None and current.cancelling():
                        raise  # this call is cancelled, not the one it waited for
                    continue
                return answer.model_copy(update={"replayed": True, "latency_s": 0.0})
            holder = self._ledger.claim_turn(key, CLAIM_LEASE_S)
            if holder is None or time.monotonic() > waited:
                break
            await asyncio.sleep(CLAIM_POLL_S)  # another replica makes it: wait for its answer
        made: asyncio.Future[LLMResponse] = asyncio.get_running_loop().create_future()
        made.add_done_callback(lambda f: f.cancelled() or f.exception())  # seen, if unwaited
        self._making[key] = made
        try:
            answer = await make()
        except BaseException as exc:
            self._ledger.release_turn(key)
            if isinstance(exc, TroupeError):
                made.set_exception(exc)
            else:
                made.cancel()
            raise
        finally:
            self._making.pop(key, None)
        made.set_result(answer)
        return answer
