"""What the console's browser tests share: signed-in tabs, screenshots, an accessibility check,
and stored history (jobs written to the session's journal as finished).

A thousand jobs through the whole system would take minutes on two cores; the jobs page reads
the journal, so these are written there directly, as an orchestrator writes a finished job
(``Journal.job`` then ``Journal.finish``), under a tenant of their own.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from raytroupe.actors.orchestrator.journal import Journal
from raytroupe.protocols import (
    AgentSpec,
    JobResult,
    Span,
    SubtaskResult,
    TeamSpec,
    Timings,
    TraceContext,
    Usage,
)
from raytroupe.protocols.job_context import JobContext

TEAM = TeamSpec(name="history", agents=(AgentSpec(name="historian", role="worker"),))


def subtask(index: int, depends_on: tuple[str, ...]) -> SubtaskResult:
    """A finished subtask ``s<index>``."""
    return SubtaskResult(
        id=f"s{index}",
        role="worker",
        instructions=f"part {index}",
        depends_on=depends_on,
        status="failed" if index % 17 == 5 else "succeeded",
        agent="historian",
        output=f"answer {index}",
        attempt=1 + index % 2,
    )


def wide_plan(count: int) -> tuple[SubtaskResult, ...]:
    """``count`` subtasks in layers of up to 16, each depending on two of the layer before."""
    subtasks = []
    for index in range(count):
        layer, at = divmod(index, 16)
        parents = () if layer == 0 else (f"s{(layer - 1) * 16 + at}", f"s{(layer - 1) * 16}")
        subtasks.append(subtask(index, tuple(dict.fromkeys(parents))))
    return tuple(subtasks)


def stored_job(
    journal: Journal,
    job_id: str,
    *,
    tenant: str,
    task: str,
    at: float,
    subtasks: tuple[SubtaskResult, ...] = (),
    by: str = "bulk-user",
) -> JobResult:
    """Journal ``job_id`` as submitted at ``at`` and finished a few seconds later."""
    journal.job(
        job_id,
        context=JobContext(request=task),
        team=TEAM,
        tenant=tenant,
        budget=None,
        submitted_at=at,
        submitted_by=by,
    )
    root = TraceContext()
    spans = [
        Span(span_id=root.span_id, trace_id=root.trace_id, name=f"job {job_id}", kind="job",
             start=at, end=at + 3.0, attributes={"job_id": job_id, "tenant": tenant}),
        Span(parent_id=root.span_id, trace_id=root.trace_id, name="plan", kind="plan",
             start=at + 0.1, end=at + 0.4, attributes={"subtasks": len(subtasks)}),
    ]  # fmt: skip
    for n, sub in enumerate(subtasks[:32]):  # a bounded trace: the DAG is what is measured
        spans.append(
            Span(parent_id=root.span_id, trace_id=root.trace_id, name=f"subtask {sub.id}",
                 kind="subtask", start=at + 0.5 + n * 0.05, end=at + 1.0 + n * 0.05)
        )  # fmt: skip
    failed = any(s.status == "failed" for s in subtasks)
    result = JobResult(
        job_id=job_id,
        task=task,
        team=TEAM.name,
        status="failed" if failed else "succeeded",
        answer=f"the answer to {task}",
        subtasks=subtasks,
        usage=Usage(prompt_tokens=120, completion_tokens=30, cost_usd=0.0012, calls=2),
        timings=Timings(submitted_at=at, finished_at=at + 3.0),
        trace=tuple(spans),
    )
    journal.finish(result)
    return result


def fill_history(url: str, tenant: str, count: int) -> list[str]:
    """Journal ``count`` finished jobs of ``tenant`` (one a minute back from now); their ids."""
    journal = Journal(url)
    now = time.time()
    ids = []
    try:
        for n in range(count):
            job_id = f"job-hist{n:04d}"
            stored_job(journal, job_id, tenant=tenant, task=f"Report number {n} on topic {n % 7}",
                       at=now - 60.0 * (count - n), subtasks=(subtask(0, ()),))  # fmt: skip
            ids.append(job_id)
    finally:
        journal.close()
    return ids


def store_wide_job(url: str, tenant: str, job_id: str, count: int) -> JobResult:
    """Journal one finished job of ``tenant`` whose plan has ``count`` subtasks."""
    journal = Journal(url)
    try:
        return stored_job(journal, job_id, tenant=tenant, task=f"A plan of {count} parts",
                          at=time.time() - 30.0, subtasks=wide_plan(count))  # fmt: skip
    finally:
        journal.close()


# ---------------------------------------------------------------------------- browser tabs


@contextmanager
def console_tabs(browser: Any, url: str) -> Iterator[Callable[..., Any]]:
    """``open_tab(key)``: a fresh tab of the console at ``url``, signed in with ``key``.

    Every tab's script errors and CSP violations are gathered; on leaving, the tabs are
    closed and there must have been none.
    """
    contexts: list[Any] = []
    errors: list[str] = []

    def open_tab(key: str | None, *, sign_in: bool = True) -> Any:
        context = browser.new_context(viewport={"width": 1400, "height": 900})
        contexts.append(context)
        page = context.new_page()
        page.on("pageerror", lambda exc: errors.append(f"pageerror: {exc}"))
        page.on(
            "console",
            lambda msg: (
                errors.append(f"console: {msg.text}")
                if msg.type == "error" and "Failed to load resource" not in msg.text
                else None
            ),
        )
        page.goto(f"{url}/console/")
        if sign_in and key is not None:
            page.fill("#key", key)
            page.click("#login button[type=submit]")
            page.wait_for_selector("[data-testid=whoami]")
        return page

    yield open_tab
    for context in contexts:
        context.close()
    assert errors == []  # no script error, no CSP violation, in any tab


def shot(page: Any, shots: Path, name: str) -> None:
    """Screenshot the page as ``<shots>/<name>.png`` (copied to ``$TROUPE_SCREENSHOTS`` too)."""
    path = shots / f"{name}.png"
    page.screenshot(path=str(path), full_page=False)
    assert path.stat().st_size > 5_000
    if keep := os.environ.get("TROUPE_SCREENSHOTS"):
        Path(keep).mkdir(parents=True, exist_ok=True)
        shutil.copy(path, Path(keep) / path.name)


UNLABELLED = """() => [...document.querySelectorAll('input, select, textarea, button')]
    .filter(el => !(el.labels?.length || el.getAttribute('aria-label')
                    || el.getAttribute('aria-labelledby') || el.textContent.trim()))
    .map(el => el.outerHTML.slice(0, 80))"""
"""Script: the page's form controls that have no label (their HTML, cut short)."""

LOW_CONTRAST = """() => {
  const rgb = s => (s.match(/[\\d.]+/g) || []).map(Number);
  const lum = ([r, g, b]) => {
    const f = c => { c /= 255; return c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4; };
    return 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b);
  };
  const background = el => {
    for (let e = el; e; e = e.parentElement) {
      const c = rgb(getComputedStyle(e).backgroundColor);
      if (c.length >= 3 && (c.length < 4 || c[3] > 0.5)) return c.slice(0, 3);
    }
    return [255, 255, 255];
  };
  const bad = [];
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  while (walker.nextNode()) {
    const el = walker.currentNode.parentElement;
    if (!walker.currentNode.textContent.trim() || !el || el.closest('svg')) continue;
    const style = getComputedStyle(el);
    if (style.visibility === 'hidden' || !el.getClientRects().length) continue;
    const fg = rgb(style.color).slice(0, 3);
    const [a, b] = [lum(fg), lum(background(el))].sort((x, y) => y - x);
    const ratio = (a + 0.05) / (b + 0.05);
    const large = parseFloat(style.fontSize) >= 24
      || (parseFloat(style.fontSize) >= 18.66 && Number(style.fontWeight) >= 700);
    if (ratio < (large ? 3 : 4.5)) {
      const text = el.textContent.trim().slice(0, 30);
      bad.push(`${el.tagName}.${el.className}: ${ratio.toFixed(2)} "${text}"`);
    }
  }
  return bad.slice(0, 10);
}"""
"""Script: text whose contrast with its background is under WCAG AA's (4.5:1, 3:1 when large)."""
