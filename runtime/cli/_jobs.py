"""``troupe run|result|events|cancel|feedback|jobs|agents|usage|dead-letters``.

Each command acts on a deployment over HTTP when one is named (``--url``, ``--profile``), else
on the Ray of this machine through the driver API (see :mod:`raytroupe.runtime.cli._remote`).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Final, cast

import typer
from rich.table import Table
from rich.text import Text

from raytroupe.runtime.cli._connect import close, connect, resolve_address
from raytroupe.runtime.cli._options import Address, StateDir, state_dir_of
from raytroupe.runtime.cli._remote import no_tenant, remote, tenant_transport, transport
from raytroupe.runtime.cli._show import (
    ERR,
    OUT,
    Followed,
    error,
    follow,
    plain_row,
    result_json,
    show_failures,
    show_result,
    usage,
)

if TYPE_CHECKING:
    from raytroupe.protocols import JobEvent, JobResult, JobSummary
    from raytroupe.protocols.http import DeadLetterView
    from raytroupe.runtime.config import Team
    from raytroupe.runtime.driver import Runtime
    from raytroupe.runtime.http_client import Client
    from raytroupe.runtime.operations.job_reads import JobsShown
    from raytroupe.runtime.tenant import TenantView

__all__ = [
    "Detach",
    "RemoteJob",
    "agents",
    "cancel",
    "connect_for_job",
    "dead_letters",
    "event_line",
    "events",
    "jobs",
    "result",
    "run",
    "watch",
]

_TASK_CHARS: Final = 60

JobId = Annotated[str, typer.Argument(help="The job's id.")]
Timeout = Annotated[float, typer.Option(help="Seconds to wait for the job.", min=0.1)]
AsJson = Annotated[bool, typer.Option("--json", help="Print the JobResult as JSON.")]
Detach = Annotated[
    bool, typer.Option("--detach", help="Print the job's id and leave it running (no wait).")
]
Tenant = Annotated[
    str | None,
    typer.Option(help="Reach the job as this tenant (local Ray only; over HTTP the key decides).",
                 show_default=False),
]  # fmt: skip
User = Annotated[
    str | None,
    typer.Option(help="The tenant's end user the jobs are for.", show_default=False),
]


class RemoteJob:
    """A job of a deployment, followed over HTTP as the CLI follows a driver's ``JobHandle``."""

    def __init__(self, client: Client, job_id: str) -> None:
        self.job_id = job_id
        self._client = client

    def events(self, timeout: float | None = None) -> Iterator[JobEvent]:
        """Its events from the first until its last (``JobTimeout`` past ``timeout`` seconds)."""
        return self._client.events(self.job_id, timeout=timeout)

    def result(self, timeout: float | None = 60.0) -> JobResult:
        """Its result once it has ended (``JobFailed``, ``JobCancelled``, ``JobTimeout``)."""
        return self._client.result(self.job_id, timeout=timeout)

    def cancel(self) -> bool:
        """Cancel it; False if it had ended."""
        from raytroupe.protocols import Conflict

        try:
            self._client.cancel(self.job_id)
        except Conflict:
            return False
        return True


def followed(api: Client | Runtime | TenantView, job_id: str) -> Followed:
    """The job on a command's transport: followed over HTTP, or a driver's handle on it.

    Raises:
        JobNotFound: no such job (of the caller's).
    """
    from raytroupe.runtime.http_client import Client

    if isinstance(api, Client):
        return RemoteJob(api, job_id)
    return api.job(job_id)


def _team(team: str) -> Team | str:
    """A team file (by path) or the name of a team registered at run time."""
    from raytroupe.protocols import ConfigError
    from raytroupe.runtime.config import Team

    path = Path(team)
    if path.suffix not in {".yaml", ".yml"} and os.sep not in team and not path.exists():
        return team
    if not path.is_file():
        raise usage(f"team file {team!r} does not exist")
    try:
        return Team.from_yaml(path)
    except ConfigError as exc:
        raise usage(exc.message) from None


def watch(job: Followed, label: str, timeout: float, *, as_json: bool, detach: bool) -> None:
    """Follow ``job`` live (or wait, for ``--json``) and show its result; Ctrl-C cancels it.

    Detached, print its id alone on stdout (for scripts: ``JOB=$(troupe run ... --detach)``).
    """
    if detach:
        typer.echo(job.job_id)
        ERR.print(f"{label}: job submitted; `troupe events {job.job_id} -f` follows it",
                  markup=False, style="dim", soft_wrap=True)  # fmt: skip
        return
    try:
        if as_json:
            typer.echo(result_json(job, timeout).model_dump_json(indent=2))
        else:
            show_result(follow(job, label, timeout))
    except KeyboardInterrupt:
        job.cancel()
        error(f"interrupted: job {job.job_id} cancelled")
        raise typer.Exit(130) from None


def run(
    team: Annotated[str, typer.Argument(help="A team file (YAML), or a registered team's name.")],
    task: Annotated[str, typer.Argument(help="What the team should do.")],
    *,
    address: Address = None,
    timeout: Timeout = 300.0,
    as_json: AsJson = False,
    detach: Detach = False,
    tenant: Annotated[
        str | None,
        typer.Option(
            help="Tenant the job runs for (local Ray; default: default).", show_default=False
        ),
    ] = None,
    session: Annotated[
        str | None,
        typer.Option(help="A session (`troupe sessions new`): the job sees its turns so far."),
    ] = None,
    user: User = None,
    state_dir: StateDir = None,
) -> None:
    """Run a job and show its subtasks live, then its answer (exit 1 if it fails)."""
    spec = _team(team)
    label = f"team {spec if isinstance(spec, str) else spec.name}"
    client = remote(address)
    if client is not None:
        no_tenant(tenant)
        with client:
            accepted = client.submit(task, team=spec, session=session, user=user)
            job = RemoteJob(client, accepted.id)
            watch(job, label, timeout, as_json=as_json, detach=detach)
        return
    rt = connect_for_job(address, state_dir, detach=detach)
    try:
        handle = rt.submit(task, team=spec, tenant=tenant or "default", session=session, user=user)
        watch(handle, label, timeout, as_json=as_json, detach=detach)
    finally:
        close(rt)


def connect_for_job(address: str | None, state_dir: Path | None, *, detach: bool) -> Runtime:
    """The Ray a job runs on: one that is up, else one started for this command only.

    A detached job needs a Ray that outlives the command.
    """
    where = resolve_address(address, state_dir_of(state_dir))
    if where is None and detach:
        raise usage("--detach needs a Ray that outlives this command: `troupe up`, --address, "
                    "or a deployment (--url)")  # fmt: skip
    return connect(where, start_local=True)


def result(
    job_id: JobId,
    *,
    as_json: AsJson = False,
    wait: Annotated[
        bool, typer.Option("--wait/--no-wait", help="Wait for a running job to end.")
    ] = True,
    timeout: Timeout = 300.0,
    tenant: Tenant = None,
    address: Address = None,
    state_dir: StateDir = None,
) -> None:
    """A job's result: its answer and figures (exit 1 if it failed or has none yet)."""
    from raytroupe.runtime.operations import invoke, job_reads

    with tenant_transport(tenant, address, state_dir, default=None) as api:
        if not wait:
            view = invoke(api, job_reads.job, job_id)
            if view.result is None:
                raise _unfinished(job_id, view.status)
        _show_outcome(followed(api, job_id), timeout if wait else 1.0, as_json=as_json)


def _unfinished(job_id: str, status: str) -> typer.Exit:
    error(f"job {job_id} has no result yet: it is {status} (wait for it: drop --no-wait)")
    return typer.Exit(1)


def _show_outcome(job: Followed, timeout: float, *, as_json: bool) -> None:
    """The job's result as JSON or for people; a failed job's subtasks, then ``JobFailed``."""
    from raytroupe.protocols import JobFailed, JobResult

    if as_json:
        typer.echo(result_json(job, timeout).model_dump_json(indent=2))
        return
    try:
        show_result(job.result(timeout=timeout))
    except JobFailed as exc:
        failed = exc.detail.get("result")
        if isinstance(failed, JobResult):
            show_failures(failed)
        raise


def event_line(event: JobEvent) -> Text:
    """One event as a line: its number, time, type, subtask and data (compact JSON)."""
    at = time.strftime("%H:%M:%S", time.localtime(event.at))
    data = json.dumps(event.data, separators=(",", ":"), default=str) if event.data else ""
    style = "green" if event.type == "job_succeeded" else "red" if event.terminal else ""
    return Text.assemble(
        (f"{event.seq:>4} {at} ", "dim"),
        (event.type, style or "bold"),
        f" [{event.subtask_id}]" if event.subtask_id else "",
        f" {data}" if data else "",
    )


def events(
    job_id: JobId,
    *,
    follow_job: Annotated[
        bool,
        typer.Option(
            "--follow/--no-follow",
            "-f",
            help="Keep printing events until the job's last (Ctrl-C stops).",
        ),
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per line.")] = False,
    tenant: Tenant = None,
    address: Address = None,
    state_dir: StateDir = None,
) -> None:
    """A job's events, in order: those so far, or (--follow) each as it happens."""
    try:
        with tenant_transport(tenant, address, state_dir, default=None) as api:
            _print_events(api.events(job_id, follow=follow_job), as_json=as_json)
    except KeyboardInterrupt:  # stops reading; the job goes on
        ERR.print(f"stopped following job {job_id} (it goes on)", style="dim")
        raise typer.Exit(130) from None


def _print_events(stream: Iterable[JobEvent], *, as_json: bool) -> None:
    for event in stream:
        if as_json:
            typer.echo(event.model_dump_json())
        else:
            OUT.print(event_line(event), soft_wrap=True, markup=False)


def cancel(
    job_id: JobId,
    *,
    tenant: Tenant = None,
    address: Address = None,
    state_dir: StateDir = None,
) -> None:
    """Cancel a job: its running subtasks stop at their agents (exit 1 if it had ended)."""
    with tenant_transport(tenant, address, state_dir, default=None) as api:
        cancelled = api.cancel(job_id)
    OUT.print(f"job {job_id} cancelled ({cancelled.status})", markup=False)


def feedback(
    job_id: JobId,
    score: Annotated[
        float | None,
        typer.Argument(
            help="0 (useless) to 1 (exactly right); none: show the job's.", min=0, max=1
        ),
    ] = None,
    *,
    comment: Annotated[str, typer.Option(help="Why (kept with the verdict).")] = "",
    tenant: Tenant = None,
    address: Address = None,
    state_dir: StateDir = None,
) -> None:
    """Give a finished job's answer a score (exit 1 while it runs), or show the scores it has."""
    with tenant_transport(tenant, address, state_dir, default=None) as api:
        given = [api.feedback(job_id, score, comment)] if score is not None else []
        verdicts = given or api.feedbacks(job_id)
    table = Table("score", "by", "at", "comment")
    for verdict in verdicts:
        plain_row(table, f"{verdict.score:g}", verdict.by, _when(verdict.at), verdict.comment)
    OUT.print(table)


def jobs(
    *,
    status: Annotated[
        str | None, typer.Option(help="Only jobs in this status ('live': unfinished ones).")
    ] = None,
    search: Annotated[
        str | None,
        typer.Option(
            "--search",
            "-q",
            help="Text of the id, task, team, skill or submitter.",
            show_default=False,
        ),
    ] = None,
    limit: Annotated[
        int, typer.Option(help="At most this many, the newest.", min=1, max=1000)
    ] = 50,
    tenant: Annotated[
        str | None, typer.Option(help="Only this tenant's jobs (local Ray).", show_default=False)
    ] = None,
    user: User = None,
    address: Address = None,
    state_dir: StateDir = None,
) -> None:
    """List jobs, newest first: status, team or skill, who, when, cost."""
    with tenant_transport(tenant, address, state_dir, default=None) as api:
        shown = cast("JobsShown | None", status)
        found = api.summaries(shown, search, limit=limit, user=user).jobs
    OUT.print(summaries_table(found))


def _when(at: float | None) -> str:
    return "" if at is None else time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(at))


def summaries_table(summaries: Iterable[JobSummary]) -> Table:
    """A deployment's jobs list: id, status, what ran, task, when, tokens and cost."""
    from raytroupe.runtime.cli._show import status_text

    table = Table(title_justify="left")
    table.add_column("job", overflow="fold")  # an id to copy: folded, never cut
    for column in ("status", "team / skill", "task", "submitted"):
        table.add_column(column)
    table.add_column("tokens", justify="right")
    table.add_column("$", justify="right")
    count = 0
    for job in summaries:
        count += 1
        task = job.task if len(job.task) <= _TASK_CHARS else job.task[:_TASK_CHARS] + "..."
        plain_row(
            table,
            job.id,
            status_text(job.status),
            job.skill or job.team,
            task,
            _when(job.submitted_at),
            "" if job.tokens is None else str(job.tokens),
            "" if job.cost_usd is None else f"{job.cost_usd:.4f}",
        )
    table.title = f"{count} job(s)"
    return table


def agents(*, address: Address = None, state_dir: StateDir = None) -> None:
    """List agents: those of registered teams, and others running (from teams given inline)."""
    from raytroupe.runtime.cli._show import agents_table
    from raytroupe.runtime.http_client import Client  # not the driver: it would load Ray

    with transport(address, state_dir) as api:
        infos = api.agents()
        running: dict[str, tuple[str, int]] = {}
        if not isinstance(api, Client):  # on Ray: agents of inline teams too, from the router
            known = {info.name for info in infos}
            stats = api.router_stats()
            # an agent's router roles are scoped by its team ("research.researcher"); the
            # system actors' are not ("tools") or absent
            running = {
                name: (", ".join(roles), stats.in_flight.get(name, 0))
                for name, roles in stats.registered.items()
                if name not in known and any("." in role for role in roles)
            }
    OUT.print(agents_table(infos, running))


def dead_letters(
    *,
    limit: Annotated[int, typer.Option(help="The newest this many.", min=1, max=1000)] = 100,
    address: Address = None,
    state_dir: StateDir = None,
) -> None:
    """Envelopes the router could not deliver, and why, newest first (admins; no payloads)."""
    with transport(address, state_dir) as api:
        OUT.print(dead_letters_table(api.dead_letters(limit)))


def dead_letters_table(letters: Iterable[DeadLetterView]) -> Table:
    """When, why, from whom to whom, for which job and tenant."""
    table = Table("at", "reason", "sender", "recipient", "job", "tenant", "detail",
                  title_justify="left")  # fmt: skip
    count = 0
    for letter in letters:
        count += 1
        plain_row(table, _when(letter.at), letter.reason.value, letter.sender or "",
                      letter.recipient or "", letter.job_id or "", letter.tenant or "",
                      letter.detail)  # fmt: skip
    table.title = f"{count} dead letter(s)"
    return table
