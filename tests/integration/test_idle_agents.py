"""Inline teams' agents stop once idle past their tenant's ``agents_idle_s``, on a real Ray."""

from __future__ import annotations

import time

import pytest
import ray

from raytroupe import runtime
from raytroupe.actors.desk.actor import REAP_EVERY_S
from raytroupe.actors.ray_handles import NAMESPACE
from tests.support.inline import agent_actor

# system tier: a deeper scenario than the quick tier's core (docs/testing.md)
pytestmark = pytest.mark.system


def _alive(actor: str) -> bool:
    try:
        ray.get_actor(actor, namespace=NAMESPACE)
    except ValueError:
        return False
    return True


def _team(name: str) -> runtime.Team:
    return runtime.Team(name=name, agents=[runtime.AgentSpec(name="ada", role="analyst")])


def test_idle_inline_agents_stop_and_the_teams_next_job_starts_them_again(rt):
    rt.put_policy("napper", runtime.TenantPolicy(agents_idle_s=1))
    rt.put_policy("keeper", runtime.TenantPolicy(agents_idle_s=None))
    napper, keeper = rt.as_tenant("napper"), rt.as_tenant("keeper")
    kept = keeper.submit("Count the apples.", _team("orchard")).result(timeout=120)
    first = napper.submit("Count the pears.", _team("orchard")).result(timeout=120)
    assert (kept.status, first.status) == ("succeeded", "succeeded")

    deadline = time.monotonic() + 6 * REAP_EVERY_S  # bounded: a sweep every REAP_EVERY_S
    while _alive(agent_actor("ada", "napper")) and time.monotonic() < deadline:
        time.sleep(0.5)

    assert not _alive(agent_actor("ada", "napper"))
    # the same sweep saw the keeper's team, idle as long, and left it running
    assert _alive(agent_actor("ada", "keeper"))
    again = napper.submit("Count the plums.", _team("orchard")).result(timeout=120)
    assert again.status == "succeeded", again.error
    assert [s.agent for s in again.subtasks] == ["ada"]  # as written: the tenant's own agent
