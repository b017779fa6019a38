"""Admission of tenants' jobs: inline teams are data, checked field by field and scoped."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from raytroupe.actors.orchestrator.admission import (
    InlineTeams,
    PolicyBook,
    admit_attachments,
    admit_budget,
    admit_inline,
    admit_registered,
)
from raytroupe.actors.orchestrator.journal import Journal
from raytroupe.protocols import (
    AgentSpec,
    Attachment,
    Budget,
    Forbidden,
    GraphNode,
    GraphSpec,
    OpenAICompatibleModel,
    PlannedSubtask,
    TeamSpec,
    TenantPolicy,
    scoped_name,
    tenant_scope,
)

POLICY = TenantPolicy(
    models=("default", "cheap"),
    tools=("calculator", "file_read"),
    max_budget=Budget(tokens=10_000, usd=1.0),
    max_agents=4,
    max_live_agents=6,
)
NAME = "tenant policy of 'acme'"


def agent(name="a", **fields):
    return AgentSpec(name=name, role=fields.pop("role", "worker"), **fields)


def team(*agents, **fields):
    return TeamSpec(name=fields.pop("name", "t"), agents=agents or (agent(),), **fields)


def refused(spec, policy=POLICY):
    with pytest.raises(Forbidden) as caught:
        admit_inline(spec, "acme", NAME, policy)
    assert caught.value.detail["policy"] == NAME
    return caught.value


ATTACKER = OpenAICompatibleModel(
    model="m", base_url="http://attacker.example/v1", api_key_env="OPENAI_API_KEY"
)


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        (team(agent(model="evil"), models={"evil": ATTACKER}), "team.models.evil"),
        (team(agent(model="gpt")), "team.agents.0.model"),
        (team(agent(), planner_model="gpt"), "team.planner_model"),
        (team(agent(tools=("python",))), "team.agents.0.tools"),
        (team(agent(tools=("calculator", "shell"))), "team.agents.0.tools"),
        (team(agent(tools=("delegate",))), "team.agents.0.tools"),
        (team(agent(max_turns=50)), "team.agents.0.max_turns"),
        (team(agent(max_concurrency=200)), "team.agents.0.max_concurrency"),
        (team(agent(num_cpus=8.0)), "team.agents.0.num_cpus"),
        (team(*(agent(f"a{n}") for n in range(5))), "team.agents"),
        (team(agent(), max_parallel=500), "team.max_parallel"),
        (team(agent(), max_subtasks=900), "team.max_subtasks"),
        (team(agent(), subtask_timeout_s=86_400.0), "team.subtask_timeout_s"),
        (team(agent(), budget=Budget(tokens=10**9)), "team.budget"),
        (team(agent(), budget=Budget(tokens=100)), "team.budget"),  # no USD cap: unbounded
        (
            team(
                agent(),
                plan=(PlannedSubtask(id="s", role="worker", instructions="x", redundancy=9),),
            ),
            "team.plan.0.redundancy",
        ),
        (
            team(
                agent(),
                graph=GraphSpec(
                    nodes=(GraphNode(id="n", role="worker", instructions="x"),),
                    start="n",
                    max_steps=900,
                ),
            ),
            "team.graph.max_steps",
        ),
    ],
)
def test_each_field_past_the_policy_is_refused_by_name(spec, field):
    error = refused(spec)
    assert error.detail["field"] == field
    assert field in error.message


def test_every_refused_field_is_listed_not_only_the_first():
    error = refused(team(agent(model="gpt", tools=("python",), num_cpus=1.0)))
    assert error.detail["fields"] == [
        "team.agents.0.model",
        "team.agents.0.tools",
        "team.agents.0.num_cpus",
    ]


def test_a_policy_without_inline_teams_refuses_them_all():
    assert refused(team(), TenantPolicy(inline_teams=False)).detail["field"] == "team"


def test_an_admitted_team_runs_under_names_scoped_to_its_tenant():
    spec = team(agent("ada"), agent("alan", tools=("calculator",)), name="research")
    admitted = admit_inline(spec, "acme", NAME, POLICY)
    assert admitted.name == scoped_name("acme", "research")
    assert [a.name for a in admitted.agents] == [scoped_name("acme", n) for n in ("ada", "alan")]
    other = admit_inline(spec, "globex", NAME, POLICY)
    assert {a.name for a in admitted.agents}.isdisjoint(a.name for a in other.agents)
    assert admitted.name != "research"  # never the registered team of that name


def test_the_agents_a_team_may_delegate_to_are_the_tenants_own_whatever_it_names():
    theirs = scoped_name("globex", "vault")  # another tenant's agent, named in full
    spec = team(agent("boss", tools=("calculator",)), delegates=("helper", theirs, "trust-ada"))
    admitted = admit_inline(spec, "acme", NAME, POLICY)
    assert admitted.delegates == tuple(
        scoped_name("acme", n) for n in ("helper", theirs, "trust-ada")
    )
    assert theirs not in admitted.peers(admitted.agents[0].name)
    assert set(admitted.peers(admitted.agents[0].name)) == set(admitted.delegates)


def test_a_team_lists_at_most_64_delegates():
    with pytest.raises(ValidationError, match="at most 64"):
        team(delegates=tuple(f"d{n}" for n in range(65)))


@pytest.mark.parametrize(
    ("a", "b"), [("a", "a.b"), ("acme", "acme-x"), ("x", "X"), ("...", "___"), ("t", "")]
)
def test_tenant_scopes_differ_and_are_valid_names(a, b):
    assert tenant_scope(a) != tenant_scope(b)
    for tenant in (a, b):
        AgentSpec(name=scoped_name(tenant, "x"), role="r")  # a valid actor name


def test_a_name_too_long_once_scoped_is_a_config_error_not_a_crash():
    from raytroupe.protocols import ConfigError  # noqa: PLC0415

    with pytest.raises(ConfigError, match="scoped"):
        admit_inline(team(agent("a" * 60)), "acme", NAME, POLICY)


def test_budgets_stay_under_the_ceiling():
    spec = team()
    assert admit_budget(None, spec, NAME, POLICY) == Budget(tokens=10_000, usd=1.0)
    assert admit_budget(Budget(tokens=5, usd=0.1), spec, NAME, POLICY) == Budget(tokens=5, usd=0.1)
    for asked in (Budget(tokens=20_000, usd=0.1), Budget(usd=0.5), Budget(tokens=1, usd=5.0)):
        with pytest.raises(Forbidden) as caught:
            admit_budget(asked, spec, NAME, POLICY)
        assert caught.value.detail["field"] == "budget"
    registered = team(budget=Budget(tokens=10**9))  # a registered team's own: lowered
    assert admit_budget(None, registered, NAME, POLICY) == Budget(tokens=10_000, usd=1.0)
    assert admit_budget(None, registered, NAME, TenantPolicy()) == Budget(tokens=10**9)


def test_image_urls_need_the_policy_and_registered_teams_its_list():
    url = Attachment(name="x.png", media_type="image/png", url="http://169.254.169.254/x.png")
    with pytest.raises(Forbidden) as caught:
        admit_attachments([url], NAME, POLICY)
    assert caught.value.detail["field"] == "attachments.0.url"
    admit_attachments([url], NAME, POLICY.model_copy(update={"image_urls": True}))
    admit_registered("research", NAME, POLICY)  # teams=None: every registered team
    with pytest.raises(Forbidden):
        admit_registered("payroll", NAME, POLICY.model_copy(update={"teams": ("research",)}))


def test_the_policy_book_falls_back_to_the_default():
    book = PolicyBook({"*": TenantPolicy(max_turns=3), "acme": POLICY})
    assert book.policy("acme") == (NAME, POLICY)
    assert book.policy("globex")[1].max_turns == 3
    book.put("acme", None)
    assert book.policy("acme")[0] == "default tenant policy"


class Retirer:
    def __init__(self):
        self.retired: list[list[str]] = []

    async def provision(self, _team):
        return None

    async def retire(self, agents):
        self.retired.append(list(agents))


def test_a_tenant_keeps_at_most_its_live_agents_idle_teams_go_first(tmp_path):
    async def main():
        journal = Journal(tmp_path / "j.sqlite")
        retirer = Retirer()
        inline = InlineTeams(journal, retirer)
        policy = TenantPolicy(max_live_agents=4)
        teams = [
            admit_inline(team(agent("x"), agent("y"), name=f"t{n}"), "acme", NAME, policy)
            for n in range(4)
        ]
        await inline.use("acme", teams[0], NAME, policy, running=set())
        await inline.use("acme", teams[1], NAME, policy, running=set())
        assert retirer.retired == []
        await inline.use("acme", teams[2], NAME, policy, running=set())  # t0 is idle: stopped
        assert retirer.retired == [[a.name for a in teams[0].agents]]
        other = admit_inline(team(agent("x"), agent("y")), "globex", NAME, policy)
        await inline.use("globex", other, NAME, policy, running=set())  # its own count
        assert len(retirer.retired) == 1
        # t1 and t2 both run jobs: no room for t3
        with pytest.raises(Forbidden) as caught:
            await inline.use("acme", teams[3], NAME, policy, running={teams[1].name, teams[2].name})
        assert caught.value.detail["field"] == "team.agents"
        assert len(retirer.retired) == 1
        # a restarted orchestrator knows whose agents are running
        again = InlineTeams(Journal(tmp_path / "j.sqlite"), retirer)
        await again.use("acme", teams[3], NAME, policy, running={teams[2].name})
        assert retirer.retired[-1] == [a.name for a in teams[1].agents]
        # an admin's (a driver's) inline teams are kept within the cap too, never refused
        admins = [team(agent("x"), agent("y"), name=f"a{n}") for n in range(3)]
        await again.use("ops", admins[0], NAME, policy, running=set(), refuse=False)
        await again.use("ops", admins[1], NAME, policy, running=set(), refuse=False)
        await again.use("ops", admins[2], NAME, policy, running=set(), refuse=False)
        assert retirer.retired[-1] == [a.name for a in admins[0].agents]
        busy = {admins[1].name, admins[2].name}
        await again.use("ops", admins[0], NAME, policy, running=busy, refuse=False)
        assert retirer.retired[-1] == [a.name for a in admins[0].agents]  # nothing idle

    asyncio.run(main())


# -- property: no generated inline team gets past the policy --------------------------------

OPERATOR_ALIASES = ("default", "cheap", "gpt-4o", "claude")
ALL_TOOLS = ("calculator", "file_read", "file_write", "python", "shell", "http_get", "echo",
             "delegate", "handoff", "testmcp.get_time")  # fmt: skip
SECRETS = ("OPENAI_API_KEY", "TROUPE_API_KEYS", "AWS_SECRET_ACCESS_KEY", "HOME")
URLS = ("http://169.254.169.254/v1", "http://127.0.0.1:6379", "https://attacker.example/v1",
        "http://[::1]:8265", "http://10.0.0.1/v1")  # fmt: skip

names = st.from_regex(r"[a-z][a-z0-9]{0,10}", fullmatch=True)
models = st.builds(
    OpenAICompatibleModel,
    model=names,
    base_url=st.sampled_from(URLS),
    api_key_env=st.sampled_from(SECRETS),
)
agents = st.builds(
    AgentSpec,
    name=names,
    role=st.sampled_from(("worker", "writer")),
    model=st.sampled_from(OPERATOR_ALIASES),
    tools=st.lists(st.sampled_from(ALL_TOOLS), max_size=3).map(tuple),
    max_turns=st.integers(1, 100),
    max_concurrency=st.integers(1, 64),
    num_cpus=st.sampled_from((0.0, 0.0, 1.0)),
)
teams = st.builds(
    TeamSpec,
    name=names,
    agents=st.lists(agents, min_size=1, max_size=6, unique_by=lambda a: a.name).map(tuple),
    models=st.dictionaries(names, models, max_size=2),
    planner_model=st.sampled_from(OPERATOR_ALIASES),
    max_parallel=st.integers(1, 64),
    budget=st.one_of(st.none(), st.builds(Budget, tokens=st.integers(0, 10**6))),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec=teams, tenant=st.sampled_from(("acme", "globex", "a.b")))
def test_no_generated_inline_team_gets_a_model_a_secret_or_a_tool_past_the_policy(spec, tenant):
    try:
        admitted = admit_inline(spec, tenant, NAME, POLICY)
    except Forbidden:
        return  # refused: nothing of it is provisioned
    assert admitted.models == {}  # no endpoint, key variable or price of the tenant's own
    assert admitted.planner_model in POLICY.models
    for a in admitted.agents:
        assert a.model in POLICY.models
        assert set(a.tools) <= set(POLICY.tools)
        assert a.num_cpus == 0
        assert a.max_turns <= POLICY.max_turns
        assert a.name.startswith(tenant_scope(tenant) + ".")
    assert len(admitted.agents) <= POLICY.max_agents
    assert admitted.name.startswith(tenant_scope(tenant) + ".")
    assert admitted.budget is None or (
        admitted.budget.tokens is not None and admitted.budget.tokens <= 10_000
    )
