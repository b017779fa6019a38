"""A session as the driver holds it: a conversation whose jobs see the turns before them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from raytroupe.protocols.sessions import SessionInfo, SessionTurn
from raytroupe.runtime.blocking import Portal
from raytroupe.runtime.client import SystemClient
from raytroupe.runtime.handle import JobHandle

__all__ = ["Session"]


class Session:
    """One conversation of a tenant (see :meth:`Runtime.session`).

    Each job submitted through it is shown the session's history before its task (the
    oldest turns summarized once they outgrow the history's budget), and its answer joins
    the history once it succeeds. The session is kept by the orchestrator (in its journal's
    database): it outlives this driver, and any driver, the CLI or the HTTP API can go on
    with it by its id.
    """

    def __init__(
        self,
        info: SessionInfo,
        client: SystemClient,
        portal: Portal,
        submit: Callable[..., JobHandle],
    ) -> None:
        self.id = info.id
        self.tenant = info.tenant
        self._client = client
        self._portal = portal
        self._submit = submit

    def __repr__(self) -> str:
        return f"Session({self.id!r}, tenant={self.tenant!r})"

    def submit(self, task: str, team: Any = None, **options: Any) -> JobHandle:
        """Start the session's next job (the options of :meth:`Runtime.submit`)."""
        return self._submit(task, team, session=self.id, **options)

    def ask(
        self, task: str, team: Any = None, *, timeout: float | None = 60.0, **options: Any
    ) -> str:
        """Submit the next job and wait for its answer.

        Raises:
            JobFailed: the job ended without an answer.
            JobTimeout: it did not end within ``timeout`` seconds.
        """
        return self.submit(task, team, **options).result(timeout).answer

    def info(self) -> SessionInfo:
        """The session with its turns, each as its job ended."""
        return self._portal.run(self._client.session(self.id, tenant=self.tenant))

    def turns(self) -> tuple[SessionTurn, ...]:
        """The session's jobs, oldest first."""
        return self.info().turns

    def delete(self) -> None:
        """Forget the session (its jobs stay)."""
        self._portal.run(self._client.delete_session(self.id, tenant=self.tenant))
