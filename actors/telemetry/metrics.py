"""raytroupe's own metrics, exported through Ray to its dashboard and Prometheus endpoint.

Each function here records one observation. Outside Ray (unit tests, a plain script) they do
nothing. Inside Ray, the metric objects are created once per process, on the first call. A
recording that fails is logged once per function and process, and never raised: a metric
must not break message routing.

On Prometheus, Ray adds the prefix ``ray_``, counters get the suffix ``_total``, and every
series has a ``WorkerId`` label (one series per process):

====================================  =========  ==========================================
metric                                type       tags
====================================  =========  ==========================================
``troupe_messages_routed``            counter    ``kind`` (payload kind, or ``malformed``)
``troupe_dead_letters``               counter    ``reason`` (an ``ErrorCode``)
``troupe_jobs``                       gauge      ``status`` (live statuses only)
``troupe_jobs_finished``              counter    ``status`` (succeeded, failed, cancelled)
``troupe_llm_calls``                  counter    ``alias``, ``deployment``, ``tenant``
``troupe_llm_tokens``                 counter    ``alias``, ``deployment``, ``tenant``,
                                                 ``direction`` (input, output)
``troupe_llm_cost_usd``               counter    ``alias``, ``deployment``, ``tenant``
``troupe_llm_latency_seconds``        histogram  ``alias``, ``deployment``
``troupe_llm_failures``               counter    ``alias``, ``code``
``troupe_spend_alerts``                counter    ``limit``, ``tenant``, ``threshold``
``troupe_tool_calls``                 counter    ``tool``, ``outcome`` (ok, or an error code)
``troupe_tool_call_seconds``          histogram  ``tool``
``troupe_memory_ops``                 counter    ``op``
``troupe_memory_items``               counter    ``op``
``troupe_queue_depth``                gauge      ``queue`` (router, llm), ``name``
``troupe_experiment_jobs``            gauge      ``experiment``, ``arm`` (jobs assigned)
``troupe_experiment_success_rate``    gauge      ``experiment``, ``arm``
``troupe_experiment_metric``          gauge      ``experiment``, ``arm`` (the tested mean)
``troupe_experiment_cost_usd``        gauge      ``experiment``, ``arm`` (mean per job)
====================================  =========  ==========================================

Ray exports a gauge's value only in the report interval after it was set, and forgets it
two intervals later; a process here keeps the last value of each of its gauges' series and
sets it again every half interval
(:class:`raytroupe.actors.telemetry.metric_backends.HeldGauges`), so a gauge of live jobs still
reads 0 an hour after the last job ended, as a Prometheus scrape expects.

Tag values come from closed sets (kinds, error codes, statuses) or from configured names
(aliases, deployments, tenants, tools, recipients, experiments and their arms); never from
job or message ids. Each configured-name tag keeps at most :data:`MAX_TAG_VALUES` distinct
values per process; later ones are recorded as ``other``, so a caller inventing names
cannot flood Prometheus.
"""

from __future__ import annotations

import collections
import contextlib
import functools
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Concatenate, Final, Literal, ParamSpec

import structlog

from raytroupe.actors.telemetry.metric_backends import Backend, RayBackend
from raytroupe.actors.telemetry.metric_capture import CaptureBackend, Sample
from raytroupe.protocols import ErrorCode, JobStatus
from raytroupe.protocols.experiments import ArmStats
from raytroupe.protocols.jobs import TERMINAL

__all__ = [
    "MAX_TAG_VALUES",
    "capture",
    "dead_lettered",
    "experiment_arm",
    "job_status",
    "llm_failed",
    "llm_usage",
    "memory_op",
    "message_routed",
    "queue_depth",
    "spend_alert",
    "tool_call",
]

log = structlog.get_logger("raytroupe.metrics")

MAX_TAG_VALUES: Final = 256
"""Distinct values a configured-name tag keeps per process; later ones become ``other``."""

MemoryOp = Literal["write", "query", "delete", "forget"]
Queue = Literal["router", "llm"]
P = ParamSpec("P")


class _Metrics:
    """Every metric object of one process, and the state behind its gauges."""

    def __init__(self, backend: Backend) -> None:
        c, g, h = backend.counter, backend.gauge, backend.histogram
        llm = ("alias", "deployment", "tenant")
        self.routed = c("troupe_messages_routed", "Envelopes the router accepted.", ("kind",))
        self.dead = c("troupe_dead_letters", "Envelopes dead-lettered.", ("reason",))
        self.jobs = g("troupe_jobs", "Jobs in each live status.", ("status",))
        self.finished = c("troupe_jobs_finished", "Jobs finished.", ("status",))
        self.llm_calls = c("troupe_llm_calls", "Model calls answered.", llm)
        self.tokens = c("troupe_llm_tokens", "Model tokens.", (*llm, "direction"))
        self.cost = c("troupe_llm_cost_usd", "Model spend, US dollars.", llm)
        self.latency = h("troupe_llm_latency_seconds", "Model call latency.", llm[:2])
        self.llm_failures = c("troupe_llm_failures", "Model calls failed.", ("alias", "code"))
        self.spend_alerts = c(
            "troupe_spend_alerts",
            "Spend windows' alert thresholds crossed.",
            ("limit", "tenant", "threshold"),
        )
        self.tools = c("troupe_tool_calls", "Tool calls.", ("tool", "outcome"))
        self.tool_seconds = h("troupe_tool_call_seconds", "Tool call duration.", ("tool",))
        self.memory_ops = c("troupe_memory_ops", "Memory store operations.", ("op",))
        self.memory_items = c("troupe_memory_items", "Memories written/found/removed.", ("op",))
        self.queue = g("troupe_queue_depth", "Calls in flight or queued.", ("queue", "name"))
        arm = ("experiment", "arm")
        self.arm_jobs = g("troupe_experiment_jobs", "A/B experiment jobs assigned.", arm)
        self.arm_success = g("troupe_experiment_success_rate", "A/B arm success rate.", arm)
        self.arm_metric = g("troupe_experiment_metric", "A/B arm's tested mean.", arm)
        self.arm_cost = g("troupe_experiment_cost_usd", "A/B arm's mean cost per job.", arm)
        self.live_jobs: collections.Counter[str] = collections.Counter()
        self.warned: set[str] = set()
        self._values: dict[str, set[str]] = collections.defaultdict(set)

    def bounded(self, key: str, value: str) -> str:
        """``value``, or ``other`` once ``key`` has :data:`MAX_TAG_VALUES` others."""
        seen = self._values[key]
        if value in seen:
            return value
        if len(seen) >= MAX_TAG_VALUES:
            return "other"
        seen.add(value)
        return value


_live: _Metrics | None = None
_captured: _Metrics | None = None
_broken = False
_creating = threading.Lock()


def _metrics() -> _Metrics | None:
    """The metrics of this process; None outside Ray (or when they could not be created)."""
    if _captured is not None:
        return _captured
    if _live is not None:
        return _live
    # a process that never imported Ray cannot be running in it: no import, no cost
    ray = sys.modules.get("ray")
    if _broken or ray is None or not ray.is_initialized():
        return None
    return _create()


def _create() -> _Metrics | None:
    global _live, _broken  # noqa: PLW0603 - one set of metric objects per process, made lazily
    with _creating:
        if _live is None and not _broken:
            try:
                _live = _Metrics(RayBackend())
            except Exception:  # without metrics the runtime still works
                _broken = True
                log.warning("metrics_unavailable", exc_info=True)
    return _live


def _recorder(record: Callable[Concatenate[_Metrics, P], None]) -> Callable[P, None]:
    """The public form of ``record``: it gets the process's metrics; it never raises."""
    name = record.__name__

    @functools.wraps(record)
    def guarded(*args: P.args, **kwargs: P.kwargs) -> None:
        metrics = _metrics()
        if metrics is None:
            return
        try:
            record(metrics, *args, **kwargs)
        except Exception:  # a metric must never fail the work it measures
            if name not in metrics.warned:
                metrics.warned.add(name)
                log.warning("metric_failed", metric=name, exc_info=True)

    return guarded


@_recorder
def message_routed(metrics: _Metrics, kind: str) -> None:
    """The router accepted an envelope of payload ``kind`` (``malformed``: unreadable bytes)."""
    metrics.routed.inc(1, {"kind": kind})


@_recorder
def dead_lettered(metrics: _Metrics, reason: ErrorCode) -> None:
    """The router dead-lettered an envelope for ``reason``."""
    metrics.dead.inc(1, {"reason": reason.value})


@_recorder
def job_status(metrics: _Metrics, old: JobStatus | None, new: JobStatus) -> None:
    """A job moved from ``old`` to ``new`` (``old=None``: the job is new to this process).

    Live statuses are a gauge of the jobs in each (never below zero); reaching a terminal
    status counts the job in ``troupe_jobs_finished``. Call it where the status changes, in
    the one process that owns the job.
    """
    if old == new:
        return
    live = metrics.live_jobs
    if old is not None and old not in TERMINAL:
        live[old] = max(0, live[old] - 1)
        metrics.jobs.set(live[old], {"status": old})
    if new in TERMINAL:
        metrics.finished.inc(1, {"status": new})
    else:
        live[new] += 1
        metrics.jobs.set(live[new], {"status": new})


@_recorder
def llm_usage(
    metrics: _Metrics,
    alias: str,
    deployment: str,
    tenant: str,
    *,
    input_tokens: int,
    output_tokens: int,
    cost_usd: float,
    latency_s: float,
) -> None:
    """One model call answered by ``deployment`` for ``alias`` and ``tenant``, and its usage."""
    tags = {
        "alias": metrics.bounded("alias", alias),
        "deployment": metrics.bounded("deployment", deployment),
        "tenant": metrics.bounded("tenant", tenant),
    }
    metrics.llm_calls.inc(1, tags)
    if input_tokens > 0:  # Ray's counters refuse increments that are not positive
        metrics.tokens.inc(input_tokens, {**tags, "direction": "input"})
    if output_tokens > 0:
        metrics.tokens.inc(output_tokens, {**tags, "direction": "output"})
    if cost_usd > 0:
        metrics.cost.inc(cost_usd, tags)
    metrics.latency.observe(latency_s, {"alias": tags["alias"], "deployment": tags["deployment"]})


@_recorder
def llm_failed(metrics: _Metrics, alias: str, code: ErrorCode) -> None:
    """A model call for ``alias`` failed for good (retries and fallbacks spent) with ``code``."""
    metrics.llm_failures.inc(1, {"alias": metrics.bounded("alias", alias), "code": code.value})


@_recorder
def spend_alert(metrics: _Metrics, limit: str, tenant: str, threshold: float) -> None:
    """A spend window of ``limit`` crossed ``threshold`` of it (counted once per window)."""
    tags = {
        "limit": metrics.bounded("limit", limit),
        "tenant": metrics.bounded("tenant", tenant),
        "threshold": f"{threshold:g}",
    }
    metrics.spend_alerts.inc(1, tags)


@_recorder
def tool_call(
    metrics: _Metrics, tool: str, *, ok: bool, seconds: float, code: ErrorCode | None = None
) -> None:
    """A tool call finished: ``ok``, or failed with ``code`` (``error`` when not known)."""
    tool = metrics.bounded("tool", tool)
    outcome = "ok" if ok else "error" if code is None else code.value
    metrics.tools.inc(1, {"tool": tool, "outcome": outcome})
    metrics.tool_seconds.observe(seconds, {"tool": tool})


@_recorder
def memory_op(metrics: _Metrics, op: MemoryOp, items: int) -> None:
    """The memory store did ``op``, touching ``items`` memories (written, found, removed)."""
    metrics.memory_ops.inc(1, {"op": op})
    if items > 0:
        metrics.memory_items.inc(items, {"op": op})


@_recorder
def queue_depth(metrics: _Metrics, queue: Queue, name: str, depth: int) -> None:
    """``depth`` calls are now in flight or queued for ``name`` (a recipient, a deployment)."""
    metrics.queue.set(depth, {"queue": queue, "name": metrics.bounded(queue, name)})


@_recorder
def experiment_arm(metrics: _Metrics, experiment: str, arm: ArmStats) -> None:
    """An A/B experiment's arm as it stands (set by the front desk's periodic check)."""
    tags = {
        "experiment": metrics.bounded("experiment", experiment),
        "arm": metrics.bounded("arm", arm.version),
    }
    metrics.arm_jobs.set(arm.assigned, tags)
    metrics.arm_success.set(arm.success_rate, tags)
    metrics.arm_cost.set(arm.cost_usd, tags)
    if arm.mean is not None:
        metrics.arm_metric.set(arm.mean, tags)


# -- testing ------------------------------------------------------------------------------


@contextlib.contextmanager
def capture() -> Iterator[list[Sample]]:
    """Record into a list instead of Ray (with or without Ray), for tests.

    Recordings are checked as Ray checks them (all tag keys, string values, counters only
    go up), so a recording Ray would refuse is refused here too, and logged, not raised.
    """
    global _captured  # noqa: PLW0603 - the capture replaces the process's metrics while it lasts
    samples: list[Sample] = []
    previous, _captured = _captured, _Metrics(CaptureBackend(samples))
    try:
        yield samples
    finally:
        _captured = previous
