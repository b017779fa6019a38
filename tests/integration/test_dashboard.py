"""The Ray dashboard as a user meets it: the actors describe themselves, a person logs in.

The browser is a real headless Chromium (Debian's, installed by ``tests/support/browser.py``)
driven by Playwright; it logs in with the token ``ray get-auth-token`` prints, as the README
says, and finds the job's agents on the Actors page. ``TROUPE_SCREENSHOTS=<dir>`` keeps the
screenshot (the README's comes from such a run).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import ray
from ray.util.state import list_actors

from raytroupe import runtime
from tests.support.browser import headless_page
from tests.support.inline import agent_actor, agent_name

TEAM = runtime.Team(
    name="dash",
    planner_model="offline",
    agents=[
        runtime.AgentSpec(name="dash-ada", role="researcher", model="offline"),
        runtime.AgentSpec(name="dash-alan", role="analyst", model="default", max_concurrency=2),
    ],
)


@pytest.fixture(scope="module")
def dashboard(rt):
    assert rt.submit("- one.\n- two.", team=TEAM).result(timeout=120).status == "succeeded"
    url = ray._private.worker.get_dashboard_url()
    assert url, "the session's Ray runs without its dashboard"
    return f"http://{url}"


def _reprs() -> dict[str, str]:
    actors = list_actors(
        address=ray.get_runtime_context().gcs_address,  # this session's: not any Ray running here
        filters=[("state", "=", "ALIVE")], limit=10_000, detail=True, raise_on_missing_output=False,
    )  # fmt: skip
    return {a.name: a.repr_name for a in actors if a.name}


def test_every_troupe_actor_describes_itself_through_rays_state_api(dashboard):
    reprs = _reprs()
    # the driver's inline team: its actors are the driver's tenant's (default-<hash>.dash-ada)
    ada, alan, dash = agent_name("dash-ada"), agent_name("dash-alan"), agent_name("dash")
    assert reprs[f"agent/{ada}"] == (
        f"Agent({ada}: team {dash}, role researcher, model offline, 4 subtask(s) at once)"
    )
    assert reprs[f"agent/{alan}"] == (
        f"Agent({alan}: team {dash}, role analyst, model default, 2 subtask(s) at once)"
    )
    assert reprs["router/0"].startswith("Router(shard 0 of 2, hop limit 16")
    assert reprs["router/1"].startswith("Router(shard 1 of 2, hop limit 16")
    assert reprs["desk"].startswith("FrontDesk(2 job shards, journal ")
    assert reprs["orchestrator/0"].startswith("Orchestrator(shard 0 of 2, journal ")
    assert reprs["orchestrator/1"].startswith("Orchestrator(shard 1 of 2, journal ")
    assert reprs["llm/0"].startswith("LLMAdapterPool(replica 0 of 2, ")
    assert reprs["llm/1"].startswith("LLMAdapterPool(replica 1 of 2, ")
    assert reprs["memory"].startswith("MemoryStore(Chroma at ")
    assert reprs["tools/0"].startswith("ToolSandbox(tools-0: calculator, delegate, ")
    assert reprs["tools/0"].endswith("MCP testmcp)")
    assert all(reprs[name] for name in reprs if name.startswith("agent/"))


def _token() -> str:
    ray_cli = shutil.which("ray", path=str(Path(sys.executable).parent)) or "ray"
    done = subprocess.run([ray_cli, "get-auth-token"], capture_output=True, text=True,
                          check=True, timeout=60)  # fmt: skip
    return done.stdout.strip()


@pytest.mark.system  # a headless Chromium
def test_a_person_logs_in_with_the_token_and_finds_the_agents(dashboard, tmp_path):
    with headless_page() as page:
        page.goto(f"{dashboard}/#/actors")
        page.get_by_text("Authentication Token Required").wait_for(timeout=60_000)
        page.get_by_placeholder("Enter your authentication token").fill(_token())
        page.get_by_role("button", name="Submit").click()
        page.get_by_role("textbox", name="Name", exact=True).fill(agent_actor("dash-"))
        page.keyboard.press("Enter")
        ada, dash = agent_name("dash-ada"), agent_name("dash")
        described = (
            f"Agent({ada}: team {dash}, role researcher, model offline, 4 subtask(s) at once)"
        )
        page.get_by_text(described).wait_for(timeout=60_000)
        page.get_by_text(agent_actor("dash-alan")).wait_for(timeout=60_000)
        shot = tmp_path / "dashboard-actors.png"
        page.screenshot(path=str(shot))
    assert shot.stat().st_size > 10_000
    if keep := os.environ.get("TROUPE_SCREENSHOTS"):
        shutil.copy(shot, Path(keep) / shot.name)
