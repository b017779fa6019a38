"""Metrics recorded into a list, for tests, checked as Ray checks them (see ``metrics.capture``)."""

from __future__ import annotations

from typing import NamedTuple

from raytroupe.actors.telemetry.metric_backends import Counter, Gauge, Histogram

__all__ = ["CaptureBackend", "Sample"]


class Sample(NamedTuple):
    """One recording seen by :func:`capture`."""

    name: str
    tags: dict[str, str]
    value: float


class _Recorded:
    """A metric that appends to a list, checking what Ray's metric objects check."""

    def __init__(
        self,
        samples: list[Sample],
        name: str,
        description: str,
        tags: tuple[str, ...],
        *,
        positive: bool,
    ) -> None:
        if not description:
            raise ValueError(f"{name}: every metric says what it counts")
        self._samples = samples
        self._name = name
        self._keys = set(tags)
        self._positive = positive

    def _record(self, value: float, tags: dict[str, str]) -> None:
        if not isinstance(value, int | float) or (self._positive and value <= 0):
            raise ValueError(f"{self._name}: bad value {value!r}")
        if set(tags) != self._keys or not all(isinstance(v, str) for v in tags.values()):
            raise ValueError(f"{self._name}: bad tags {tags!r}")
        self._samples.append(Sample(self._name, dict(tags), float(value)))

    def inc(self, value: float, tags: dict[str, str]) -> None:
        self._record(value, tags)

    def set(self, value: float, tags: dict[str, str]) -> None:
        self._record(value, tags)

    def observe(self, value: float, tags: dict[str, str]) -> None:
        self._record(value, tags)


class CaptureBackend:
    """Metric objects that append their recordings to ``samples``."""

    def __init__(self, samples: list[Sample]) -> None:
        self._samples = samples

    def counter(self, name: str, description: str, tags: tuple[str, ...]) -> Counter:
        """A recording counter."""
        return _Recorded(self._samples, name, description, tags, positive=True)

    def gauge(self, name: str, description: str, tags: tuple[str, ...]) -> Gauge:
        """A recording gauge."""
        return _Recorded(self._samples, name, description, tags, positive=False)

    def histogram(self, name: str, description: str, tags: tuple[str, ...]) -> Histogram:
        """A recording histogram."""
        return _Recorded(self._samples, name, description, tags, positive=False)
