"""The adversarial suite: two tenants and an admin against a real Serve on 127.0.0.1.

A loopback listener stands in for the attacker's server (and for the cluster's internals).
Every way a tenant could make the cluster send a secret, call an address of its choosing, use
a tool or model outside its policy, reach another tenant's job, agent or usage, or spend past
its budget is tried over HTTP; each is refused with a typed problem document, nothing reaches
the listener, and nothing is provisioned. The tenants' policies come from the API config
(``tests/support/http_api.py``): ``red`` may run inline teams on the ``default`` and
``offline`` aliases with the calculator; ``blue`` may only run one registered team.
"""

from __future__ import annotations

import json
import uuid

import httpx
import pytest
import ray
from hypothesis import given, settings
from hypothesis import strategies as st

from raytroupe import runtime
from raytroupe.protocols import ErrorCode, scoped_name, tenant_scope
from tests.support.http_api import ADMIN_KEY, BLUE_KEY, RED_KEY, RED_POLICY
from tests.support.keys import TEST_KEY, TEST_KEY_ENV
from tests.support.listener import listening

# system tier: a deeper scenario than the quick tier's core (docs/testing.md)
pytestmark = pytest.mark.system

PROBLEM = "application/problem+json"
RED_POLICY_NAME = "tenant policy of 'red'"
REGISTERED = "trust-registered"


@pytest.fixture(scope="module")
def attacker():
    with listening() as listener:
        yield listener


@pytest.fixture(scope="module")
def registered(rt):
    """A team the operator registered; tenants must not be able to touch its agents."""
    team = runtime.Team(
        name=REGISTERED,
        planner_model="offline",
        agents=[runtime.AgentSpec(name="trust-ada", role="worker",
                                  instructions="THE OPERATOR'S INSTRUCTIONS")],
    )  # fmt: skip
    rt.put_team(team.spec())
    yield team.spec()
    rt.delete_team(REGISTERED)


def _agent(name="a", **fields):
    return {"name": name, "role": fields.pop("role", "worker"), **fields}


def _team(*agents, **fields):
    return {"name": fields.pop("name", f"t-{uuid.uuid4().hex[:6]}"),
            "agents": list(agents) or [_agent()], **fields}  # fmt: skip


def _actors() -> set[str]:
    return {a["name"] for a in ray.util.list_named_actors(all_namespaces=True)}


def _refused(response, field, *, status=403, code="forbidden", policy=RED_POLICY_NAME):
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == PROBLEM
    body = response.json()
    assert body["code"] == code
    if field is not None:
        assert body["field"] == field, body
    if policy is not None:
        assert body["policy"] == policy
    assert "Traceback" not in response.text
    return body


def _client(api, key):
    return httpx.Client(base_url=api.url, headers={"Authorization": f"Bearer {key}"}, timeout=60)


def _submit(client, team, task="Say hi.", **extra):
    return client.post("/v1/jobs", json={"task": task, "team": team, **extra})


def _finish(client, job_id):
    with client.stream("GET", f"/v1/jobs/{job_id}/events") as stream:
        "".join(stream.iter_text())
    return client.get(f"/v1/jobs/{job_id}").json()


# -- secrets and outbound calls --------------------------------------------------------------


def _models_pointing_at(url):
    kinds = [
        ("openai_compatible", {"base_url": f"{url}/v1"}),
        ("openai", {"base_url": f"{url}/v1"}),
        ("anthropic", {"base_url": url}),
    ]
    for env in (TEST_KEY_ENV, "TROUPE_API_KEYS", "OPENAI_API_KEY", "HOME"):
        for provider, endpoint in kinds:
            yield {"provider": provider, "model": "m", "api_key_env": env, **endpoint}
    yield {"provider": "openai_compatible", "model": "m", "base_url": "http://169.254.169.254/v1"}
    yield {"provider": "offline", "input_usd_per_mtok": 0.0, "output_usd_per_mtok": 0.0}


def test_no_inline_model_reaches_a_secret_or_an_address_of_the_tenants_choice(rt, api, attacker):
    before_jobs, before_actors = rt.jobs(), _actors()
    with _client(api, RED_KEY) as red:
        for n, model in enumerate(_models_pointing_at(attacker.url)):
            team = _team(_agent(model="evil"), models={"evil": model})
            _refused(_submit(red, team), "team.models.evil")
            # a route over it, or the planner on it, is the same refusal
            team = _team(_agent(), models={"evil": model}, planner_model="evil")
            body = _refused(_submit(red, team), "team.models.evil")
            assert "team.planner_model: alias not allowed" in " ".join(body["problems"]), n
    assert not attacker.reached
    assert rt.jobs() == before_jobs  # no job was even journaled
    assert _actors() <= before_actors  # nothing was provisioned (others' idle teams may go)


@pytest.mark.parametrize(
    "tool", ["python", "shell", "http_get", "file_write", "file_read", "delegate", "handoff",
             "journal_append", "echo", "add", "info",  # built-ins, a function tool, MCP tools
             "a2a_shouter"],  # a remote A2A agent
)  # fmt: skip
def test_a_tool_outside_the_tenants_policy_is_refused_before_anything_runs(rt, api, tool):
    before = _actors()
    with _client(api, RED_KEY) as red:
        body = _refused(
            _submit(red, _team(_agent(tools=["calculator", tool]))), "team.agents.0.tools"
        )
    assert tool in body["detail"]
    assert _actors() <= before  # nothing started (another test's idle team may go meanwhile)


@pytest.mark.parametrize(
    ("team", "extra", "field"),
    [
        (_team(_agent(model="gpt-4o")), {}, "team.agents.0.model"),
        (_team(_agent(max_turns=99)), {}, "team.agents.0.max_turns"),
        (_team(_agent(num_cpus=2.0)), {}, "team.agents.0.num_cpus"),
        (_team(_agent(max_concurrency=200)), {}, "team.agents.0.max_concurrency"),
        (_team(*(_agent(f"a{n}") for n in range(4))), {}, "team.agents"),
        (_team(_agent(), max_parallel=1000), {}, "team.max_parallel"),
        (_team(_agent(), subtask_timeout_s=86_400), {}, "team.subtask_timeout_s"),
        (_team(_agent(), budget={"tokens": 10**9}), {}, "team.budget"),
        (_team(_agent()), {"budget": {"tokens": 10**9}}, "budget"),
        (_team(_agent()), {"budget": {"usd": 5.0}}, "budget"),
        (
            _team(_agent(), plan=[{"id": "s", "role": "worker", "instructions": "x",
                                   "redundancy": 16}]),
            {},
            "team.plan.0.redundancy",
        ),
    ],
)  # fmt: skip
def test_caps_of_the_policy_hold(rt, api, team, extra, field):
    before = rt.jobs()
    with _client(api, RED_KEY) as red:
        _refused(_submit(red, team, **extra), field)
    assert rt.jobs() == before


def test_an_image_url_the_model_server_would_fetch_is_refused(rt, api, attacker):
    image = {"name": "x.png", "media_type": "image/png", "url": f"{attacker.url}/x.png"}
    with _client(api, RED_KEY) as red:
        _refused(_submit(red, _team(), attachments=[image]), "attachments.0.url")
    assert not attacker.reached


def test_an_admin_cannot_make_the_pool_read_a_variable_or_call_inside_either(api, attacker):
    """Admin keys keep full control of teams, but not of the operator's secrets or network."""
    models = {
        "env": ({"provider": "openai_compatible", "model": "m", "base_url": f"{attacker.url}/v1",
                 "api_key_env": "TROUPE_API_KEYS"}, "api_key_env"),
        "meta": ({"provider": "openai_compatible", "model": "m",
                  "base_url": "http://169.254.169.254/v1"}, "base_url"),
        "lan": ({"provider": "openai_compatible", "model": "m", "base_url": "http://10.0.0.7/v1"},
                "base_url"),
        # a local model starts a process on the cluster, from a path: the operator's alone
        "proc": ({"provider": "local", "gguf": "/etc/passwd.gguf", "binary": "/bin/sh"},
                 "provider"),
    }  # fmt: skip
    with _client(api, ADMIN_KEY) as admin:
        for alias, (model, field) in models.items():
            name = f"adm-{alias}-{uuid.uuid4().hex[:4]}"
            team = _team(_agent(name=f"{name}-a", model=alias), name=name, models={alias: model})
            body = _refused(admin.post("/v1/teams", json=team), None, status=422, code="config",
                            policy=None)  # fmt: skip
            assert field in body["detail"]
            assert admin.get(f"/v1/teams/{name}").status_code == 404
    assert not attacker.reached
    started = [a["name"] for a in ray.util.list_named_actors(all_namespaces=True)]
    assert not [n for n in started if n.startswith("model/proc")]


# -- names: no tenant reaches another's agents, or a registered team's -------------------------


def test_inline_names_are_scoped_so_no_tenant_reconfigures_anothers_agents(rt, api, registered):
    clash = _team(_agent("trust-ada", instructions="EVIL"), name=REGISTERED)
    with _client(api, RED_KEY) as red:
        response = _submit(red, clash, task="- one")
        assert response.status_code == 202, response.text
        job = _finish(red, response.json()["id"])
    assert job["status"] == "succeeded", job
    [sub] = job["result"]["subtasks"]
    assert sub["agent"] == "trust-ada"  # as red wrote it; the actor is red's own (below)
    # the registered team and its agent are as the operator left them
    assert rt.teams()[REGISTERED] == registered
    spec = ray.get(rt.actor("agent/trust-ada").registration.remote())
    assert spec == [f"{REGISTERED}.worker"]
    assert f"agent/{scoped_name('red', 'trust-ada')}" in _actors()
    assert not any(a.startswith(f"agent/{tenant_scope('blue')}") for a in _actors())


def test_another_tenants_job_is_not_there_at_all(rt, api, registered):
    with _client(api, RED_KEY) as red, _client(api, BLUE_KEY) as blue:
        job_id = _submit(red, _team(), task="- one").json()["id"]
        _finish(red, job_id)
        for path in ("", "/events", "/approvals"):
            _refused(blue.get(f"/v1/jobs/{job_id}{path}"), None, status=404,
                     code="job_not_found", policy=None)  # fmt: skip
        _refused(blue.post(f"/v1/jobs/{job_id}/cancel"), None, status=404, code="job_not_found",
                 policy=None)  # fmt: skip
        decided = blue.post(f"/v1/jobs/{job_id}/approvals/x", json={"approved": True})
        _refused(decided, None, status=404, code="job_not_found", policy=None)
        assert job_id not in blue.get("/v1/jobs").json()
        assert all(row["job_id"] != job_id for row in blue.get("/v1/usage").json())
        _refused(blue.get("/v1/usage", params={"job_id": job_id}), None, status=404,
                 code="job_not_found", policy=None)  # fmt: skip
        assert any(row["job_id"] == job_id for row in red.get("/v1/usage").json())


def test_a_tenant_sees_only_the_teams_it_may_run_without_their_models(api, registered):
    with _client(api, ADMIN_KEY) as admin:
        name = f"priv-{uuid.uuid4().hex[:6]}"
        secret_team = _team(_agent(f"{name}-a", model="m"), name=name,
                            models={"m": {"provider": "offline", "latency_s": 0.0}})  # fmt: skip
        assert admin.post("/v1/teams", json=secret_team).status_code == 201
        try:
            with _client(api, RED_KEY) as red, _client(api, BLUE_KEY) as blue:
                assert red.get(f"/v1/teams/{name}").json()["models"] == {}
                assert set(blue.get("/v1/teams").json()) == {REGISTERED}
                _refused(blue.get(f"/v1/teams/{name}"), None, status=404, code="team_not_found",
                         policy=None)  # fmt: skip
                models = [m["id"] for m in blue.get("/v1/models").json()["data"]]
                teams = [m for m in models if not m.startswith("skill:") and m != "auto"]
                assert teams == [REGISTERED]
                assert models[-1] == "auto"  # routed among what blue may run
                assert f"skill:{name}" not in models
                # blue may not run the team by name, over either API
                _refused(_submit(blue, name), "team", policy="tenant policy of 'blue'")
                chat = blue.post("/v1/chat/completions", json={
                    "model": name, "messages": [{"role": "user", "content": "hi"}]})  # fmt: skip
                _refused(chat, "team", policy="tenant policy of 'blue'")
                assert admin.get(f"/v1/teams/{name}").json()["models"] != {}
        finally:
            admin.delete(f"/v1/teams/{name}")


def test_only_an_admin_changes_policies_and_a_change_applies_at_once(api):
    loose = RED_POLICY.model_copy(update={"tools": ("calculator", "file_read")})
    team = _team(_agent(tools=["file_read"]))
    with _client(api, RED_KEY) as red, _client(api, ADMIN_KEY) as admin:
        assert red.get("/v1/policy").json() == json.loads(RED_POLICY.model_dump_json())
        attempt = red.put("/v1/tenants/red/policy", json=loose.model_dump(mode="json"))
        _refused(attempt, "key", policy="admin keys only")
        _refused(_submit(red, team), "team.agents.0.tools")
        assert admin.put("/v1/tenants/red/policy", json=loose.model_dump(mode="json")).is_success
        try:
            assert _submit(red, team).status_code == 202
        finally:
            admin.put("/v1/tenants/red/policy", json=RED_POLICY.model_dump(mode="json"))
        _refused(_submit(red, team), "team.agents.0.tools")


# -- money -----------------------------------------------------------------------------------


def test_a_tenant_job_runs_under_its_ceiling_when_it_names_no_budget(api, registered):
    """blue's ceiling is 1,500 tokens: its job gets that budget, and stops at it."""
    with _client(api, BLUE_KEY) as blue:
        task = "\n".join(f"- What does note {n} say?" for n in range(12))
        response = _submit(blue, REGISTERED, task=task)
        assert response.status_code == 202, response.text
        job = _finish(blue, response.json()["id"])
    assert job["status"] == "failed", (job["result"]["usage"], len(job["result"]["subtasks"]))
    assert job["result"]["error"]["code"] == ErrorCode.BUDGET_EXCEEDED.value
    usage = job["result"]["usage"]
    assert usage["prompt_tokens"] + usage["completion_tokens"] <= 1_500


# -- the same policies through the driver --------------------------------------------------


def test_a_driver_acting_for_a_tenant_meets_the_same_policy(rt, attacker, registered):
    red = rt.as_tenant("red")
    evil = runtime.Team(
        name="evil",
        agents=[runtime.AgentSpec(name="e", role="worker", model="evil")],
        models={"evil": runtime.OpenAICompatibleModel(
            model="m", base_url=f"{attacker.url}/v1", api_key_env=TEST_KEY_ENV)},
    )  # fmt: skip
    with pytest.raises(runtime.Forbidden) as caught:
        red.submit("Say hi.", evil)
    assert caught.value.detail["field"] == "team.models.evil"
    assert TEST_KEY not in str(caught.value)
    with pytest.raises(runtime.Forbidden):
        red.submit("Say hi.", "trust-registered", budget=runtime.Budget(tokens=10**9))
    ok = runtime.Team(name="mine", agents=[runtime.AgentSpec(name="trust-ada", role="worker")])
    result = red.submit("- one", ok).result(timeout=60)
    assert result.subtasks[0].agent == "trust-ada"  # as red wrote it
    assert result.team == "mine"
    with pytest.raises(runtime.JobNotFound):
        rt.as_tenant("blue").job(result.job_id)
    assert rt.as_tenant("blue").usage() == [] or all(
        row.job_id != result.job_id for row in rt.as_tenant("blue").usage()
    )
    assert {row.job_id for row in red.usage(result.job_id)} == {result.job_id}
    assert not attacker.reached


# -- property: no generated document gets past the policy, over HTTP -----------------------

_ENVS = (TEST_KEY_ENV, "TROUPE_API_KEYS", "OPENAI_API_KEY", "PATH")
_PROVIDERS = ("openai", "openai_compatible", "anthropic")
_TOOLS = ("calculator", "python", "shell", "http_get", "file_read", "file_write", "delegate",
          "journal_append", "echo", "info")  # fmt: skip


def _documents(url):
    names = st.from_regex(r"[a-z][a-z0-9]{0,8}", fullmatch=True)
    model = st.fixed_dictionaries(
        {"provider": st.sampled_from(_PROVIDERS), "model": names,
         "base_url": st.sampled_from((f"{url}/v1", url, "http://169.254.169.254/v1")),
         "api_key_env": st.sampled_from(_ENVS)},
    )  # fmt: skip
    agent = st.fixed_dictionaries(
        {"name": names, "role": st.just("worker"),
         "model": st.sampled_from(("default", "offline", "evil")),
         "tools": st.lists(st.sampled_from(_TOOLS), max_size=2, unique=True)},
    )  # fmt: skip
    return st.fixed_dictionaries(
        {"name": names,
         "agents": st.lists(agent, min_size=1, max_size=3, unique_by=lambda a: a["name"]),
         "models": st.dictionaries(st.just("evil"), model, max_size=1)},
    )  # fmt: skip


@pytest.fixture(scope="module")
def red_client(api):
    with _client(api, RED_KEY) as client:
        yield client


def test_no_generated_team_document_gets_a_secret_or_a_call_out_past_the_policy(
    attacker, red_client
):
    accepted = []

    @settings(max_examples=40, deadline=None, derandomize=True)
    @given(document=_documents(attacker.url))
    def submit(document):
        response = _submit(red_client, document, task="- one")
        assert response.status_code in (202, 403, 422), response.text
        if response.status_code == 403:
            assert response.json()["policy"] == RED_POLICY_NAME
        if response.status_code == 202:
            accepted.append((response.json()["id"], {a["name"] for a in document["agents"]}))

    submit()
    for job_id, names in accepted:  # the accepted ones ran on the operator's aliases
        job = _finish(red_client, job_id)
        assert job["status"] in ("succeeded", "failed")
        # by the document's own agents, named as red wrote them (their actors are red's)
        assert all(s["agent"] is None or s["agent"] in names
                   for s in job["result"]["subtasks"])  # fmt: skip
    assert accepted  # the strategy does produce admissible teams
    assert not attacker.reached
