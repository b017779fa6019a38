"""``troupe kb ...`` and ``troupe sessions ...``: knowledge bases and conversations."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from raytroupe.protocols import KnowledgeNotFound
from raytroupe.runtime.cli._connect import close, connect_from
from raytroupe.runtime.cli._options import Address, StateDir
from raytroupe.runtime.cli._show import OUT

__all__ = ["kb_app", "sessions_app"]

kb_app = typer.Typer(help="Knowledge bases: add files, search, list, remove.", no_args_is_help=True)
sessions_app = typer.Typer(
    help="Sessions (conversations): list, show, delete.", no_args_is_help=True
)
SHOWN_CHARS = 300
"""Characters of a passage or an answer a table shows."""

KnowledgeBase = Annotated[str, typer.Argument(help="The knowledge base's name.")]
Tenant = Annotated[str, typer.Option(help="Whose knowledge base or session.")]


@kb_app.command("add")
def add(
    kb: KnowledgeBase,
    files: Annotated[
        list[Path], typer.Argument(help="Files (.txt .md .html .pdf .json) or directories.")
    ],
    *,
    tenant: Tenant = "default",
    address: Address = None,
    state_dir: StateDir = None,
) -> None:
    """Chunk, embed and store files (a file ingested before is replaced, or skipped if same)."""
    rt = connect_from(address, state_dir)
    try:
        report = rt.ingest(kb, files, tenant=tenant)
        table = Table("source", "passages", "what happened")
        for doc in report.documents:
            what = "unchanged" if doc.unchanged else "replaced" if doc.replaced else "added"
            table.add_row(doc.source, str(doc.chunks), what)
        OUT.print(table)
    finally:
        close(rt)


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
    rt = connect_from(address, state_dir)
    try:
        table = Table("cite", "score", "section", "passage")
        for p in rt.search(kb, query, k=k, tenant=tenant).passages:
            text = " ".join(p.text.split())
            cut = text[:SHOWN_CHARS] + ("..." if len(text) > SHOWN_CHARS else "")
            table.add_row(f"{p.source}#{p.position}", f"{p.score:.3f}", p.section, cut)
        OUT.print(table)
    finally:
        close(rt)


@kb_app.command("list")
def list_knowledge(
    kb: Annotated[str | None, typer.Argument(help="A knowledge base: its documents.")] = None,
    *,
    tenant: Tenant = "default",
    address: Address = None,
    state_dir: StateDir = None,
) -> None:
    """The tenant's knowledge bases, or the documents of one."""
    rt = connect_from(address, state_dir)
    try:
        if kb is None:
            table = Table("knowledge base", "passages", "created")
            for info in rt.knowledge_bases(tenant=tenant):
                table.add_row(info.name, str(info.chunks), _when(info.created_at))
        else:
            table = Table("source", "type", "passages", "ingested")
            for doc in rt.documents(kb, tenant=tenant):
                table.add_row(doc.source, doc.media_type, str(doc.chunks), _when(doc.ingested_at))
        OUT.print(table)
    finally:
        close(rt)


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
    rt = connect_from(address, state_dir)
    try:
        if not sources:
            if not rt.drop_knowledge_base(kb, tenant=tenant):
                raise KnowledgeNotFound(f"there is no knowledge base {kb!r}")
            OUT.print(f"removed knowledge base {kb}")
            return
        for source in sources:
            removed = rt.delete_document(kb, source, tenant=tenant)
            if not removed:
                raise KnowledgeNotFound(f"knowledge base {kb!r} has no document {source!r}")
            OUT.print(f"removed {source} ({removed} passages)")
    finally:
        close(rt)


@sessions_app.command("list")
def list_sessions(
    *, tenant: Tenant = "default", address: Address = None, state_dir: StateDir = None
) -> None:
    """The tenant's sessions, the most recently used first."""
    rt = connect_from(address, state_dir)
    try:
        table = Table("session", "title", "created", "last used")
        for info in rt.sessions(tenant=tenant):
            table.add_row(info.id, info.title, _when(info.created_at), _when(info.updated_at))
        OUT.print(table)
    finally:
        close(rt)


@sessions_app.command("show")
def show_session(
    session_id: Annotated[str, typer.Argument(help="The session's id.")],
    *,
    tenant: Tenant = "default",
    address: Address = None,
    state_dir: StateDir = None,
) -> None:
    """A session's turns: each job's task, status and answer."""
    rt = connect_from(address, state_dir)
    try:
        info = rt.session(session_id, tenant=tenant, create=False).info()
        if info.summary:
            OUT.print(f"[dim]summary of turns 1-{info.summarized_through}:[/] {info.summary}")
        table = Table("turn", "job", "status", "task", "answer")
        for turn in info.turns:
            table.add_row(str(turn.seq), turn.job_id, turn.status, turn.task[:200],
                          (turn.answer or "")[:SHOWN_CHARS])  # fmt: skip
        OUT.print(table)
    finally:
        close(rt)


@sessions_app.command("delete")
def delete_session(
    session_id: Annotated[str, typer.Argument(help="The session's id.")],
    *,
    tenant: Tenant = "default",
    address: Address = None,
    state_dir: StateDir = None,
) -> None:
    """Forget a session (its jobs stay)."""
    rt = connect_from(address, state_dir)
    try:
        rt.session(session_id, tenant=tenant, create=False).delete()
        OUT.print(f"deleted session {session_id}")
    finally:
        close(rt)


def _when(at: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(at))
