"""raytroupe.Client and AsyncClient against the real Serve application on 127.0.0.1.

Each call goes through the guard, the routes and the system actors, as a user's would; the
errors are the typed ones the problems name, and what an attacker tries gets nothing.
"""

from __future__ import annotations

import asyncio

import pytest

import raytroupe
from raytroupe import runtime
from raytroupe.protocols import (
    Conflict,
    Forbidden,
    InvalidRequest,
    JobCancelled,
    JobNotFound,
    JobTimeout,
    TeamNotFound,
    TeamSpec,
    Unauthorized,
)
from raytroupe.protocols.http import DeadLetterView, JobAccepted, Me
from tests.support.http_api import (
    ADMIN_KEY,
    OTHER_KEY,
    RED_KEY,
    RED_POLICY,
    USER_KEY,
    register,
    wire_team,
)
from tests.support.wire_server import Default, Reply, WireServer

# system tier: a deeper scenario than the quick tier's core (docs/testing.md)
pytestmark = pytest.mark.system


@pytest.fixture(scope="module")
def wire():
    with WireServer() as server:
        yield server


def _team(name: str, *, latency_s: float = 0.0) -> runtime.Team:
    models = {f"{name}-m": runtime.OfflineModel(latency_s=latency_s)} if latency_s else {}
    model = f"{name}-m" if latency_s else "default"
    agents = [runtime.AgentSpec(name=f"{name}-a", role="worker", model=model)]
    return runtime.Team(name=name, planner_model="offline", agents=agents, models=models)


def _client(api, key=USER_KEY):
    return raytroupe.Client(api.url, key, timeout=60)


def _held(api_client, job_id):
    """Follow the job's events to its held tool call; the pending approval."""
    for event in api_client.events(job_id):
        if event.type == "approval_requested":
            break
    (pending,) = api_client.approvals(job_id)
    return pending


def test_a_job_is_submitted_followed_to_its_end_and_read_back(api):
    team = register(api, _team("client-basic"))
    with _client(api) as client:
        accepted = client.submit("Summarize:\n- actors\n- tasks", team=team)
        events = list(client.events(accepted.id))
        result = client.result(accepted.id)
        view = client.job(accepted.id)
        so_far = list(client.events(accepted.id, follow=False))
        after = list(client.events(accepted.id, after=events[-2].seq))
        listed = client.jobs(limit=1000)
        found = client.jobs(q="SUMMARIZE:", limit=5)
        summary = client.summary(accepted.id)
        trace = client.trace(accepted.id)
        statuses = client.statuses()
        usage = client.usage(accepted.id)
        daily = client.daily_usage()
        with pytest.warns(DeprecationWarning, match=r"daily_usage\(\) for usage by day"):
            older = client.usage(daily=True)

    assert isinstance(accepted, JobAccepted)
    assert accepted.url == f"/v1/jobs/{accepted.id}"
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert events[0].type == "job_submitted"
    assert events[-1].type == "job_succeeded"
    assert [e for e in events if e.terminal] == [events[-1]]
    assert result.status == "succeeded"
    assert result.answer
    assert view.result == result
    assert so_far == events
    assert after == [events[-1]]
    assert accepted.id in {j.id for j in listed}
    assert [j.id for j in found][:1] == [accepted.id]
    assert (summary.status, summary.team, summary.submitted_by) == ("succeeded", team, "acme-user")
    assert trace.spans[0].kind == "job"
    assert statuses[accepted.id] == "succeeded"
    assert usage
    assert {row.job_id for row in usage} == {accepted.id}
    assert {row.tenant for row in daily} == {"acme"}
    assert {row.tenant for row in older} == {"acme"}  # the older form: the same rows


def test_a_running_job_times_out_for_its_waiter_and_is_cancelled(api):
    team = register(api, _team("client-cancel", latency_s=30))
    with _client(api) as client:
        job_id = client.submit("Slowly: 1) one 2) two", team=team).id
        for event in client.events(job_id):
            if event.type == "subtask_started":
                break
        with pytest.raises(JobTimeout) as waited:
            client.result(job_id, timeout=0.5)
        live = list(client.events(job_id, follow=False))
        cancelled = client.cancel(job_id)
        with pytest.raises(JobCancelled) as ended:
            client.result(job_id)
        with pytest.raises(Conflict) as again:
            client.cancel(job_id)

    assert waited.value.detail["job_id"] == job_id
    assert not any(e.terminal for e in live)
    assert (cancelled.id, cancelled.cancelled, cancelled.status) == (job_id, True, "cancelled")
    assert ended.value.detail["result"].status == "cancelled"
    assert again.value.detail["status"] == 409


def test_held_tool_calls_are_approved_and_rejected(api, wire):
    wire.reset()
    wire.script(
        Reply.tool("echo", {"text": "ship v3"}), Default(), Reply.tool("echo", {"text": "rm"})
    )
    team = register(api, wire_team(wire, "client-approve", ["echo"]))
    with _client(api) as client, _client(api, OTHER_KEY) as globex:
        first = client.submit("Echo the release.", team=team).id
        held = _held(client, first)
        everyone = client.approvals()
        theirs = globex.approvals()
        approved = client.approve(first, held.approval_id, "reviewed")
        done = client.result(first)
        with pytest.raises(JobNotFound):
            client.approve(first, held.approval_id)

        second = client.submit("Echo the cleanup.", team=team).id
        refused = _held(client, second)
        rejected = client.reject(second, refused.approval_id, "not on prod")
        after = client.result(second)
        left = client.approvals(second)

    assert (held.tool, held.arguments, held.job_id) == ("echo", {"text": "ship v3"}, first)
    assert held in everyone
    assert all(p.job_id != first for p in theirs)
    assert (approved.job_id, approved.approval_id, approved.approved) == (
        first, held.approval_id, True
    )  # fmt: skip
    assert done.status == "succeeded"
    assert wire.requests[1].body["messages"][-1]["content"] == "ship v3"
    assert refused.arguments == {"text": "rm"}
    assert rejected.approved is False
    assert after.status == "succeeded"
    assert "not on prod" in str(wire.requests[-1].body["messages"])
    assert left == []


def test_teams_are_applied_read_and_deleted_by_an_admin_only(api):
    spec = _team("client-teams").spec()
    with _client(api, ADMIN_KEY) as admin, _client(api) as user:
        applied = admin.apply_team(spec)
        again = admin.apply_team(spec.model_dump(mode="json"))
        read = admin.team(spec.name)
        listed = admin.teams()
        agents = [a for a in admin.agents() if a.team == spec.name]
        with pytest.raises(Forbidden) as forbidden:
            user.apply_team(spec)
        with pytest.raises(InvalidRequest) as invalid:
            admin.apply_team({"name": "client-bad", "agents": "not a list"})
        deleted = admin.delete_team(spec.name)
        with pytest.raises(TeamNotFound) as gone:
            admin.team(spec.name)

    assert isinstance(applied, TeamSpec)
    assert applied == again == read == listed[spec.name] == deleted
    assert [a.name for a in agents] == ["client-teams-a"]
    assert forbidden.value.detail["status"] == 403
    assert forbidden.value.detail["policy"] == "admin keys only"
    assert invalid.value.detail["status"] == 422
    assert any("agents" in p for p in invalid.value.detail["problems"])
    assert gone.value.detail["status"] == 404


def test_the_caller_its_models_and_the_operators_pages(api):
    team = register(api, _team("client-models"))
    with _client(api) as user, _client(api, ADMIN_KEY) as admin, _client(api, RED_KEY) as red:
        me = user.me()
        models = user.models()
        model = user.model(team)
        letters = admin.dead_letters(limit=5)
        with pytest.raises(Forbidden) as refused:
            user.dead_letters()
        health = user.health()
        ready = user.ready()
        policy = red.policy()

    assert me == Me(name="acme-user", tenant="acme", admin=False)
    assert {team, "auto"} <= set(models)
    assert model == team
    assert all(isinstance(letter, DeadLetterView) for letter in letters)
    assert len(letters) <= 5
    assert refused.value.detail["status"] == 403
    assert health.status == "ok"
    assert ready.status == "ready"
    assert all(ready.checks.values())
    assert policy == RED_POLICY


def test_a_wrong_key_and_another_tenants_job_get_nothing(api):
    team = register(api, _team("client-tenants"))
    with _client(api) as acme:
        job_id = acme.submit("Private: the code word is MARZIPAN.", team=team).id
        acme.result(job_id)
    with _client(api, "rt-not-a-key") as stranger, _client(api, OTHER_KEY) as globex:
        with pytest.raises(Unauthorized) as unauthorized:
            stranger.jobs()
        stolen = []
        for attempt in (
            lambda: globex.job(job_id),
            lambda: list(globex.events(job_id)),
            lambda: globex.result(job_id),
            lambda: globex.cancel(job_id),
            lambda: globex.trace(job_id),
            lambda: globex.usage(job_id),
        ):
            with pytest.raises(JobNotFound) as caught:
                attempt()
            stolen.append(caught.value)

    assert unauthorized.value.detail["status"] == 401
    assert unauthorized.value.detail["request_id"]
    for error in stolen:
        assert error.detail["status"] == 404
        assert "MARZIPAN" not in str(error)
        assert "MARZIPAN" not in str(error.detail)


def test_the_async_client_submits_follows_and_waits(api):
    team = register(api, _team("client-async"))

    async def run():
        async with raytroupe.AsyncClient(api.url, USER_KEY, timeout=60) as client:
            accepted = await client.submit("List: - one. - two.", team=team)
            events = [event async for event in client.events(accepted.id)]
            result = await client.result(accepted.id)
            me = await client.me()
            with pytest.raises(JobNotFound):
                await client.job("no-such-job")
            return accepted, events, result, me

    accepted, events, result, me = asyncio.run(run())

    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert events[-1].type == "job_succeeded"
    assert result.job_id == accepted.id
    assert result.status == "succeeded"
    assert me.tenant == "acme"


def test_sessions_knowledge_feedback_and_policies_through_the_client(api):
    team = register(api, _team("client-more"))
    text = "Oolong tea is partly oxidised. Green tea is not oxidised at all."
    document = {"source": "tea.txt", "media_type": "text/plain", "content": text}
    with _client(api) as client, _client(api, ADMIN_KEY) as admin:
        session = client.create_session("client-chat", title="tea")
        job_id = client.submit("Say: - oolong.", team=team, session=session.id).id
        client.result(job_id)
        given = client.feedback(job_id, 0.75, "fine")
        kept = client.feedbacks(job_id)
        checkpoints = client.checkpoints(job_id)
        waiting = client.interrupts()
        turns = client.session(session.id).turns
        listed = [s.id for s in client.sessions()]
        client.delete_session(session.id)
        report = client.ingest("client-kb", [document])
        found = client.search("client-kb", "which tea is oxidised partly?", k=1)
        bases = [kb.name for kb in client.knowledge_bases()]
        stored = [d.source for d in client.documents("client-kb")]
        client.delete_document("client-kb", "tea.txt")
        client.drop_knowledge_base("client-kb")
        after = [kb.name for kb in client.knowledge_bases()]
        skills = client.skills()
        policies = admin.policies()

    assert session.title == "tea"
    assert [t.job_id for t in turns] == [job_id]
    assert "client-chat" in listed
    assert (given.score, given.comment, given.by) == (0.75, "fine", "acme-user")
    assert kept == [given]
    assert checkpoints == []
    assert all(w.job_id != job_id for w in waiting)
    assert report.kb == "client-kb"
    assert found.passages[0].source == "tea.txt"
    assert "client-kb" in bases
    assert stored == ["tea.txt"]
    assert "client-kb" not in after
    assert skills.problems == []  # a tenant's key is not shown skill files that failed
    assert policies["red"] == RED_POLICY
