"""Admission of tenants' jobs: inline teams are data, checked field by field and scoped.

And admission again: a fork, a graph's resume and a restarted orchestrator's resume run a
stored job under its tenant's policy of today (``readmit``), whatever it was admitted under.
"""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError
from wiring import build_troupe, order, run

from raytroupe.actors.desk.inline import InlineTeams
from raytroupe.actors.orchestrator.admission import (
    PolicyBook,
    admit_attachments,
    admit_budget,
    admit_inline,
    admit_registered,
    admit_skill,
    readmit,
    runs_inline,
    scope_inline,
)
from raytroupe.actors.orchestrator.jobs import Job
from raytroupe.actors.orchestrator.journal import Journal
from raytroupe.protocols import (
    AgentSpec,
    Attachment,
    Budget,
    ErrorCode,
    Forbidden,
    GraphNode,
    GraphSpec,
    ImagePart,
    JobResult,
    LLMRequest,
    OpenAICompatibleModel,
    PlannedSubtask,
    ScriptedModel,
    ScriptedTurn,
    SkillSpec,
    TeamSpec,
    TenantPolicy,
    Timings,
    as_written,
    scoped_name,
    tenant_scope,
)
from raytroupe.protocols.job_context import JobContext
from tests.support.graph_specs import PAUSED

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


def test_an_admins_inline_team_is_scoped_too_and_may_still_ask_registered_agents():
    spec = team(agent("ada"), delegates=("vault", "helper"), name="analysis")
    scoped = scope_inline(spec, "default", registered={"vault", "ada"})
    assert scoped.name == scoped_name("default", "analysis")
    assert [a.name for a in scoped.agents] == [scoped_name("default", "ada")]  # never "ada"
    # a registered agent is asked by its name; any other name is one of the tenant's own
    assert scoped.delegates == ("vault", scoped_name("default", "helper"))
    assert scoped.agents[0].model_copy(update={"name": "ada"}) == spec.agents[0]  # only names
    assert scope_inline(spec, "acme").delegates == tuple(
        scoped_name("acme", n) for n in ("vault", "helper")
    )


def test_scoping_keeps_a_plan_the_orchestrator_will_judge_and_refuses_only_bad_names():
    from raytroupe.protocols import ConfigError  # noqa: PLC0415

    plan = (PlannedSubtask(id="s1", role="ghost", instructions="{task}"),)
    ghostly = TeamSpec.model_construct(**{**team(agent("ada")).__dict__, "plan": plan})
    assert scope_inline(ghostly, "default").plan == plan  # judged later, as before
    with pytest.raises(ConfigError, match="scoped") as caught:
        scope_inline(team(agent("a" * 60)), "default")
    assert caught.value.detail["problems"] == [
        f"agents.0.name: {scoped_name('default', 'a' * 60)!r} is no name "
        "(at most 64 letters, digits, '.', '_' and '-')"
    ]


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


def test_a_team_idle_past_its_tenants_agents_idle_s_is_stopped_and_a_busy_one_is_not(tmp_path):
    async def main():
        now = [1000.0]
        journal = Journal(tmp_path / "j.sqlite")
        retirer = Retirer()
        inline = InlineTeams(journal, retirer, clock=lambda: now[0])
        brisk, patient = TenantPolicy(agents_idle_s=30), TenantPolicy(agents_idle_s=None)
        policies = {"acme": brisk, "globex": patient}
        quick, busy, kept = (
            admit_inline(team(agent("x"), name=name), tenant, NAME, policies[tenant])
            for name, tenant in (("quick", "acme"), ("busy", "acme"), ("kept", "globex"))
        )
        for tenant, spec in (("acme", quick), ("acme", busy), ("globex", kept)):
            await inline.use(tenant, spec, NAME, policies[tenant], running=set())
        now[0] += 30
        assert await inline.reap(set(), policies.__getitem__) == []  # not past 30 s yet
        now[0] += 1
        # busy's job runs on: its idle time starts when the job ends, not when it began
        assert await inline.reap({busy.name}, policies.__getitem__) == [quick.name]
        assert retirer.retired == [[a.name for a in quick.agents]]
        now[0] += 29
        assert await inline.reap(set(), policies.__getitem__) == []
        now[0] += 2
        assert await inline.reap(set(), policies.__getitem__) == [busy.name]
        now[0] += 10**6  # globex's policy keeps its agents until max_live_agents needs room
        assert await inline.reap(set(), policies.__getitem__) == []
        # stopped teams are gone from the journal: a restarted desk does not stop them again
        assert [spec.name for _, spec, _ in journal.inline_teams()] == [kept.name]

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


# -- admitted again: a fork, a resume, a restart run under the policy of today --------------

THEN = POLICY.model_copy(update={"image_urls": True, "max_budget": None})
"""The policy a stored job was admitted under."""


def stored(spec=None, **fields):
    """A tenant's job as the orchestrator keeps it: its inline team admitted under ``THEN``."""
    spec = spec or team(agent(model="cheap", tools=("calculator",)))
    fields = {"budget": Budget(tokens=5_000, usd=0.5), "tenant": "acme",
              "team": admit_inline(spec, "acme", NAME, THEN), **fields}  # fmt: skip
    return Job(id="job-1", context=JobContext(request="t"), submitted_at=0.0, **fields)


def readmitted(job, policy):
    with pytest.raises(Forbidden) as caught:
        readmit(job, NAME, policy)
    assert caught.value.detail["policy"] == NAME
    return caught.value


def skill(name="summarize", version="1", mode="direct"):
    spec = {"name": name, "version": version, "description": "d", "execution_mode": mode}
    return SkillSpec.model_validate({**spec, "prompt": {"instructions": "x"}})


URL = ImagePart(url="http://169.254.169.254/x.png")


@pytest.mark.parametrize(
    ("job", "today", "field"),
    [
        (stored(), POLICY.model_copy(update={"models": ("default",)}), "team.agents.0.model"),
        (stored(), POLICY.model_copy(update={"tools": ("file_read",)}), "team.agents.0.tools"),
        (stored(), POLICY.model_copy(update={"max_turns": 2}), "team.agents.0.max_turns"),
        (stored(), POLICY.model_copy(update={"inline_teams": False}), "team"),
        (stored(), POLICY.model_copy(update={"max_budget": Budget(tokens=1_000)}), "budget"),
        (stored(budget=None), POLICY, "budget"),  # unbounded: past any ceiling
        (stored(images=(URL,)), POLICY, "images.0.url"),
        (stored(registered=True, team=TeamSpec(name="research", agents=(agent(),))),
         POLICY.model_copy(update={"teams": ("other",)}), "team"),
        (stored(skill=skill()), POLICY.model_copy(update={"skills": ("other",)}), "skill"),
        (stored(skill=skill(mode="team:payroll")), POLICY.model_copy(update={"teams": ()}),
         "team"),
    ],
)  # fmt: skip
def test_a_stored_job_is_refused_by_name_once_todays_policy_refuses_a_field(job, today, field):
    readmit(job, NAME, THEN)  # admitted then
    error = readmitted(job, today)
    assert error.detail["field"] == field
    assert field in error.message


def test_every_field_todays_policy_refuses_is_listed_and_an_unbounded_budget_is_named():
    today = POLICY.model_copy(update={"models": ("default",), "tools": ()})
    error = readmitted(stored(budget=None, images=(URL,)), today)
    assert error.detail["fields"] == [
        "team.agents.0.model", "team.agents.0.tools", "budget", "images.0.url"]  # fmt: skip
    assert "budget: none (unbounded) exceeds the ceiling" in " ".join(error.detail["problems"])


def test_what_todays_policy_still_allows_is_readmitted():
    readmit(stored(), NAME, POLICY)
    # a registered team is the operator's: its name is checked, not its agents' models
    theirs = TeamSpec(name="research", agents=(agent(model="gpt-4o", tools=("python",)),))
    readmit(stored(team=theirs, registered=True), NAME, POLICY)
    readmit(stored(team=theirs), NAME, POLICY)  # read back from the journal: not scoped
    readmit(stored(skill=skill(), team=theirs), NAME, POLICY.model_copy(update={"skills": None}))


def test_only_a_tenants_scoped_inline_team_runs_inline():
    assert runs_inline(stored())
    assert not runs_inline(stored(registered=True))
    assert not runs_inline(stored(skill=skill()))
    assert not runs_inline(stored(team=team(name="research")))  # a registered one, or an admin's
    assert not runs_inline(stored(tenant="globex"))  # scoped to another tenant: not its own


def test_an_experiments_arm_is_admitted_as_the_version_asked_for():
    admit_skill(skill(version="2", mode="team:research"), NAME, POLICY)
    with pytest.raises(Forbidden) as caught:
        admit_skill(skill(version="2", mode="team:payroll"), NAME,
                    POLICY.model_copy(update={"teams": ("research",)}))  # fmt: skip
    assert caught.value.detail["field"] == "team"
    assert "summarize@2" in caught.value.message
    with pytest.raises(Forbidden) as caught:
        admit_skill(skill(), NAME, POLICY.model_copy(update={"skills": ("other",)}))
    assert caught.value.detail["field"] == "skill"


def test_the_journal_keeps_how_a_job_was_admitted_and_what_a_fork_of_it_runs_under(tmp_path):
    journal = Journal(tmp_path / "j.sqlite")
    job = stored(images=(URL,), skill=skill(), input={"x": 1})
    for job_id, admin in (("job-t", False), ("job-a", True)):
        journal.job(
            job_id,
            context=JobContext(request="t"),
            team=job.team,
            tenant="acme",
            budget=job.budget,
            submitted_at=1.0,
            images=job.images,
            skill=job.skill,
            input=job.input,
            submitted_by="key",
            admin=admin,
        )
    assert {j.id: j.admin for j in journal.resumable()} == {"job-t": False, "job-a": True}
    journal.finish(JobResult(job_id="job-t", task="t", team=job.team.name, status="succeeded",
                             timings=Timings(submitted_at=1.0, finished_at=2.0)))  # fmt: skip
    again = Journal(tmp_path / "j.sqlite").finished("job-t")
    assert again is not None
    assert (again.admin, again.budget, again.images, again.skill, again.input) == (
        False, job.budget, (URL,), job.skill, {"x": 1})  # fmt: skip
    assert again.submitted_by == "key"


# -- on the orchestrator (no Ray): each path that starts a stored job again ------------------

ALLOWED = TenantPolicy(models=("offline", "writer", "editor"))
REVOKED = TenantPolicy(models=("offline", "writer"))
"""The editor's model alias, revoked."""


def paused_team(name="g"):
    """A graph that drafts (writer), then waits for a person before publishing (editor)."""
    agents = tuple(AgentSpec(name=f"{name}-{r}", role=r, model=r) for r in ("writer", "editor"))
    return TeamSpec(name=name, planner_model="offline", agents=agents,
                    graph=GraphSpec.model_validate(PAUSED))  # fmt: skip


def scripted(*texts):
    return ScriptedModel(turns=tuple(ScriptedTurn(text=t) for t in texts))


async def until(orchestrator, job_id, wanted):
    for _ in range(500):
        if await orchestrator.status(job_id) == wanted:
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"job {job_id} never {wanted}")


def calls_of(troupe, job_id):
    return [m for m in troupe.llm.seen if m.job_id == job_id and isinstance(m.payload, LLMRequest)]


def test_a_graph_resume_and_a_fork_are_refused_after_a_revocation_and_leave_nothing_behind():
    async def main():
        troupe = await build_troupe({"writer": scripted("v1"), "editor": scripted("v2")})
        orchestrator = troupe.orchestrator
        await troupe.desk.put_policy("acme", ALLOWED)
        job_id = await troupe.desk.submit(
            *order("a poem", paused_team(), tenant="acme", admin=False)
        )
        await until(orchestrator, job_id, "awaiting_input")
        points, jobs = await orchestrator.checkpoints(job_id), await orchestrator.jobs()
        await troupe.desk.put_policy("acme", REVOKED)
        with pytest.raises(Forbidden) as resumed:
            await orchestrator.resume(job_id, value="hijacked", tenant="acme")
        with pytest.raises(Forbidden) as forked:
            await orchestrator.fork(job_id, 1, tenant="acme")
        unchanged = (await orchestrator.status(job_id), await orchestrator.checkpoints(job_id),
                     await orchestrator.jobs(), len(calls_of(troupe, job_id)))  # fmt: skip
        await troupe.desk.put_policy("acme", ALLOWED)  # allowed again: it goes on from there
        await orchestrator.resume(job_id, value="ship it", tenant="acme")
        return (
            resumed.value,
            forked.value,
            unchanged,
            (points, jobs),
            await orchestrator.wait(job_id, 10),
        )

    resumed, forked, unchanged, before, result = run(main())
    for refused in (resumed, forked):
        assert refused.detail["field"] == "team.agents.1.model"
        assert refused.detail["policy"] == "tenant policy of 'acme'"
    assert unchanged == ("awaiting_input", before[0], before[1], 1)  # the draft's call only
    assert result.status == "succeeded", result.error
    assert result.state == {"text": "v2", "verdict": "ship it"}


def test_a_tenants_fork_of_an_admins_job_is_the_tenants_and_an_admins_fork_runs_as_it_is():
    async def main():
        troupe = await build_troupe({"writer": scripted("v1"), "editor": scripted("v2")})
        orchestrator = troupe.orchestrator
        await troupe.desk.put_policy("acme", REVOKED)
        # a driver's (an admin's) job in the tenant's space, naming what the tenant may not
        job_id = await troupe.desk.submit(*order("a poem", paused_team(), tenant="acme"))
        await until(orchestrator, job_id, "awaiting_input")
        with pytest.raises(Forbidden) as by_tenant:
            await orchestrator.fork(job_id, 1, tenant="acme")
        jobs = await orchestrator.jobs()
        by_admin = await orchestrator.fork(job_id, 1, tenant="acme", admin=True)
        await orchestrator.cancel(job_id)
        await orchestrator.cancel(by_admin)
        return by_tenant.value, jobs, await orchestrator.jobs(), by_admin

    refused, before, after, forked = run(main())
    assert refused.detail["field"] == "team.agents.1.model"
    assert forked not in before
    assert set(after) == {*before, forked}  # the tenant's refused fork left no job behind


def test_a_restarted_orchestrator_fails_a_job_todays_policy_refuses_and_runs_none_of_it(tmp_path):
    journal = tmp_path / "journal.db"

    async def before():
        troupe = await build_troupe({"writer": scripted("v1", "v1")}, journal=journal)
        orchestrator = troupe.orchestrator
        await troupe.desk.put_policy("acme", ALLOWED)
        tenants = await troupe.desk.submit(*order("a", paused_team(), tenant="acme", admin=False))
        admins = await troupe.desk.submit(
            *order("b", paused_team("ops"), tenant="acme")
        )  # a driver's
        for job_id in (tenants, admins):
            await until(orchestrator, job_id, "awaiting_input")
        await troupe.desk.on_stop()  # the processes go away while both wait
        await orchestrator.on_stop()
        return tenants, admins

    async def after(tenants, admins):
        troupe = await build_troupe({"editor": scripted("v2")}, journal=journal)
        orchestrator = troupe.orchestrator
        result = await orchestrator.wait(tenants, 10)
        events = await orchestrator.events(tenants)
        await until(orchestrator, admins, "awaiting_input")  # an admin's: taken as it was
        await orchestrator.resume(admins, value="ok")
        return result, events, calls_of(troupe, tenants), await orchestrator.wait(admins, 10)

    tenants, admins = run(before())
    Journal(journal).put_policy("acme", REVOKED)  # the operator revokes the editor's alias
    result, events, calls, admins_result = run(after(tenants, admins))
    assert result.status == "failed"
    assert result.error.code is ErrorCode.FORBIDDEN
    assert result.error.detail["field"] == "team.agents.1.model"
    kinds = [e.type for e in events]  # its log goes on after the restart: the refusal last
    assert (kinds[0], kinds[-2:]) == ("job_submitted", ["graph_interrupted", "job_failed"])
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert events[-1].data["code"] == "forbidden"
    assert calls == []  # nothing of it ran: no model was asked
    assert as_written(Journal(journal).known(tenants)[1], "acme") == result  # journaled
    assert admins_result.status == "succeeded", admins_result.error


def test_a_team_node_of_an_admins_graph_is_the_tenants_job_under_its_policy_of_today():
    helper = TeamSpec(name="helpers", planner_model="offline",
                      agents=(AgentSpec(name="helper-0", role="h", model="h"),),
                      plan=({"id": "only", "role": "h", "instructions": "{task}"},))  # fmt: skip
    graph = GraphSpec.model_validate({
        "start": "ask",
        "state": {"json_schema": {"type": "object", "properties": {"got": {"type": "string"}}}},
        "nodes": [{"id": "ask", "team": "helpers", "writes": ["got"], "instructions": "{task}"}],
    })  # fmt: skip
    parent = TeamSpec(name="asker", planner_model="offline", graph=graph,
                      agents=(AgentSpec(name="asker-w", role="w", model="offline"),))  # fmt: skip

    async def main():
        troupe = await build_troupe({"h": scripted("helped")})
        await troupe.desk.put_team(helper, create=True)
        await troupe.desk.put_policy("acme", TenantPolicy(teams=()))
        job_id = await troupe.desk.submit(*order("this", parent, tenant="acme"))  # an admin's
        result = await troupe.orchestrator.wait(job_id, 10)
        asked = [m for m in troupe.llm.seen if isinstance(m.payload, LLMRequest)]
        return result, [m.payload.model for m in asked]

    result, models = run(main())
    assert result.status == "failed"
    assert result.error.code is ErrorCode.FORBIDDEN
    assert "h" not in models
