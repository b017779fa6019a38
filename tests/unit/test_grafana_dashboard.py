"""docs/grafana/raytroupe.json: a Grafana dashboard of exactly the metrics the code defines.

The metrics are read from the code itself (:class:`actors.telemetry.metrics._Metrics` made
with a backend that notes each definition), then named as Prometheus sees them: Ray's
``ray_`` prefix, ``_total`` on counters, ``_bucket``/``_sum``/``_count`` on histograms.
Every query of the dashboard must name one of them, group and filter only by its tags, and
every metric must be charted.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from raytroupe.actors.telemetry import metrics

DASHBOARD = Path(__file__).resolve().parents[2] / "docs" / "grafana" / "raytroupe.json"
PANEL_TYPES = {"row", "timeseries", "stat", "gauge", "table", "bargauge", "text"}
SUFFIXES = {"counter": ("_total",), "gauge": ("",), "histogram": ("_bucket", "_sum", "_count")}
_NAME = re.compile(r"\bray_troupe_[a-z_]+")
_BY = re.compile(r"\bby \(([^)]*)\)")
_SELECTOR = re.compile(r"\bray_troupe_[a-z_]+\{([^}]*)\}")
_LEGEND = re.compile(r"\{\{\s*(\w+)\s*\}\}")


class Defined(NamedTuple):
    name: str
    kind: str
    tags: tuple[str, ...]


class _Noting:
    """A metrics backend that notes each metric the code defines."""

    def __init__(self) -> None:
        self.defined: list[Defined] = []

    def _note(self, kind: str, name: str, tags: tuple[str, ...]) -> Any:
        self.defined.append(Defined(name, kind, tags))
        return object()

    def counter(self, name: str, _description: str, tags: tuple[str, ...]) -> Any:
        return self._note("counter", name, tags)

    def gauge(self, name: str, _description: str, tags: tuple[str, ...]) -> Any:
        return self._note("gauge", name, tags)

    def histogram(self, name: str, _description: str, tags: tuple[str, ...]) -> Any:
        return self._note("histogram", name, tags)


@pytest.fixture(scope="module")
def defined() -> dict[str, Defined]:
    backend = _Noting()
    metrics._Metrics(backend)
    return {d.name: d for d in backend.defined}


@pytest.fixture(scope="module")
def dashboard() -> dict[str, Any]:
    return json.loads(DASHBOARD.read_text(encoding="utf-8"))


def _charts(dashboard):
    return [p for p in dashboard["panels"] if p["type"] != "row"]


def _prometheus_names(metric: Defined) -> set[str]:
    return {f"ray_{metric.name}{suffix}" for suffix in SUFFIXES[metric.kind]}


def test_the_code_defines_the_metrics_the_module_documents(defined):
    assert len(defined) == 19
    assert defined["troupe_llm_tokens"] == Defined(
        "troupe_llm_tokens", "counter", ("alias", "deployment", "tenant", "direction")
    )
    assert defined["troupe_llm_latency_seconds"].kind == "histogram"
    assert defined["troupe_jobs"].kind == "gauge"


def test_the_file_is_a_grafana_dashboard_with_a_prometheus_datasource_variable(dashboard):
    assert dashboard["title"] == "raytroupe"
    assert dashboard["uid"] == "raytroupe"
    assert isinstance(dashboard["schemaVersion"], int)
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    for panel in dashboard["panels"]:
        assert panel["type"] in PANEL_TYPES, panel["title"]
        assert panel["title"]
        grid = panel["gridPos"]
        assert all(isinstance(grid[k], int) and grid[k] >= 0 for k in ("h", "w", "x", "y"))
        assert grid["x"] + grid["w"] <= 24, panel["title"]
    for panel in _charts(dashboard):
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        assert panel["targets"], panel["title"]
        refs = [t["refId"] for t in panel["targets"]]
        assert len(refs) == len(set(refs))
        assert all(t["expr"].strip() for t in panel["targets"])


def test_no_two_panels_overlap(dashboard):
    taken: dict[tuple[int, int], str] = {}
    for panel in dashboard["panels"]:
        grid = panel["gridPos"]
        for row in range(grid["y"], grid["y"] + grid["h"]):
            for column in range(grid["x"], grid["x"] + grid["w"]):
                other = taken.setdefault((row, column), panel["title"])
                assert other == panel["title"], f"{panel['title']!r} overlaps {other!r}"


def test_every_query_names_a_defined_metric_and_only_its_tags(dashboard, defined):
    by_prometheus_name = {n: m for m in defined.values() for n in _prometheus_names(m)}
    variables = {v["name"] for v in dashboard["templating"]["list"]}
    for panel in _charts(dashboard):
        for target in panel["targets"]:
            expr = target["expr"]
            names = set(_NAME.findall(expr))
            assert len(names) == 1, f"{panel['title']}: one metric per query, not {names}"
            (name,) = names
            assert name in by_prometheus_name, f"{panel['title']}: {name} is not defined"
            metric = by_prometheus_name[name]
            labels = set(metric.tags) | ({"le"} if name.endswith("_bucket") else set())
            grouped = {g.strip() for found in _BY.findall(expr) for g in found.split(",")}
            filtered = {
                s.split("=")[0].strip() for f in _SELECTOR.findall(expr) for s in f.split(",")
            }
            shown = set(_LEGEND.findall(target.get("legendFormat", "")))
            for used in (grouped, filtered, shown):
                assert used <= labels, f"{panel['title']}: {used - labels} not tags of {name}"
            for variable in re.findall(r"\$(\w+)", expr):
                assert variable in variables | {"__rate_interval"}, f"{panel['title']}: ${variable}"
            if metric.kind == "counter":
                assert "rate(" in expr or "increase(" in expr, f"{panel['title']}: a raw counter"


def test_every_defined_metric_has_a_panel(dashboard, defined):
    queried = {
        n for p in _charts(dashboard) for t in p["targets"] for n in _NAME.findall(t["expr"])
    }
    for metric in defined.values():
        assert _prometheus_names(metric) & queried, f"{metric.name} has no panel"


def test_the_tenant_variable_reads_a_metric_that_has_the_tenant_tag(dashboard, defined):
    (tenant,) = [v for v in dashboard["templating"]["list"] if v["name"] == "tenant"]
    (name,) = _NAME.findall(tenant["definition"])
    assert name == "ray_troupe_llm_calls_total"
    assert "tenant" in defined["troupe_llm_calls"].tags
