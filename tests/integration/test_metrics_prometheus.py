"""raytroupe's metrics on Ray's Prometheus endpoint, after a real job on a real local Ray."""

from __future__ import annotations

import re
import time
import urllib.request

import pytest
import ray

from raytroupe import runtime
from raytroupe.protocols import AgentMessage, Event, encode
from tests.support.inline import agent_name

# system tier: a deeper scenario than the quick tier's core (docs/testing.md)
pytestmark = pytest.mark.system

TENANT = "metrics-test"
"""Used by no other test: the LLM series of this tenant come from this test's job only."""

_SERIES = re.compile(r"^(?P<name>[a-zA-Z_:][\w:]*)(?:\{(?P<labels>.*)\})? (?P<value>\S+)$")
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def _scrape() -> list[tuple[str, dict[str, str], float]]:
    """Every series of every live node's Prometheus endpoint (each on 127.0.0.1)."""
    series = []
    for node in ray.nodes():
        if not node["Alive"]:
            continue
        url = f"http://127.0.0.1:{node['MetricsExportPort']}/metrics"
        with urllib.request.urlopen(url, timeout=5) as response:
            text = response.read().decode()
        for line in text.splitlines():
            found = _SERIES.match(line)
            if found and found["name"].startswith("ray_troupe_"):
                labels = dict(_LABEL.findall(found["labels"] or ""))
                series.append((found["name"], labels, float(found["value"])))
    return series


def _total(series, name: str, **labels: str) -> float:
    """The sum over processes (``WorkerId``) of ``name``'s series that carry ``labels``."""
    return sum(v for n, tags, v in series if n == name and labels.items() <= tags.items())


def _depths(series, recipient: str) -> list[float]:
    """The router's in-flight gauge for ``recipient``, one value per series."""
    return [v for n, t, v in series if n == "ray_troupe_queue_depth" and t["name"] == recipient]


def _interval_s() -> float:
    """Ray's metrics export interval in this session (``RAY_metrics_report_interval_ms``)."""
    return float(ray._config.metrics_report_interval_ms()) / 1000


def _wait_for(check, timeout_s: float = 60.0):
    """Scrape until ``check(series)`` holds (Ray exports metrics every report interval)."""
    deadline = time.monotonic() + timeout_s
    while True:
        series = _scrape()
        if check(series) or time.monotonic() > deadline:
            return series
        time.sleep(0.25)


def test_a_job_shows_up_in_the_router_llm_tool_and_dead_letter_metrics(rt):
    before = _scrape()
    routed = _total(before, "ray_troupe_messages_routed_total", kind="tool_call")
    tool_ok = _total(before, "ray_troupe_tool_calls_total", tool="calculator", outcome="ok")
    unknown = _total(before, "ray_troupe_dead_letters_total", reason="unknown_recipient")
    succeeded = _total(before, "ray_troupe_jobs_finished_total", status="succeeded")
    team = runtime.Team(
        name="metered",
        agents=[runtime.AgentSpec(name="meter", role="analyst", tools=["calculator"])],
    )

    result = rt.submit("What is 6 * 7?", team=team, tenant=TENANT).result(timeout=60)
    stray = AgentMessage(sender="driver", recipient="nobody-metered", payload=Event(name="x"))
    ray.get(rt.actor("router/0").request.remote(encode(stray)))

    assert result.status == "succeeded"
    assert result.subtasks[0].tool_calls == 1
    llm = {"alias": "default", "deployment": "default", "tenant": TENANT}
    meter = agent_name("meter", TENANT)  # the actor's name: the inline agent, scoped
    after = _wait_for(
        lambda s: (
            # a gauge's export lags a report interval: the agent's depth is back at zero
            _depths(s, meter) == [0.0]
            and _total(s, "ray_troupe_messages_routed_total", kind="tool_call") > routed
            and _total(s, "ray_troupe_tool_calls_total", tool="calculator", outcome="ok") > tool_ok
            and _total(s, "ray_troupe_dead_letters_total", reason="unknown_recipient") > unknown
            and _total(s, "ray_troupe_llm_calls_total", **llm) >= result.usage.calls
            and _total(s, "ray_troupe_jobs_finished_total", status="succeeded") > succeeded
            and {"planning", "running", "aggregating"}
            <= {t["status"] for n, t, _ in s if n == "ray_troupe_jobs"}
        )
    )
    assert _total(after, "ray_troupe_jobs_finished_total", status="succeeded") > succeeded
    # the live jobs-by-status gauge has a series for each status a job passed through, and
    # keeps it: Ray forgets a gauge two report intervals after it was last set, so every
    # scrape over the next three intervals must still show each series
    deadline = time.monotonic() + 3 * _interval_s()
    scrapes = 0
    while time.monotonic() < deadline or scrapes < 3:
        live = {t["status"] for n, t, _ in _scrape() if n == "ray_troupe_jobs"}
        assert {"planning", "running", "aggregating"} <= live, f"scrape {scrapes}: {live}"
        scrapes += 1
        time.sleep(0.25)
    assert _total(after, "ray_troupe_messages_routed_total", kind="tool_call") > routed
    assert _total(after, "ray_troupe_messages_routed_total", kind="llm_request") > 0
    assert _total(after, "ray_troupe_tool_calls_total", tool="calculator", outcome="ok") > tool_ok
    assert _total(after, "ray_troupe_tool_call_seconds_count", tool="calculator") > 0
    assert _total(after, "ray_troupe_dead_letters_total", reason="unknown_recipient") > unknown
    # every model call of the job, and its tokens, under the job's tenant
    assert _total(after, "ray_troupe_llm_calls_total", **llm) == result.usage.calls
    assert (
        _total(after, "ray_troupe_llm_tokens_total", direction="input", **llm)
        == result.usage.prompt_tokens
    )
    assert (
        _total(after, "ray_troupe_llm_tokens_total", direction="output", **llm)
        == result.usage.completion_tokens
    )
    # the router's in-flight gauge has a series per recipient, back at zero once idle
    depths = [(t["name"], v) for n, t, v in after if n == "ray_troupe_queue_depth"]
    names = {name for name, _ in depths}
    assert meter in names
    assert names & {"llm-0", "llm-1"}  # the pool replica (of two) that took the job's calls
    assert _depths(after, meter) == [0.0]
