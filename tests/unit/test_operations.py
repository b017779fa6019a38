"""Operations declared once (raytroupe.runtime.operations): every surface has each, alike.

The HTTP side is the real app behind the real guard, reached by the real async client over
httpx's ASGI transport; the control plane behind it records what it was asked. The same
operations against a real cluster are tested in tests/integration/test_skills_http.py.
"""

from __future__ import annotations

import inspect

import pytest
import typer.main
from surfaces import ADMIN, USER
from surfaces import Driver as _Driver
from surfaces import over_http as _over_http

from raytroupe.deployments.api import create_api
from raytroupe.deployments.config import APIConfig
from raytroupe.protocols import (
    AgentInfo,
    Forbidden,
    InvalidInput,
    JobNotFound,
    SkillEvent,
    SkillInfo,
    SkillSpec,
    TeamNotFound,
    TeamSpec,
    TenantPolicy,
)
from raytroupe.protocols.evals import EvalSuite, OptimisationReport
from raytroupe.protocols.experiments import ExperimentInfo, ExperimentSpec
from raytroupe.runtime.cli import app as cli_app
from raytroupe.runtime.driver import Runtime
from raytroupe.runtime.http_client import AsyncClient, Client
from raytroupe.runtime.operations import At, Operation, declared, operation
from raytroupe.runtime.operations.surfaces import _InProcess, _OverHttp, _OverHttpAsync, _Streamed
from raytroupe.runtime.tenant import TenantView

SUITE_CASE = {"id": "c", "task": "t", "expect": [{"kind": "contains", "values": ["t"]}]}
SPEC = SkillSpec(name="s", version="2", description="d", prompt={"instructions": "x"})

NOT_OPERATIONS = {
    "close": "the client's own connections: nothing is asked of the API",
    "health": "a probe that answers without a key, from the API's process alone",
    "ready": "a probe that answers without a key; 'not ready' (503) is an answer too",
    "models": "OpenAI's model list, in OpenAI's shape (its SDKs read it); the client gives ids",
    "model": "OpenAI's model card, in OpenAI's shape; the client gives its id",
    "jobs": "a page of summaries(): its jobs",
    "result": "waits for the job's end: follows events(), then reads job()",
    "put_agent": "apply_agent's older name: it warns",
    "apply_skill_file": "apply_skill with the skill file itself as the body (POST /v1/skills)",
}
"""The HTTP client's methods that are no operation of the API's own, and why."""


class Recorded:
    """The control plane's skill calls, recorded; each answers as the registry would."""

    @property
    def evolution(self):  # the desk's evolution calls: recorded by the same object
        return self

    def __init__(self):
        self.calls = []

    async def skill(self, name, version=None, *, tenant=None):
        self.calls.append(("skill", name, version, tenant))
        return SPEC

    async def skill_history(self, name=None):
        self.calls.append(("skill_history", name))
        return [SkillEvent(name="s", version="2", action="applied", source="x", at=1.0)]

    async def rollback_skill(self, name, version=None, *, source):
        self.calls.append(("rollback_skill", name, version, source))
        return SPEC

    async def promote_skill(self, name, version, *, source):
        self.calls.append(("promote_skill", name, version, source))
        return SPEC

    async def optimise_skill(self, name, suite, **options):
        self.calls.append(("optimise_skill", name, suite.name, options))
        return OptimisationReport(
            skill=name, version="1", suite=suite.name, baseline_run="r", baseline_score=0.5,
            candidates=(), best=None, promoted=False,
        )  # fmt: skip

    async def delete_skill(self, name, *, source):
        self.calls.append(("delete_skill", name, source))
        return SkillInfo(name=name, version="2", versions=("1", "2"), description="d",
                         execution_mode="react", source="x", updated_at=1.0)  # fmt: skip


def _commands(group, prefix=""):
    """Every command of the ``troupe`` CLI, as typed (``skills rollback``)."""
    found = set()
    for name, command in group.commands.items():
        found.add(f"{prefix}{name}")
        if getattr(command, "commands", None):
            found |= _commands(command, f"{prefix}{name} ")
    return found


# --- every surface has every operation ------------------------------------------------------


def test_every_declared_operation_is_on_every_surface():
    ops = declared()
    assert {"rollback_skill", "promote_skill", "optimise_skill", "skill_history"} <= set(ops)
    paths = create_api(Recorded(), APIConfig()).openapi()["paths"]
    routes = {(method.upper(), path) for path, item in paths.items() for method in item}
    commands = _commands(typer.main.get_command(cli_app))
    for name, op in ops.items():
        blocking, coroutine = (_Streamed, _Streamed) if op.stream else (_OverHttp, _OverHttpAsync)
        assert isinstance(vars(Client).get(name), blocking), f"Client.{name}"
        assert vars(Client)[name].op is op
        assert isinstance(vars(AsyncClient).get(name), coroutine), f"AsyncClient.{name}"
        assert vars(AsyncClient)[name].op is op
        for surface in (Runtime, TenantView):
            method = vars(surface).get(name)
            if surface is TenantView and (op.admin or method is None):
                continue
            if isinstance(method, _InProcess | _Streamed):
                assert method.op is op, f"{surface.__name__}.{name}"
            else:  # a wider form (the driver's ingest reads files), or a handle (its session)
                marked = getattr(method, "widens", None) or getattr(method, "handle_of", None)
                assert marked is op, f"{surface.__name__}.{name}"
                assert set(op.signature.parameters) <= set(inspect.signature(method).parameters)
        assert (op.method, op.route_path) in routes, f"{name}: no route {op.method} {op.path}"
        assert op.cli in commands, f"{name}: no command `troupe {op.cli}`"
        assert op.doc, f"{name} has no documentation"
    assert not any(hasattr(TenantView, name) for name, op in ops.items() if op.admin)


def test_a_new_http_client_method_is_declared_not_written_by_hand():
    public = {n for n in vars(Client) if not n.startswith("_")} - {"url", "timeout"}
    by_hand = {n for n in public if not isinstance(vars(Client)[n], _OverHttp | _Streamed)}
    assert by_hand == set(NOT_OPERATIONS)
    asynchronous = {n for n in vars(AsyncClient) if not n.startswith("_")} - {"url", "timeout"}
    assert public - {"close"} == asynchronous - {"aclose"}


def test_a_derived_method_keeps_the_declarations_name_signature_and_documentation():
    op = declared()["optimise_skill"]
    rt_method = Runtime.__dict__["optimise_skill"].__get__(_Driver(Recorded(), admin=True))
    for method in (rt_method, Client(url="http://test").optimise_skill):
        assert inspect.signature(method) == op.signature
        assert method.__doc__ == op.doc
    for method in (Runtime.optimise_skill, Client.optimise_skill, AsyncClient.optimise_skill):
        assert list(inspect.signature(method).parameters)[:2] == ["self", "name"]
        assert (method.__name__, method.__doc__) == ("optimise_skill", op.doc)
    assert list(op.signature.parameters) == [
        "name", "suite", "variants", "model", "concurrency", "budget", "promote"
    ]  # fmt: skip


# --- the one rule, both ways ------------------------------------------------------------------


def test_over_http_and_in_process_reach_the_control_plane_with_the_same_arguments():
    suite = EvalSuite.model_validate({"name": "suite-a", "cases": [SUITE_CASE]})

    async def calls(client):
        await client.skill("s", "1")
        await client.rollback_skill("s")
        await client.promote_skill("s", "2")
        await client.skill_history()
        await client.skill_history("s")
        await client.optimise_skill("s", suite, variants=2, promote=True)
        return await client.delete_skill("s")

    remote = Recorded()
    gone = _over_http(remote, ADMIN, calls)
    local = Recorded()
    driver = _Driver(local, admin=True)
    driver.skill("s", "1")
    driver.rollback_skill("s")
    driver.promote_skill("s", "2")
    driver.skill_history()
    driver.skill_history("s")
    driver.optimise_skill("s", suite.model_dump(), variants=2, promote=True)  # a mapping: checked
    assert driver.delete_skill("s") == gone
    sources = {"api:boss": "driver"}
    said = [tuple(sources.get(x, x) if isinstance(x, str) else x for x in c) for c in remote.calls]
    assert said == local.calls
    assert local.calls[0] == ("skill", "s", "1", None)  # an admin sees every tenant's skill
    assert local.calls[5] == ("optimise_skill", "s", "suite-a", {
        "variants": 2, "model": "default", "concurrency": 4, "budget": None, "promote": True,
    })  # fmt: skip


def test_a_tenant_reads_within_its_tenant_and_reaches_no_admin_operation():
    system = Recorded()

    async def reads(client):
        await client.skill("s")
        refused = []
        for call in (
            client.rollback_skill("s"), client.promote_skill("s", "1"), client.skill_history(),
            client.delete_skill("s"),
        ):  # fmt: skip
            with pytest.raises(Forbidden):
                await call
            refused.append(True)
        return refused

    assert _over_http(system, USER, reads) == [True] * 4
    assert system.calls == [("skill", "s", None, "acme")]
    tenant = _Driver(Recorded(), admin=False)
    with pytest.raises(Forbidden):
        tenant.promote_skill("s", "1")
    assert tenant.at.system.calls == []


def test_path_segments_cannot_reach_another_route():
    op = declared()["delete_skill"]
    assert op.call("../teams/x").path == "/v1/skills/..%2Fteams%2Fx"
    with pytest.raises(InvalidInput):
        op.call("..")


def test_bad_arguments_are_typed_errors_before_anything_is_sent_or_run():
    op = declared()["promote_skill"]
    with pytest.raises(InvalidInput, match="promote_skill"):
        op.call("s")  # no version
    system = Recorded()
    driver = _Driver(system, admin=True)
    with pytest.raises(InvalidInput) as caught:
        driver.promote_skill("s", "v" * 17)
    assert caught.value.detail["field"] == "version"
    with pytest.raises(InvalidInput) as caught:
        driver.optimise_skill("s", {"name": "x", "cases": [SUITE_CASE]}, variants=9)
    assert caught.value.detail["field"] == "variants"
    with pytest.raises(InvalidInput, match="suite"):
        driver.optimise_skill("s", 7)
    assert system.calls == []


def test_over_http_a_bad_body_is_refused_before_the_control_plane_hears_of_it():
    system = Recorded()

    async def bad(client):
        http = client._http
        answers = [
            await http.post("/v1/skills/s/rollback", json={"version": "1", "force": True}),
            await http.post("/v1/skills/s/promote", json={}),
            await http.post(
                "/v1/skills/s/optimise",
                json={"suite": {"name": "x", "cases": [SUITE_CASE]}, "variants": 6},
            ),
            await http.get("/v1/skills/s", params={"version": "v" * 17}),
        ]
        return [(a.status_code, a.headers["content-type"]) for a in answers]

    answers = _over_http(system, ADMIN, bad)
    assert answers == [(422, "application/problem+json")] * 4
    assert system.calls == []


def test_a_declaration_that_cannot_travel_is_refused():
    @operation("GET", "/v1/x/{n}", cli="x")
    async def by_number(at: At, n: int) -> None:
        """A path segment must be text."""

    @operation("GET", "/v1/y", cli="y")
    async def with_model(at: At, spec: SkillSpec) -> None:
        """A model cannot be a query."""

    for op in (by_number, with_model):
        assert isinstance(op, Operation)
        with pytest.raises(TypeError):
            _ = op.hints
    with pytest.raises(ValueError, match="not an HTTP method"):
        operation("TRACE", "/v1/z", cli="z")(with_model.run)


def test_the_drivers_old_way_of_giving_a_suite_still_works_and_warns(tmp_path):
    from raytroupe.runtime.driver import _suite_read  # noqa: PLC0415

    path = tmp_path / "suite.yaml"
    path.write_text(
        "name: from-file\ncases:\n  - {id: c, task: t, expect: [{kind: contains, values: [t]}]}\n"
    )
    with pytest.warns(DeprecationWarning, match="EvalSuite"):
        arguments = _suite_read({"name": "s", "suite": str(path)})
    assert arguments["suite"].name == "from-file"
    given = EvalSuite.model_validate({"name": "x", "cases": [SUITE_CASE]})
    assert _suite_read({"suite": given}) == {"suite": given}  # no warning: the new way


class RecordedExperiments:
    """The control plane's experiment calls, recorded."""

    @property
    def evolution(self):  # the desk's evolution calls: recorded by the same object
        return self

    def __init__(self):
        self.calls = []

    def _info(self, spec):
        return ExperimentInfo(
            spec=spec, status="running", started_at=1.0, arms=(), samples_per_arm=10
        )

    async def start_experiment(self, spec):
        self.calls.append(("start_experiment", spec))
        return self._info(spec)

    async def experiments(self):
        self.calls.append(("experiments",))
        return []

    async def experiment(self, name):
        self.calls.append(("experiment", name))
        return self._info(EXPERIMENT)

    async def stop_experiment(self, name, *, by):
        self.calls.append(("stop_experiment", name, by))
        return self._info(EXPERIMENT)


EXPERIMENT = ExperimentSpec.model_validate({
    "name": "ab-1", "skill": "s", "arms": [{"version": "1"}, {"version": "2"}],
})  # fmt: skip


def test_experiments_take_a_spec_or_its_fields_and_names_that_are_names():
    fields = EXPERIMENT.model_dump(mode="json")

    async def calls(client):
        await client.start_experiment(fields)
        await client.experiments()
        await client.experiment("ab-1")
        await client.stop_experiment("ab-1")
        bad = await client._http.get("/v1/experiments/a%20b")  # not a name
        return bad.status_code

    remote = RecordedExperiments()
    assert _over_http(remote, ADMIN, calls) == 422
    local = RecordedExperiments()
    driver = _Driver(local, admin=True)
    driver.start_experiment(fields)
    driver.experiments()
    driver.experiment("ab-1")
    driver.stop_experiment("ab-1")
    with pytest.raises(InvalidInput):
        driver.experiment("a b")
    assert remote.calls[:3] == local.calls[:3] == [
        ("start_experiment", EXPERIMENT), ("experiments",), ("experiment", "ab-1")
    ]  # fmt: skip
    assert (remote.calls[3][2], local.calls[3][2]) == ("api:boss", "driver")

    async def refused(client):
        with pytest.raises(Forbidden):
            await client.experiments()

    _over_http(RecordedExperiments(), USER, refused)


class RecordedPolicies:
    """The control plane's policy calls, recorded: ``acme`` has a policy of its own."""

    def __init__(self):
        self.calls = []
        self.set = {"*": TenantPolicy(), "acme": TenantPolicy(inline_teams=False)}

    async def policy(self, tenant):
        self.calls.append(("policy", tenant))
        return self.set.get(tenant, self.set["*"])

    async def policies(self):
        self.calls.append(("policies",))
        return dict(self.set)

    async def put_policy(self, tenant, policy):
        self.calls.append(("put_policy", tenant, policy))
        if policy is None:
            self.set.pop(tenant, None)
        else:
            self.set[tenant] = policy


def test_policies_are_set_read_and_dropped_alike_and_a_tenant_reads_only_its_own():
    strict = {"inline_teams": False, "tools": ["calculator"]}

    async def admin(client):
        put = await client.put_policy("globex", strict)
        everyone = await client.policies()
        await client.delete_policy("globex")
        bad = await client._http.put("/v1/tenants/a%20b/policy", json=strict)
        return put, everyone, bad.status_code

    remote = RecordedPolicies()
    put, everyone, bad = _over_http(remote, ADMIN, admin)
    assert put == TenantPolicy.model_validate(strict)
    assert set(everyone) == {"*", "acme", "globex"}
    assert "globex" not in remote.set
    assert bad == 422
    local = RecordedPolicies()
    driver = _Driver(local, admin=True)
    assert driver.put_policy("globex", strict) == put
    driver.policies()
    driver.delete_policy("globex")
    assert local.calls == remote.calls

    async def tenant(client):
        mine = await client.policy()
        with pytest.raises(Forbidden):
            await client.put_policy("acme", {})
        with pytest.raises(Forbidden):
            await client.policies()
        return mine

    system = RecordedPolicies()
    assert _over_http(system, USER, tenant) == system.set["acme"]
    assert system.calls == [("policy", "acme")]
    view = _Driver(RecordedPolicies(), admin=False)
    assert view.policy() == view.at.system.set["acme"]
    with pytest.raises(Forbidden):
        view.put_policy("acme", {})


class RecordedEvals:
    """The control plane's eval calls, recorded."""

    RUN = "eval-0123456789abcdef"

    @property
    def evolution(self):  # the desk's evolution calls: recorded by the same object
        return self

    def __init__(self):
        self.calls = []

    async def start_eval(self, suite, **options):
        self.calls.append(("start_eval", suite.name, options))
        return self.RUN

    async def eval_runs(self, *, tenant=None):
        self.calls.append(("eval_runs", tenant))
        return []

    async def eval_run(self, run_id, timeout=0.0, *, tenant=None):
        self.calls.append(("eval_run", run_id, timeout, tenant))
        raise JobNotFound(f"no eval run {run_id!r}", job_id=run_id)

    async def compare_evals(self, base, other, *, tenant=None):
        self.calls.append(("compare_evals", base, other, tenant))
        raise JobNotFound(f"no eval run {base!r}", job_id=base)


def test_eval_runs_start_as_the_callers_tenant_and_are_read_within_it():
    suite = {"name": "suite-e", "cases": [SUITE_CASE]}
    run = RecordedEvals.RUN

    async def calls(client):
        accepted = await client.start_eval(suite, skill="s", concurrency=2)
        await client.evals()
        with pytest.raises(JobNotFound):
            await client.eval_run(run, wait=1.5)
        with pytest.raises(JobNotFound):
            await client.compare_evals(run, run)
        bad = [
            (await client._http.get("/v1/evals/not-a-run")).status_code,
            (await client._http.get(f"/v1/evals/{run}", params={"wait": 61})).status_code,
            (
                await client._http.post("/v1/evals", json={"suite": suite, "concurrency": 65})
            ).status_code,
        ]
        return accepted, bad

    tenant = RecordedEvals()
    accepted, bad = _over_http(tenant, USER, calls)
    assert (accepted.id, accepted.url) == (run, f"/v1/evals/{run}")
    assert bad == [422, 422, 422]
    options = {"skill": "s", "team": None, "tenant": "acme", "admin": False,
               "concurrency": 2, "budget": None}  # fmt: skip
    assert tenant.calls == [
        ("start_eval", "suite-e", options), ("eval_runs", "acme"),
        ("eval_run", run, 1.5, "acme"), ("compare_evals", run, run, "acme"),
    ]  # fmt: skip
    admin = RecordedEvals()
    driver = _Driver(admin, admin=True)
    assert driver.start_eval(suite, skill="s", concurrency=2) == accepted
    driver.evals()
    assert admin.calls == [
        ("start_eval", "suite-e", {**options, "admin": True}), ("eval_runs", None),
    ]  # fmt: skip


class RecordedTeams:
    """Two registered teams, ``open`` and ``closed``; the user's tenant may run ``open`` only."""

    def __init__(self):
        self.calls = []
        model = {"provider": "offline", "latency_s": 0.0}
        self.found = {
            name: TeamSpec.model_validate(
                {
                    "name": name,
                    "agents": [{"name": f"{name}-a", "role": "r"}],
                    "models": {"private": model},
                }
            )
            for name in ("open", "closed")
        }

    async def teams(self):
        return dict(self.found)

    async def team(self, name):
        return self.found[name]

    async def policy(self, tenant):
        return TenantPolicy(teams=("open",)) if tenant == "acme" else TenantPolicy()

    async def agents(self):
        return [AgentInfo(name=f"{n}-a", team=n, role="r", model="default") for n in self.found]

    async def delete_team(self, name):
        self.calls.append(("delete_team", name))
        return self.found.pop(name)


def test_a_tenant_sees_only_the_teams_it_may_run_without_their_models():
    async def tenant(client):
        listed = await client.teams()
        with pytest.raises(TeamNotFound):
            await client.team("closed")
        with pytest.raises(Forbidden):
            await client.delete_team("open")
        return listed, await client.team("open"), await client.agents()

    system = RecordedTeams()
    listed, shown, agents = _over_http(system, USER, tenant)
    assert list(listed) == ["open"]
    assert listed["open"].models == {} == shown.models  # the operator's endpoints stay hidden
    assert [a.team for a in agents] == ["open"]
    assert system.calls == []
    view = _Driver(RecordedTeams(), admin=False)
    assert list(view.teams()) == ["open"]
    with pytest.raises(TeamNotFound):
        view.team("closed")
    driver = _Driver(RecordedTeams(), admin=True)
    assert set(driver.teams()) == {"open", "closed"}
    assert driver.team("closed").models  # an admin sees a team whole
    assert driver.delete_team("closed").name == "closed"
