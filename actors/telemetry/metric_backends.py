"""The metric objects' interface, and Ray's backend for them with its held gauges.

:mod:`raytroupe.actors.telemetry.metrics` makes every metric of a process through a
:class:`Backend`: :class:`RayBackend` under Ray, the capture backend of
:mod:`raytroupe.actors.telemetry.metric_capture` in tests.
"""

from __future__ import annotations

import threading
from typing import Final, Protocol

import structlog

__all__ = ["Backend", "Counter", "Gauge", "HeldGauges", "Histogram", "RayBackend"]

log = structlog.get_logger("raytroupe.metrics")

_SECONDS: Final = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0]


class Counter(Protocol):
    """A metric that only goes up."""

    def inc(self, value: float, tags: dict[str, str]) -> None:
        """Add ``value`` (positive) to the series of ``tags``."""
        ...


class Gauge(Protocol):
    """A metric set to its current value."""

    def set(self, value: float, tags: dict[str, str]) -> None:
        """Set the series of ``tags`` to ``value``."""
        ...


class Histogram(Protocol):
    """A metric of observed durations, in buckets."""

    def observe(self, value: float, tags: dict[str, str]) -> None:
        """Count ``value`` in its bucket of the series of ``tags``."""
        ...


class Backend(Protocol):
    """What makes a process's metric objects."""

    def counter(self, name: str, description: str, tags: tuple[str, ...]) -> Counter:
        """A counter with these tag keys."""
        ...

    def gauge(self, name: str, description: str, tags: tuple[str, ...]) -> Gauge:
        """A gauge with these tag keys."""
        ...

    def histogram(self, name: str, description: str, tags: tuple[str, ...]) -> Histogram:
        """A histogram of seconds with these tag keys."""
        ...


class HeldGauges:
    """The last value of every series of a process's gauges, set again every ``period_s``.

    Ray's worker hands a gauge's values to its agent once, in the next export, and the agent
    drops a series it has not heard of for two intervals: a value set once would vanish.
    The thread starts with the first gauge; it is a daemon and holds no lock while it sets.
    """

    def __init__(self, period_s: float) -> None:
        self.period_s = period_s
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._values: dict[tuple[int, tuple[tuple[str, str], ...]], float] = {}
        self._gauges: dict[int, Gauge] = {}
        self._thread: threading.Thread | None = None

    def wrap(self, gauge: Gauge) -> Gauge:
        """``gauge``, its values held from now on."""
        held = self

        class _Held:
            def set(self, value: float, tags: dict[str, str]) -> None:
                gauge.set(value, tags)
                with held._lock:
                    held._values[id(gauge), tuple(sorted(tags.items()))] = value

        with self._lock:
            self._gauges[id(gauge)] = gauge
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="troupe-gauges", daemon=True)
                self._thread.start()
        return _Held()

    def refresh(self) -> int:
        """Set every held value again; how many."""
        with self._lock:
            values = list(self._values.items())
        for (gauge_id, tags), value in values:
            self._gauges[gauge_id].set(value, dict(tags))
        return len(values)

    def close(self) -> None:
        """Stop setting values again (the thread ends within a period)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.period_s + 5.0)

    def _run(self) -> None:
        failed = False
        while not self._stop.wait(self.period_s):
            try:
                self.refresh()
            except Exception:  # a metric must never take its process down
                if not failed:  # once: a process whose Ray is gone would say it forever
                    log.warning("gauge_refresh_failed", exc_info=True)
                failed = True


def _report_interval_s() -> float:
    """Ray's metrics export interval (at least 1 s, as its exporter takes it)."""
    import ray  # noqa: PLC0415 - only processes that run Ray get here

    setting = getattr(ray, "_config", None)
    interval_ms = getattr(setting, "metrics_report_interval_ms", lambda: 10_000)()
    return max(float(interval_ms), 1000.0) / 1000.0


class RayBackend:
    """Ray's metric objects; its gauges held (:class:`HeldGauges`)."""

    def __init__(self) -> None:
        from ray.util import metrics  # noqa: PLC0415 - only processes that run Ray get here

        self._ray = metrics
        self._held = HeldGauges(_report_interval_s() / 2)

    def counter(self, name: str, description: str, tags: tuple[str, ...]) -> Counter:
        """Ray's counter."""
        counter: Counter = self._ray.Counter(name, description, tag_keys=tags)
        return counter

    def gauge(self, name: str, description: str, tags: tuple[str, ...]) -> Gauge:
        """Ray's gauge, its values held."""
        gauge: Gauge = self._ray.Gauge(name, description, tag_keys=tags)
        return self._held.wrap(gauge)

    def histogram(self, name: str, description: str, tags: tuple[str, ...]) -> Histogram:
        """Ray's histogram, in the buckets of seconds."""
        histogram: Histogram = self._ray.Histogram(
            name, description, boundaries=_SECONDS, tag_keys=tags
        )
        return histogram
