"""What the CLI prints: tables, the live view of a job, results and errors (rich)."""

from __future__ import annotations

import functools
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, ParamSpec, Protocol

import typer
from rich.console import Console, Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

if TYPE_CHECKING:  # pydantic's models: imported by the commands that print them, not by --help
    from pydantic import BaseModel

    from raytroupe.protocols import AgentInfo, JobEvent, JobResult

__all__ = [
    "ERR",
    "OUT",
    "Followed",
    "JobBoard",
    "agents_table",
    "error",
    "follow",
    "plain_row",
    "reported",
    "result_json",
    "show_failures",
    "show_key",
    "show_result",
    "show_yaml",
    "status_text",
    "usage",
]

# soft_wrap: a path, id or URL is never broken by a newline (the terminal wraps it for show;
# a copy, a pipe or a narrow CI log keeps it whole). Tables still fit the width.
OUT: Final = Console(highlight=False, soft_wrap=True)
ERR: Final = Console(stderr=True, highlight=False, soft_wrap=True)

_STYLES: Final = {
    "pending": "dim",
    "planning": "cyan",
    "running": "yellow",
    "awaiting_approval": "magenta",
    "awaiting_input": "magenta",
    "aggregating": "cyan",
    "succeeded": "green",
    "failed": "red",
    "skipped": "dim",
    "cancelled": "red",
}


def error(message: str) -> None:
    """One red line on stderr."""
    ERR.print(Text(f"error: {message}", style="bold red"), soft_wrap=True)


P = ParamSpec("P")


def reported(func: Callable[P, None]) -> Callable[P, None]:
    """Print a raytroupe error as one red line and exit 1, instead of a traceback."""

    @functools.wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> None:
        try:
            func(*args, **kwargs)
        except Exception as exc:
            if "raytroupe.protocols.errors" not in sys.modules:  # then it is none of ours
                raise
            from raytroupe.protocols import TroupeError

            if not isinstance(exc, TroupeError):
                raise
            error(exc.message)
            raise typer.Exit(1) from None

    return wrapper


def usage(message: str) -> typer.Exit:
    """Print ``message`` as an error; the exit (status 2: a usage error) to raise."""
    error(message)
    return typer.Exit(2)


def show_yaml(model: BaseModel) -> None:
    """``model`` as YAML, its defaults left out: the file a command takes back."""
    import yaml

    document = model.model_dump(mode="json", exclude_defaults=True)
    said = yaml.safe_dump(document, sort_keys=False, allow_unicode=True) if document else "{}\n"
    typer.echo(said, nl=False)


def plain_row(table: Table, *cells: str | Text) -> None:
    """Add a row to ``table``, its text shown as it is, never read as rich markup.

    A task, an answer or a name may hold ``[...]``: rich would style it, or refuse it (a
    traceback) when a closing tag matches nothing.
    """
    table.add_row(*(cell if isinstance(cell, Text) else Text(cell) for cell in cells))


def status_text(status: str) -> Text:
    """A job's or subtask's status, coloured by what it means."""
    return Text(status, style=_STYLES.get(status, ""))


@dataclass
class _Row:
    role: str = ""
    agent: str = ""
    status: str = "pending"
    attempt: int = 1
    started: float | None = None
    finished: float | None = None

    def seconds(self, now: float) -> str:
        if self.started is None:
            return ""
        return f"{(self.finished or now) - self.started:.1f}"


class JobBoard:
    """The live view of one job: its subtasks as its events report them.

    :meth:`apply` runs in the thread reading events and :meth:`render` in rich's refresh
    thread, hence the lock.
    """

    def __init__(self, job_id: str, team: str) -> None:
        self.job_id = job_id
        self.team = team
        self.phase = "planning"
        self._rows: dict[str, _Row] = {}
        self._lock = threading.Lock()

    def apply(self, event: JobEvent) -> None:
        """Take one event into account (events of other types change nothing)."""
        data = event.data
        with self._lock:
            match event.type:
                case "job_routed":
                    self.team = str(data.get("target", self.team))
                case "plan_ready":
                    self.phase = "running"
                    subtasks = data.get("subtasks")
                    for sub in subtasks if isinstance(subtasks, list) else []:
                        if isinstance(sub, dict) and "id" in sub:
                            row = self._rows.setdefault(str(sub["id"]), _Row())
                            row.role = str(sub.get("role", ""))
                case "subtask_started" if event.subtask_id:
                    self.phase = "running"
                    row = self._rows.setdefault(event.subtask_id, _Row())
                    row.role = str(data.get("role", row.role))
                    attempt = data.get("attempt", row.attempt)
                    row.attempt = attempt if isinstance(attempt, int) else row.attempt
                    row.status, row.started, row.finished = "running", event.at, None
                case "subtask_finished" if event.subtask_id:
                    row = self._rows.setdefault(event.subtask_id, _Row())
                    row.status = str(data.get("status", "finished"))
                    row.agent = str(data.get("agent") or row.agent)
                    row.finished = event.at if row.started is not None else None
                case "approval_requested":
                    self.phase = "awaiting_approval"
                case "approval_decided" | "graph_resumed":
                    self.phase = "running"
                case "graph_interrupted":
                    self.phase = "awaiting_input"
                case "job_aggregating":
                    self.phase = "aggregating"
                case "job_succeeded" | "job_failed" | "job_cancelled":
                    self.phase = event.type.removeprefix("job_")
                case _:
                    pass

    def render(self, now: float) -> Group:
        """A title line and the subtasks, seconds counted to ``now`` for those running."""
        title = Text.assemble(
            f"job {self.job_id} · {self.team} · ", status_text(self.phase.replace("_", " "))
        )
        if not self._rows:  # a direct skill's job: one model call, no subtask
            return Group(title)
        table = Table(expand=False)
        table.add_column("subtask")
        table.add_column("role")
        table.add_column("agent")
        table.add_column("status")
        table.add_column("s", justify="right")
        with self._lock:
            for sid, row in self._rows.items():
                status = status_text(row.status)
                if row.attempt > 1:
                    status.append(f" (attempt {row.attempt})", style="dim")
                plain_row(table, sid, row.role, row.agent, status, row.seconds(now))
        return Group(title, table)


def show_result(result: JobResult) -> None:
    """The answer, then one line of status, time and usage."""
    OUT.rule("answer", align="left")
    OUT.print(result.answer, markup=False, soft_wrap=True)
    OUT.rule()
    usage = result.usage
    summary = Text.assemble(
        status_text(result.status),
        f" in {result.timings.total_s:.2f} s · {len(result.subtasks)} subtask(s) · "
        f"{usage.total_tokens} tokens in {usage.calls} model call(s)",
    )
    if usage.cost_usd:
        summary.append(f" · ${usage.cost_usd:.4f}")
    OUT.print(summary)
    out, route = result.output, result.route
    if route is not None:
        OUT.print(f"routed to {route.kind} {route.target} by {route.method}: {route.rationale}",
                  markup=False, soft_wrap=True)  # fmt: skip
    if out is not None and out.quality is not None:
        verdict = "passed" if out.quality.passed else "failed"
        retries = f" after {out.quality.retries} retries" if out.quality.retries else ""
        OUT.print(f"quality gate {verdict}{retries}, score {out.quality.score:.2f}", markup=False)


def show_failures(result: JobResult) -> None:
    """Each subtask that did not succeed, with its typed error, on stderr."""
    for sub in result.subtasks:
        if sub.status != "succeeded":
            reason = f"{sub.error.code.value}: {sub.error.message}" if sub.error else sub.status
            ERR.print(Text(f"  {sub.id} [{sub.role}] {reason}", style="red"), soft_wrap=True)


def agents_table(agents: Iterable[AgentInfo], unregistered: Mapping[str, tuple[str, int]]) -> Table:
    """Agents of registered teams, then running agents of teams submitted with their job.

    ``unregistered`` maps such an agent's name to its team-scoped router role(s) and the
    envelopes it is handling.
    """
    table = Table(title_justify="left")
    for column in ("agent", "team", "role", "model", "tools"):
        table.add_column(column)
    table.add_column("in flight", justify="right")
    count = 0
    for info in agents:
        count += 1
        tools = ", ".join(info.tools)
        plain_row(table, info.name, info.team, info.role, info.model, tools, str(info.in_flight))
    for name, (roles, in_flight) in sorted(unregistered.items()):
        count += 1
        agent, team, role = _inline(name, roles)
        plain_row(table, agent, Text(team, style="dim"), role, "", "", str(in_flight))
    table.title = f"{count} agent(s)"
    return table


def _inline(name: str, roles: str) -> tuple[str, str, str]:
    """An inline team's agent as its team wrote it: ``(agent, "team (scope)", role)``.

    Its actor is named in its tenant's scope (``default-37a8ee.ada``), and so is its router
    role (``default-37a8ee.research.researcher``): shown as ``ada``, ``research
    (default-37a8ee)``, ``researcher``. A name in no scope is shown as it is.
    """
    scope, dot, agent = name.partition(".")
    prefix = f"{scope}."
    if not dot or not roles or not all(r.startswith(prefix) for r in roles.split(", ")):
        return name, "(not registered)", roles
    team_roles = [r.removeprefix(prefix).rpartition(".") for r in roles.split(", ")]
    teams = sorted({team for team, _, _ in team_roles})
    shown = ", ".join(role for _, _, role in team_roles)
    return agent, f"{', '.join(teams)} ({scope})", shown


def show_key(key: str, tenant: str, *, admin: bool, url: str | None = None) -> None:
    """A new API key, shown once, with how to send it (lines left unwrapped for copying)."""
    note = f"tenant {tenant}{', admin' if admin else ''}\nshown only this once, stored nowhere"
    body = Text.assemble((key, "bold green"), "\n", (note, "dim"))
    OUT.print(Panel(body, title="new API key", border_style="green", expand=False))
    target = f"{url.rstrip('/')}/healthz" if url else "<url>/healthz"
    OUT.print(f"send it as:  Authorization: Bearer {key}", soft_wrap=True, markup=False)
    OUT.print(
        f"e.g.:        curl -H 'Authorization: Bearer {key}' {target}",
        soft_wrap=True,
        markup=False,
    )


class Followed(Protocol):
    """A job as the CLI follows it: the driver's ``JobHandle``, or one reached over HTTP."""

    job_id: str

    def events(self, timeout: float | None = None) -> Iterator[JobEvent]:
        """Its events from the first, until its last."""
        ...

    def result(self, timeout: float | None = 60.0) -> JobResult:
        """Its result once it has ended; raises ``JobFailed`` if it failed."""
        ...

    def cancel(self) -> bool:
        """Cancel it; False if it had ended."""
        ...


def follow(handle: Followed, team: str, timeout: float) -> JobResult:
    """Show the job's subtasks live until it ends; its result.

    Raises:
        JobFailed: it failed or was cancelled (its failed subtasks are shown first).
        JobTimeout: it did not end within ``timeout`` seconds.
    """
    from rich.live import Live

    from raytroupe.protocols import JobFailed, JobResult

    board = JobBoard(handle.job_id, team)
    deadline = time.monotonic() + timeout
    with Live(console=OUT, get_renderable=lambda: board.render(time.time()), refresh_per_second=4):
        for event in handle.events(timeout=timeout):
            board.apply(event)
    OUT.print()
    try:
        return handle.result(timeout=max(1.0, deadline - time.monotonic()))
    except JobFailed as exc:
        result = exc.detail.get("result")
        if isinstance(result, JobResult):
            show_failures(result)
        raise


def result_json(handle: Followed, timeout: float) -> JobResult:
    """Wait for the job's result; print a failed one's as JSON before raising ``JobFailed``."""
    from raytroupe.protocols import JobFailed, JobResult

    try:
        return handle.result(timeout=timeout)
    except JobFailed as exc:
        result = exc.detail.get("result")
        if isinstance(result, JobResult):
            typer.echo(result.model_dump_json(indent=2))
        raise
