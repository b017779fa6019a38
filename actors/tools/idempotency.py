"""Idempotency for side-effecting tool calls: a retried call returns the recorded result.

A side-effecting call's key (:func:`effect_key`) comes from the job, the subtask, the tool and
its normalized arguments: the same call made again in a subtask gets the recorded result,
whatever turn of the agent's loop it comes at — never from the model's tool-call id, which
changes on every retry, nor from the turn, which a subtask run again after a restart (or a
model whose answer was lost on its way and asked again) may reach the call at another of. The
record lives in the state store (a SQLite file, or the cluster's PostgreSQL that every sandbox
on every node shares), so it outlasts a restart of the sandbox actor. A claim row marks a
call in progress. A claim older than its lease was abandoned (its holder died mid-call): the
call may have taken effect, so it is never run again under that key (at most once).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Literal

from raytroupe.actors.state import Migration, first, open_database
from raytroupe.protocols import ErrorCode, ToolError, ToolResult
from raytroupe.protocols.llm import ToolArguments

__all__ = [
    "AtMostOnce",
    "Claim",
    "IdempotencyStore",
    "effect_key",
    "idempotency_key",
    "step_key",
]

Claim = Literal["claimed", "held", "abandoned"]
"""What :meth:`IdempotencyStore.claim` found: the right to run is ours; someone runs the call
now (or it has a result); or its holder died mid-call, leaving its outcome unknown."""


def idempotency_key(
    job_id: str | None, task_id: str | None, step: int | None, tool: str, arguments: ToolArguments
) -> str:
    """A stable key for one call of a side-effecting tool."""
    canonical = json.dumps(
        [job_id, task_id, step, tool, arguments],
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
        default=str,
    )
    return hashlib.sha256(canonical.encode()).hexdigest()


def step_key(  # noqa: PLR0917 - the parts of one key
    job_id: str | None,
    task_id: str | None,
    step: int | None,
    agent: str,
    tool: str,
    arguments: ToolArguments,
) -> str | None:
    """The key a call without side effects is kept under: its place in its agent's run.

    The agent's: agents answering one subtask side by side each have their own run, and may
    each have a function of that name of their own. None when the call has no place (made
    outside a job's subtask).
    """
    if job_id is None or task_id is None or step is None:
        return None
    return idempotency_key(job_id, task_id, step, f"{agent}\0{tool}", arguments)


def effect_key(job_id: str | None, task_id: str | None, tool: str, arguments: ToolArguments) -> str:
    """The key a side-effecting call runs at most once under: one per call in a subtask.

    Not its step: the same call at another turn is the same effect (a model that repeats it,
    a subtask run again from its first turn), and is given the recorded result.
    """
    return idempotency_key(job_id, task_id, None, tool, arguments)


_MIGRATIONS: tuple[Migration, ...] = (
    (
        "CREATE TABLE IF NOT EXISTS calls (key TEXT PRIMARY KEY, state TEXT NOT NULL, "
        "claimed_at DOUBLE PRECISION NOT NULL, result TEXT)",
    ),
)


class IdempotencyStore:
    """Results of side-effecting calls by key, at a state location (``:memory:`` for tests)."""

    def __init__(self, location: str | Path) -> None:
        # durable: a side effect's record must outlive the machine, too
        self._db = open_database(location, "tools", _MIGRATIONS, durable=True)

    def recorded(self, key: str) -> ToolResult | None:
        """The result recorded for ``key``, if the call finished."""
        row = first(
            self._db.execute("SELECT result FROM calls WHERE key = ? AND state = 'done'", (key,))
        )
        return None if row is None else ToolResult.model_validate_json(row[0])

    def claim(self, key: str, lease_s: float) -> Claim:
        """Take the right to run ``key`` if nobody ever did (or every try failed cleanly).

        ``held``: a live claim or a result exists. ``abandoned``: a claim older than
        ``lease_s`` exists, whose holder died before recording an outcome; it stays.
        """
        now = time.time()
        with self._db.transaction() as tx:  # one claimer wins, whichever process or node
            if tx.execute(
                "INSERT INTO calls (key, state, claimed_at, result) VALUES (?, 'running', ?, NULL) "
                "ON CONFLICT (key) DO NOTHING RETURNING key",
                (key, now),
            ):
                return "claimed"
            row = first(tx.execute("SELECT state, claimed_at FROM calls WHERE key = ?", (key,)))
        if row is None:  # released between the two statements: somebody else is on it
            return "held"
        return "held" if row[0] == "done" or now - row[1] < lease_s else "abandoned"

    def finish(self, key: str, result: ToolResult) -> None:
        """Record the result of a claimed call."""
        self._db.execute(
            "UPDATE calls SET state = 'done', result = ? WHERE key = ?",
            (result.model_dump_json(), key),
        )

    def keep(self, key: str, result: ToolResult) -> None:
        """Keep the result of a call that needs no claim (one without side effects)."""
        self._db.execute(
            "INSERT INTO calls (key, state, claimed_at, result) VALUES (?, 'done', ?, ?) "
            "ON CONFLICT (key) DO NOTHING",
            (key, time.time(), result.model_dump_json()),
        )

    def release(self, key: str) -> None:
        """Give up a claim without a result (the call failed before it had any effect)."""
        self._db.execute("DELETE FROM calls WHERE key = ? AND state = 'running'", (key,))

    def close(self) -> None:
        """Close the database."""
        self._db.close()


class AtMostOnce:
    """Runs side-effecting calls at most once per key; a repeat gets the recorded result.

    A run belongs to this object, not to its caller: a caller that goes away does not cut it
    short (its function may be half way through, in a thread), and its outcome is recorded
    for the retry. A run whose outcome is unknown (its holder died, or it timed out and may
    go on: ``metadata['timed_out']``) keeps its claim, so it is never run again.
    """

    def __init__(self, store: IdempotencyStore) -> None:
        self._store = store
        self._running: dict[str, asyncio.Future[ToolResult]] = {}

    async def run(
        self, key: str, tool: str, run: Callable[[], Awaitable[ToolResult]], *, lease_s: float
    ) -> ToolResult:
        """``run()`` under ``key``, unless it ran (its result) or runs (wait for it) already.

        Raises:
            ToolError: another process holds the call, or an earlier run's outcome is unknown.
        """
        recorded = self._store.recorded(key)
        if recorded is not None:
            return recorded.model_copy(update={"metadata": {**recorded.metadata, "replayed": True}})
        pending = self._running.get(key)
        if pending is not None:  # the same call is running here: share its result
            return await asyncio.shield(pending)
        match self._store.claim(key, lease_s=lease_s):
            case "held":
                raise ToolError(f"the same {tool!r} call is running elsewhere; retry later")
            case "abandoned":
                raise ToolError(
                    f"an earlier run of this {tool!r} call was cut short (its sandbox stopped) "
                    "and may have taken effect; it is not run again"
                )
        running = asyncio.ensure_future(self._recorded(key, run))
        self._running[key] = running
        running.add_done_callback(lambda _: self._running.pop(key, None))
        return await asyncio.shield(running)

    async def kept(self, key: str | None, run: Callable[[], Awaitable[ToolResult]]) -> ToolResult:
        """``run()`` for a call without side effects, its result kept under ``key``.

        ``key`` names the call's place in its subtask's run (:func:`step_key`): a run of the
        subtask from its first turn (its agent died) is given what the tool answered the
        first time, so that its model is shown the same and its kept answers replay
        (``raytroupe.actors.llm.replay``). Nothing is claimed: a call cut short runs again.
        A failure the host caused, or one that may pass, is not kept. None: not kept.
        """
        if key is not None and (recorded := self._store.recorded(key)) is not None:
            return recorded.model_copy(update={"metadata": {**recorded.metadata, "replayed": True}})
        result = await run()
        error = result.error
        passing = error is not None and (
            error.retryable or error.code is ErrorCode.TOOL_INFRASTRUCTURE
        )
        if key is not None and not passing:
            self._store.keep(key, result)
        return result

    async def _recorded(self, key: str, run: Callable[[], Awaitable[ToolResult]]) -> ToolResult:
        try:
            result = await run()
        except asyncio.CancelledError:
            raise  # the sandbox is stopping mid-call: the claim stays, the outcome is unknown
        except BaseException:
            self._store.release(key)
            raise
        if result.ok:
            self._store.finish(key, result)
        elif not result.metadata.get("timed_out"):
            self._store.release(key)  # a failed call changed nothing: it may run again
        return result
