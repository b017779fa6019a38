"""Registering teams and agents, declared once: the same on the HTTP API, its clients and the
driver; for admins only; a team is data (one naming shipped functions is refused on every
surface); a URL that names another team or agent than the body is a conflict; 201 for what is
new, 200 for what was there. Against a real Ray and Serve: test_hot_update.py,
test_http_api.py, test_http_client_against_serve.py."""

from __future__ import annotations

import pytest
from surfaces import ADMIN, USER, Driver, over_http, sent
from wiring import run

from raytroupe.protocols import (
    AgentSpec,
    Conflict,
    Forbidden,
    InvalidInput,
    TeamNotFound,
    TeamSpec,
)
from raytroupe.runtime.http_client import AsyncClient, Client

ADA = AgentSpec(name="ada", role="researcher")
TEAM = TeamSpec(name="lab", agents=[ADA])
SHIPPED = {"name": "lab", "agents": [{"name": "ada", "role": "r", "tools": ["f"]}],
           "functions": {"f": "sha256:" + "0" * 64}}  # fmt: skip


class Catalog:
    """The desk's team and agent registrations, recorded."""

    def __init__(self):
        self.calls = []
        self.teams: dict[str, TeamSpec] = {}

    async def put_team(self, spec, *, create=False):
        self.calls.append(("put_team", spec.name, create))
        if create and spec.name in self.teams:
            raise Conflict(f"team {spec.name!r} exists", team=spec.name)
        new = spec.name not in self.teams
        self.teams[spec.name] = spec
        return new

    async def put_agent(self, team, agent, *, create=False):
        self.calls.append(("put_agent", team, agent.name, create))
        if team not in self.teams:
            raise TeamNotFound(f"no team {team!r}", team=team)
        agents = {a.name: a for a in self.teams[team].agents}
        if create and agent.name in agents:
            raise Conflict(f"agent {agent.name!r} exists", agent=agent.name)
        new = agent.name not in agents
        agents[agent.name] = agent
        self.teams[team] = self.teams[team].model_copy(update={"agents": list(agents.values())})
        return new


def test_teams_and_agents_register_alike_on_every_surface():
    async def over(client):
        made = await client.create_team(TEAM)
        with pytest.raises(Conflict):
            await client.create_team(TEAM)
        again = await client.apply_team(TEAM.model_dump())  # a mapping does too
        grace = await client.create_agent("lab", {"name": "grace", "role": "coder"})
        moved = await client.apply_agent("lab", AgentSpec(name="grace", role="tester"))
        with pytest.raises(TeamNotFound):
            await client.create_agent("nope", ADA)
        return made, again, grace, moved

    catalog = Catalog()
    made, again, grace, moved = over_http(catalog, ADMIN, over)
    assert made == again == TEAM
    assert (grace.name, grace.team, grace.role) == ("grace", "lab", "coder")
    assert moved.role == "tester"
    http_calls = catalog.calls

    catalog = Catalog()
    driver = Driver(catalog, admin=True)
    assert driver.create_team(TEAM) == TEAM
    with pytest.raises(Conflict):
        driver.create_team(TEAM)
    driver.apply_team(TEAM.model_dump())
    assert driver.create_agent("lab", {"name": "grace", "role": "coder"}) == grace
    assert driver.apply_agent("lab", AgentSpec(name="grace", role="tester")) == moved
    with pytest.raises(TeamNotFound):
        driver.create_agent("nope", ADA)
    assert catalog.calls == http_calls


def test_http_says_201_for_what_is_new_and_200_for_what_was_there():
    agent = {"team": "lab", "agent": {"name": "grace", "role": "coder"}}
    team = TEAM.model_dump(mode="json")
    answers = sent(Catalog(), [
        ("POST", "/v1/teams", {"json": team}),
        ("PUT", "/v1/teams/lab", {"json": team}),
        ("PUT", "/v1/teams/other", {"json": team}),
        ("PUT", "/v1/agents/grace", {"json": agent}),
        ("PUT", "/v1/agents/grace", {"json": agent}),
        ("PUT", "/v1/agents/ada", {"json": agent}),
        ("POST", "/v1/agents", {"json": agent}),
    ])  # fmt: skip
    assert [a.status_code for a in answers] == [201, 200, 409, 201, 200, 409, 409], [
        a.text for a in answers
    ]
    assert "the URL's 'other'" in answers[2].json()["detail"]


def test_a_team_naming_shipped_functions_is_refused_on_every_surface():
    catalog = Catalog()
    with pytest.raises(Forbidden, match="shipped functions"):
        Driver(catalog, admin=True).apply_team(SHIPPED)

    async def over(client):
        for call in (client.create_team(SHIPPED), client.apply_team(SHIPPED)):
            with pytest.raises(Forbidden, match="shipped functions"):
                await call

    over_http(catalog, ADMIN, over)
    assert catalog.calls == []


def test_a_tenants_key_registers_nothing():
    catalog = Catalog()

    async def over(client):
        for call in (client.create_team(TEAM), client.apply_agent("lab", ADA)):
            with pytest.raises(Forbidden):
                await call

    over_http(catalog, USER, over)
    with pytest.raises(Forbidden):
        Driver(catalog, admin=False).create_team(TEAM)
    assert catalog.calls == []


@pytest.mark.parametrize(
    "team", [{"name": "lab"}, {"name": "", "agents": [ADA.model_dump()]}, {"agents": []}]
)
def test_a_team_that_is_no_team_is_refused_before_the_desk_hears(team):
    catalog = Catalog()
    with pytest.raises(InvalidInput):
        Driver(catalog, admin=True).create_team(team)

    async def over(client):
        with pytest.raises(InvalidInput):
            await client.apply_team(team)

    over_http(catalog, ADMIN, over)
    assert catalog.calls == []


def test_put_agent_is_apply_agents_older_name_and_warns():
    catalog = Catalog()
    run(catalog.put_team(TEAM))

    async def over(client):
        with pytest.warns(DeprecationWarning, match=r"put_agent\(\) is deprecated: apply_agent"):
            return await client.put_agent("lab", {"name": "grace", "role": "coder"})

    assert over_http(catalog, ADMIN, over).name == "grace"
    for client in (Client, AsyncClient):
        assert client.__dict__["put_agent"].new == "apply_agent"
