"""``troupe kb ...`` and ``troupe sessions ...``: knowledge bases and conversations."""

from __future__ import annotations

import time
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from raytroupe.runtime.cli._options import Address, StateDir
from raytroupe.runtime.cli._remote import tenant_transport
from raytroupe.runtime.cli._show import OUT, plain_row

if TYPE_CHECKING:
    from raytroupe.protocols.knowledge import IngestedDocument, Passages
    from raytroupe.protocols.sessions import SessionInfo

__all__ = ["kb_app", "sessions_app"]

kb_app = typer.Typer(help="Knowledge bases: add files, search, list, remove.", no_args_is_help=True)
sessions_app = typer.Typer(
    help="Sessions (conversations): new, list, show, delete.", no_args_is_help=True
)
SHOWN_CHARS = 300
"""Characters of a passage or an answer a table shows."""

KnowledgeBase = Annotated[str, typer.Argument(help="The knowledge base's name.")]
Tenant = Annotated[str, typer.Option(help="Whose knowledge base or session.")]
User = Annotated[
    str | None, typer.Option(help="The tenant's end user it is for.", show_default=False)
]


@kb_app.command("add")
def add(
    kb: KnowledgeBase,
    files: Annotated[
        list[Path], typer.Argument(help="Files (.txt .md .html .pdf .json) or directories.")
    ],
    *,
    user: User = None,
    tenant: Tenant = "default",
    address: Address = None,
    state_dir: StateDir = None,
) -> None:
    """Chunk, embed and store files (a file ingested before is replaced, or skipped if same)."""
    from raytroupe.protocols.http import MAX_DOCUMENTS
    from raytroupe.runtime.knowledge import documents_from

    documents = documents_from(files)  # every file read (and refused) before any is sent
    with tenant_transport(tenant, address, state_dir, default="default") as api:
        done: list[IngestedDocument] = []
        for start in range(0, len(documents), MAX_DOCUMENTS):
            batch = documents[start : start + MAX_DOCUMENTS]
            done.extend(api.ingest(kb, batch, user=user).documents)
    OUT.print(_ingested(done))


def _ingested(documents: Iterable[IngestedDocument]) -> Table:
    table = Table("source", "passages", "what happened")
    for doc in documents:
        what = "unchanged" if doc.unchanged else "replaced" if doc.replaced else "added"
        plain_row(table, doc.source, str(doc.chunks), what)
    return table


@kb_app.command("search")
def search(
    kb: KnowledgeBase,
    query: Annotated[str, typer.Argument(help="What to look for.")],
    k: Annotated[int, typer.Option(help="How many passages.", min=1, max=50)] = 5,
    *,
    tenant: Tenant = "default",
    address: Address = None,
    state_dir: StateDir = None,
) -> None:
    """The passages closest to a query, with their source and position."""
    with tenant_transport(tenant, address, state_dir, default="default") as api:
        found = api.search(kb, query, k=k)
    OUT.print(_passages(found))


def _passages(found: Passages) -> Table:
    table = Table("cite", "score", "section", "passage")
    for p in found.passages:
        text = " ".join(p.text.split())
        cut = text[:SHOWN_CHARS] + ("..." if len(text) > SHOWN_CHARS else "")
        plain_row(table, f"{p.source}#{p.position}", f"{p.score:.3f}", p.section, cut)
    return table


@kb_app.command("list")
def list_knowledge(
    kb: Annotated[str | None, typer.Argument(help="A knowledge base: its documents.")] = None,
    *,
    user: User = None,
    tenant: Tenant = "default",
    address: Address = None,
    state_dir: StateDir = None,
) -> None:
    """The tenant's knowledge bases, or the documents of one."""
    with tenant_transport(tenant, address, state_dir, default="default") as api:
        if kb is None:
            table = Table("knowledge base", "user", "passages", "created")
            for info in api.knowledge_bases(user=user):
                plain_row(table, info.name, info.user or "", str(info.chunks),
                          _when(info.created_at))  # fmt: skip
        else:
            table = Table("source", "type", "passages", "ingested")
            for doc in api.documents(kb):
                plain_row(
                    table, doc.source, doc.media_type, str(doc.chunks), _when(doc.ingested_at)
                )
    OUT.print(table)


@kb_app.command("rm")
def remove(
    kb: KnowledgeBase,
    sources: Annotated[
        list[str] | None, typer.Argument(help="Documents to remove (none: the whole base).")
    ] = None,
    *,
    tenant: Tenant = "default",
    address: Address = None,
    state_dir: StateDir = None,
) -> None:
    """Remove documents from a knowledge base, or the knowledge base itself."""
    with tenant_transport(tenant, address, state_dir, default="default") as api:
        if not sources:
            api.drop_knowledge_base(kb)
            OUT.print(f"removed knowledge base {kb}", markup=False)
        for source in sources or ():
            removed = api.delete_document(kb, source)
            OUT.print(f"removed {source} ({removed} passages)", markup=False)


@sessions_app.command("new")
def new_session(
    session_id: Annotated[
        str | None,
        typer.Argument(help="Its id (default: a fresh one; an id the tenant has: go on)."),
    ] = None,
    *,
    title: Annotated[str, typer.Option(help="What it is about.")] = "",
    user: Annotated[
        str | None,
        typer.Option(help="The tenant's end user it is for (their jobs only).", show_default=False),
    ] = None,
    tenant: Tenant = "default",
    address: Address = None,
    state_dir: StateDir = None,
) -> None:
    """Start a session; prints its id (a job joins it with `troupe run TEAM TASK --session ID`)."""
    with tenant_transport(tenant, address, state_dir, default="default") as api:
        info = api.create_session(session_id, title=title, user=user)
    OUT.print(info.id, markup=False)


@sessions_app.command("list")
def list_sessions(
    *,
    user: Annotated[
        str | None, typer.Option(help="One end user's sessions only.", show_default=False)
    ] = None,
    tenant: Tenant = "default",
    address: Address = None,
    state_dir: StateDir = None,
) -> None:
    """The tenant's sessions, the most recently used first."""
    with tenant_transport(tenant, address, state_dir, default="default") as api:
        found = api.sessions(user=user)
    table = Table("session", "title", "user", "created", "last used")
    for info in found:
        plain_row(table, info.id, info.title, info.user or "", _when(info.created_at),
                  _when(info.updated_at))  # fmt: skip
    OUT.print(table)


@sessions_app.command("show")
def show_session(
    session_id: Annotated[str, typer.Argument(help="The session's id.")],
    *,
    tenant: Tenant = "default",
    address: Address = None,
    state_dir: StateDir = None,
) -> None:
    """A session's turns: each job's task, status and answer."""
    from raytroupe.runtime.operations import invoke
    from raytroupe.runtime.operations import sessions as session_ops

    with tenant_transport(tenant, address, state_dir, default="default") as api:
        info = invoke(api, session_ops.session, session_id)
    _show_session(info)


def _show_session(info: SessionInfo) -> None:
    from rich.text import Text

    if info.summary:
        OUT.print(Text.assemble((f"summary of turns 1-{info.summarized_through}: ", "dim"),
                                info.summary))  # fmt: skip
    table = Table("turn", "job", "status", "task", "answer")
    for turn in info.turns:
        plain_row(table, str(turn.seq), turn.job_id, turn.status, turn.task[:200],
                      (turn.answer or "")[:SHOWN_CHARS])  # fmt: skip
    OUT.print(table)


@sessions_app.command("delete")
def delete_session(
    session_id: Annotated[str, typer.Argument(help="The session's id.")],
    *,
    tenant: Tenant = "default",
    address: Address = None,
    state_dir: StateDir = None,
) -> None:
    """Forget a session (its jobs stay)."""
    with tenant_transport(tenant, address, state_dir, default="default") as api:
        api.delete_session(session_id)
    OUT.print(f"deleted session {session_id}", markup=False)


def _when(at: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(at))
