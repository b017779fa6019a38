"""Sessions: conversations across jobs, kept in the journal's database.

A session is a tenant's list of jobs (its turns). When a job is submitted in a session, the
front desk (:mod:`raytroupe.actors.desk`) shows it the session's history: the summary of the oldest
turns, then the newest turns whole, within a token budget. Turns that no longer fit are
summarized through the LLM pool (the earlier summary folded in), so the history never
outgrows its budget however long the conversation runs.

A turn's answer joins the history once its job has succeeded; it is read from the job's
result when the session is next read (the job may run on another shard), so nothing has
to happen when a job ends, and a restarted desk loses nothing.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Final

import structlog

from raytroupe.actors.llm.tokens import count_tokens, truncate
from raytroupe.actors.state import Database, Migration, first, migrate, open_database
from raytroupe.protocols import (
    ChatMessage,
    Forbidden,
    InvalidInput,
    JobNotFound,
    JobResult,
    LLMRequest,
    LLMResponse,
    SessionNotFound,
    TroupeError,
)
from raytroupe.protocols.job_context import History, Turn
from raytroupe.protocols.sessions import (
    HISTORY_TOKENS,
    MAX_HISTORY_TOKENS,
    MIN_HISTORY_TOKENS,
    SessionInfo,
    SessionTurn,
    checked_session_id,
)

__all__ = ["SessionDesk", "SessionStore", "new_session_id"]

log = structlog.get_logger("raytroupe.desk")

_MIGRATIONS: tuple[Migration, ...] = (
    (
        "CREATE TABLE IF NOT EXISTS sessions (tenant TEXT NOT NULL, id TEXT NOT NULL, "
        "title TEXT NOT NULL, created_at DOUBLE PRECISION NOT NULL, "
        "updated_at DOUBLE PRECISION NOT NULL, summary TEXT NOT NULL, "
        "summarized_through BIGINT NOT NULL, history_tokens BIGINT NOT NULL, "
        "PRIMARY KEY (tenant, id))",
        "CREATE TABLE IF NOT EXISTS session_turns (tenant TEXT NOT NULL, "
        "session_id TEXT NOT NULL, seq BIGINT NOT NULL, job_id TEXT NOT NULL, "
        "task TEXT NOT NULL, status TEXT NOT NULL, answer TEXT, at DOUBLE PRECISION NOT NULL, "
        "PRIMARY KEY (tenant, session_id, seq))",
    ),
    (  # the tenant's end user a session is for (None: the tenant's, any job joins it)
        "ALTER TABLE sessions ADD COLUMN end_user TEXT",
        "CREATE INDEX IF NOT EXISTS sessions_of_user ON sessions (tenant, end_user, updated_at)",
    ),
)

TURN_TOKENS: Final = 600
"""Tokens of one turn's task or answer shown whole; a longer one is cut (its start kept)."""

MAX_SESSIONS_LISTED: Final = 1000

Ask = Callable[[LLMRequest], Awaitable[LLMResponse]]
ResultOf = Callable[[str], Awaitable[JobResult | None]]


_COLUMNS: Final = (
    "id, title, created_at, updated_at, summary, summarized_through, history_tokens, end_user"
)


def _info(tenant: str, row: Sequence[Any], turns: tuple[SessionTurn, ...] = ()) -> SessionInfo:
    """A session from a row of :data:`_COLUMNS`."""
    names = _COLUMNS.replace("end_user", "user").split(", ")
    return SessionInfo(tenant=tenant, turns=turns, **dict(zip(names, row, strict=True)))


class SessionStore:
    """Sessions and their turns, per tenant: every query names its tenant."""

    def __init__(self, db: Database) -> None:
        self._db = db
        migrate(db, "sessions", _MIGRATIONS)

    @classmethod
    def in_memory(cls) -> SessionStore:
        """A store of one process (a desk without a journal)."""
        return cls(open_database(":memory:", "sessions", _MIGRATIONS))

    def create(
        self,
        tenant: str,
        session_id: str,
        title: str = "",
        history_tokens: int = HISTORY_TOKENS,
        user: str | None = None,
    ) -> tuple[SessionInfo, bool]:
        """The tenant's session ``session_id``, made now if it has none; (it, whether made).

        A session it has already keeps its title, history budget and end user.
        """
        now = time.time()
        made = self._db.execute(
            "INSERT INTO sessions (tenant, id, title, created_at, updated_at, summary, "
            "summarized_through, history_tokens, end_user) VALUES (?, ?, ?, ?, ?, '', 0, ?, ?) "
            "ON CONFLICT (tenant, id) DO NOTHING RETURNING id",
            (tenant, session_id, title, now, now, history_tokens, user),
        )
        return self.get(tenant, session_id), bool(made)

    def user(self, tenant: str, session_id: str) -> str | None:
        """The end user the tenant's session is for (None: the tenant's own).

        Raises:
            SessionNotFound: the tenant has no session of that id.
        """
        row = first(
            self._db.execute(
                "SELECT end_user FROM sessions WHERE tenant = ? AND id = ?", (tenant, session_id)
            )
        )
        if row is None:
            raise SessionNotFound(f"no session {session_id!r}", session=session_id)
        return None if row[0] is None else str(row[0])

    def get(self, tenant: str, session_id: str) -> SessionInfo:
        """The session with its turns.

        Raises:
            SessionNotFound: the tenant has no session of that id.
        """
        row = first(
            self._db.execute(
                f"SELECT {_COLUMNS} FROM sessions WHERE tenant = ? AND id = ?",  # noqa: S608 - constant
                (tenant, session_id),
            )
        )
        if row is None:
            raise SessionNotFound(f"no session {session_id!r}", session=session_id)
        rows = self._db.execute(
            "SELECT seq, job_id, task, status, answer, at FROM session_turns "
            "WHERE tenant = ? AND session_id = ? ORDER BY seq",
            (tenant, session_id),
        )
        turns = tuple(
            SessionTurn(seq=r[0], job_id=r[1], task=r[2], status=r[3], answer=r[4], at=r[5])
            for r in rows
        )
        return _info(tenant, row, turns)

    def listed(self, tenant: str, limit: int = 100, user: str | None = None) -> list[SessionInfo]:
        """The tenant's sessions (``user``'s only, if given), the most recently used first.

        Without their turns.
        """
        mine = "" if user is None else "AND end_user = ? "
        rows = self._db.execute(
            f"SELECT {_COLUMNS} FROM sessions WHERE tenant = ? {mine}"  # noqa: S608 - constant
            "ORDER BY updated_at DESC, id LIMIT ?",
            (tenant, *(() if user is None else (user,)), max(1, min(limit, MAX_SESSIONS_LISTED))),
        )
        return [_info(tenant, row) for row in rows]

    def delete(self, tenant: str, session_id: str) -> bool:
        """Forget the session and its turns (its jobs stay); whether it existed."""
        with self._db.transaction() as tx:
            tx.execute(
                "DELETE FROM session_turns WHERE tenant = ? AND session_id = ?",
                (tenant, session_id),
            )
            gone = tx.execute(
                "DELETE FROM sessions WHERE tenant = ? AND id = ? RETURNING id",
                (tenant, session_id),
            )
        return bool(gone)

    def add_turn(self, tenant: str, session_id: str, job_id: str, task: str) -> int:
        """Record a job submitted in the session; its seq.

        Raises:
            SessionNotFound: the session was deleted meanwhile.
        """
        now = time.time()
        with self._db.transaction() as tx:
            touched = tx.execute(
                "UPDATE sessions SET updated_at = ? WHERE tenant = ? AND id = ? RETURNING id",
                (now, tenant, session_id),
            )
            if not touched:
                raise SessionNotFound(f"no session {session_id!r}", session=session_id)
            rows = tx.execute(
                "SELECT COALESCE(MAX(seq), 0) FROM session_turns "
                "WHERE tenant = ? AND session_id = ?",
                (tenant, session_id),
            )
            seq = int(rows[0][0]) + 1
            tx.execute(
                "INSERT INTO session_turns VALUES (?, ?, ?, ?, ?, 'running', NULL, ?)",
                (tenant, session_id, seq, job_id, task, now),
            )
        return seq

    def settle(
        self, tenant: str, session_id: str, seq: int, status: str, answer: str | None
    ) -> None:
        """Record how a turn's job ended."""
        self._db.execute(
            "UPDATE session_turns SET status = ?, answer = ? "
            "WHERE tenant = ? AND session_id = ? AND seq = ?",
            (status, answer, tenant, session_id, seq),
        )

    def summarized(self, tenant: str, session_id: str, summary: str, through: int) -> None:
        """Record the summary of the turns up to ``through`` (it only ever moves forward)."""
        self._db.execute(
            "UPDATE sessions SET summary = ?, summarized_through = ? "
            "WHERE tenant = ? AND id = ? AND summarized_through < ?",
            (summary, through, tenant, session_id, through),
        )


def _cut(text: str, limit: int = TURN_TOKENS) -> str:
    """``text`` on one line, its start only when it is longer than ``limit`` tokens."""
    flat = " ".join(text.split())
    if count_tokens(flat) <= limit:
        return flat
    return truncate(flat, limit) + " [...]"


def _history(summary: str, turns: Sequence[SessionTurn]) -> History:
    """The history shown: the summary, and each turn on a line, cut to its share."""
    shown = [
        said
        for t in turns
        for said in (Turn(role="user", text=_cut(t.task)),
                     Turn(role="assistant", text=_cut(t.answer or "")))
    ]  # fmt: skip
    return History(summary=summary, turns=tuple(shown))


def _turn_tokens(turn: SessionTurn) -> int:
    return count_tokens(_cut(turn.task)) + count_tokens(_cut(turn.answer or "")) + 8


class SessionDesk:
    """Sessions as jobs see them: the history to show, summarized to fit its budget."""

    def __init__(self, store: SessionStore, *, model: str = "default") -> None:
        self.store = store
        self._model = model

    def create(
        self,
        tenant: str,
        session_id: str | None,
        title: str,
        history_tokens: int,
        user: str | None = None,
    ) -> SessionInfo:
        """The tenant's session ``session_id`` (made now if new; a fresh id if None).

        ``history_tokens`` bounds the history each of its jobs is shown (a session the
        tenant has already keeps its own); ``user``, the end user a new one is for.

        Raises:
            InvalidInput: an invalid id, or a history budget out of bounds.
            Forbidden: the tenant's session of that id is another end user's.
        """
        if not MIN_HISTORY_TOKENS <= history_tokens <= MAX_HISTORY_TOKENS:
            raise InvalidInput(
                f"history_tokens is {MIN_HISTORY_TOKENS} to {MAX_HISTORY_TOKENS}",
                field="history_tokens",
            )
        session_id = checked_session_id(session_id or new_session_id())
        info, _made = self.store.create(tenant, session_id, title[:200], history_tokens, user)
        self.joined(info.user, session_id, user)
        return info

    def user_of(self, tenant: str, session_id: str, user: str | None) -> str | None:
        """The end user of a job of ``user`` joining the tenant's session: the session's.

        A session for an end user takes only that user's jobs; a job that names no user is
        that user's. A session without one (the tenant's own) takes any job, as it is.

        Raises:
            SessionNotFound: the tenant has no session of that id.
            Forbidden: the session is another end user's.
        """
        return self.joined(self.store.user(tenant, session_id), session_id, user)

    @staticmethod
    def joined(owner: str | None, session_id: str, user: str | None) -> str | None:
        """``user`` (or the session's ``owner``) if they may meet in the session."""
        if owner is not None and user not in (None, owner):
            raise Forbidden(
                f"session {session_id!r} is another end user's", field="user", session=session_id
            )
        return owner if user is None else user

    def delete(self, tenant: str, session_id: str) -> None:
        """Forget the tenant's session (its jobs stay).

        Raises:
            SessionNotFound: the tenant has no session of that id.
        """
        if not self.store.delete(tenant, session_id):
            raise SessionNotFound(f"no session {session_id!r}", session=session_id)

    async def settled(self, tenant: str, session_id: str, result_of: ResultOf) -> SessionInfo:
        """The session, with every turn whose job has ended since recorded as it ended."""
        session = self.store.get(tenant, session_id)
        changed = False
        for turn in session.turns:
            if turn.status != "running":
                continue
            try:
                result = await result_of(turn.job_id)
            except JobNotFound:  # forgotten by a shard without a journal
                result, status = None, "failed"
            else:
                status = "running" if result is None else result.status
            if status == "running":
                continue
            answer = result.answer if result is not None and status == "succeeded" else None
            self.store.settle(tenant, session_id, turn.seq, status, answer)
            changed = True
        return self.store.get(tenant, session_id) if changed else session

    async def history(self, tenant: str, session_id: str, result_of: ResultOf, ask: Ask) -> History:
        """What the session's next job is shown, summarizing what no longer fits.

        Only succeeded turns are shown. The newest turns are kept whole while they fit in
        the budget (the summary's tokens counted first); older ones not yet summarized are
        folded into the summary. When the summary cannot be made, they are left out, and
        the summary says how many were.

        Raises:
            SessionNotFound: the tenant has no session of that id.
        """
        session = await self.settled(tenant, session_id, result_of)
        answered = [
            t
            for t in session.turns
            if t.status == "succeeded" and t.seq > session.summarized_through
        ]
        budget = session.history_tokens
        room = budget - count_tokens(session.summary) - 32
        shown: list[SessionTurn] = []
        for turn in reversed(answered):
            cost = _turn_tokens(turn)
            if cost > room:
                break
            shown.insert(0, turn)
            room -= cost
        cut = answered[: len(answered) - len(shown)]
        if not cut:
            return _history(session.summary, shown)
        # summarize down to half the budget: the next turns then fit without a summary each
        while shown and room < budget // 2:
            room += _turn_tokens(shown[0])
            cut.append(shown.pop(0))
        summary = await self._summarize(tenant, session.summary, cut, ask, budget // 2)
        self.store.summarized(tenant, session_id, summary, cut[-1].seq)
        log.info("session_summarized", session=session_id, turns=len(cut), through=cut[-1].seq)
        return _history(summary, shown)

    async def _summarize(
        self, tenant: str, earlier: str, turns: Sequence[SessionTurn], ask: Ask, limit: int
    ) -> str:
        """The summary with ``turns`` added, within ``limit`` tokens.

        The new turns are summarized on their own and added to the earlier summary, which is
        not summarized again until the two together outgrow the limit: a fact survives
        many cuts instead of fading a little in each.
        """
        lines = []
        for turn in turns:
            lines += [f"user: {_cut(turn.task)}", f"assistant: {_cut(turn.answer or '')}"]
        added = await self._ask_summary(tenant, lines, ask) or (
            f"({len(turns)} earlier turn(s) left out.)"
        )
        combined = f"{earlier} {added}".strip()
        if count_tokens(combined) <= limit:
            return combined
        folded = await self._ask_summary(tenant, [f"summary: {earlier}", f"summary: {added}"], ask)
        if folded and count_tokens(folded) <= limit:
            return folded
        return _cut(added, limit)  # the newest facts, rather than none

    async def _ask_summary(self, tenant: str, lines: Sequence[str], ask: Ask) -> str:
        """The pool's summary of ``lines`` ('' when it could not make one)."""
        request = LLMRequest(
            model=self._model,
            purpose="summarize",
            messages=(
                ChatMessage(role="system", content="Summarize this conversation in a few "
                            "sentences; keep every fact, name and number the user gave."),
                ChatMessage(role="user", content="\n".join(lines)),
            ),
        )  # fmt: skip
        try:
            return " ".join((await ask(request)).text.split())
        except TroupeError as exc:
            log.warning("session_summary_failed", tenant=tenant, code=exc.code.value)
            return ""


def new_session_id() -> str:
    """A fresh session id."""
    return "s-" + secrets.token_hex(8)
