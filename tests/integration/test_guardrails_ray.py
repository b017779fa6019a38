"""Guardrails on real jobs: input refused, tool calls and results and output redacted or tripped.

Each test's guardrail binds only its own team (the session's other tests run beside it) and is
unset at its end.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator

import pytest

from raytroupe import runtime
from raytroupe.protocols import ErrorCode, GuardrailTripped
from tests.support.guardrail_checks import NO_CODENAME
from tests.support.http_api import ADMIN_KEY, OTHER_KEY, USER_KEY, finished, register
from tests.support.ledger import TOOL_NAME, runs_by_token
from tests.support.wire_model import ToolCall as WireCall
from tests.support.wire_server import Reply, WireServer


@pytest.fixture(scope="module")
def wire():
    with WireServer() as server:
        yield server


@contextlib.contextmanager
def guardrail(rt, spec: dict[str, object]) -> Iterator[str]:
    name = f"g-{uuid.uuid4().hex[:8]}"
    rt.put_guardrail(name, spec)
    try:
        yield name
    finally:
        rt.delete_guardrail(name)


def offline_team(name: str) -> runtime.Team:
    return runtime.Team(name=name, planner_model="offline",
                        agents=[runtime.AgentSpec(name=f"{name}-a", role="worker")])  # fmt: skip


def wire_team(server: WireServer, name: str, *, stream: bool = False) -> runtime.Team:
    model = runtime.OpenAICompatibleModel(base_url=server.base_url_openai, model="wire-guard")
    return runtime.Team(
        name=name, planner_model="offline", models={f"{name}-m": model},
        agents=[runtime.AgentSpec(name=f"{name}-a", role="worker", model=f"{name}-m",
                                  tools=[TOOL_NAME], stream=stream)],
    )  # fmt: skip


def test_a_tripped_input_guardrail_refuses_the_job_and_binds_only_its_team(rt):
    team, other = f"guarded-{uuid.uuid4().hex[:6]}", f"free-{uuid.uuid4().hex[:6]}"
    spec = {"stages": ["input"], "rules": [{"kind": "callable", "target": NO_CODENAME}],
            "applies_to": {"teams": [team]}}  # fmt: skip
    with guardrail(rt, spec) as name:
        with pytest.raises(GuardrailTripped) as caught:
            rt.submit("Summarise the Bluebird launch.", team=offline_team(team))
        free = rt.submit("Summarise the Bluebird launch.", team=offline_team(other)).result(60)
        decisions = rt.guardrail_decisions()

    detail = caught.value.detail
    assert (detail["guardrail"], detail["rule"], detail["stage"]) == (name, "0:callable", "input")
    assert free.status == "succeeded"  # the other team is not bound
    (refused,) = [d for d in decisions if d.decision.guardrail == name]
    assert refused.job_id is None  # nothing was started
    assert refused.decision.action == "blocked"


def test_tool_arguments_and_the_answer_are_redacted_where_the_guardrail_says(rt, wire, tmp_path):
    team = f"redacting-{uuid.uuid4().hex[:6]}"
    ledger = tmp_path / "effects.log"
    wire.reset()
    call = WireCall(TOOL_NAME, {"ledger": str(ledger), "token": "jane@example.com"})
    wire.script(
        Reply(tool_calls=(call,)),
        Reply(text="Recorded it; write to jane@example.com or call +1 415 555 0132."),
    )
    spec = {"stages": ["tool_call", "output"], "action": "redact", "rules": [{"kind": "pii"}],
            "applies_to": {"teams": [team]}}  # fmt: skip
    with guardrail(rt, spec) as name:
        job = rt.submit("Record the contact.", team=wire_team(wire, team, stream=True))
        result = job.result(timeout=90)
        events = list(job.events(timeout=10))
        decisions = rt.guardrail_decisions(job_id=job.job_id)

    assert result.status == "succeeded"
    assert runs_by_token(ledger) == {"[EMAIL]": 1}  # the tool never saw the address
    assert "jane@example.com" not in result.answer
    assert "[EMAIL]" in result.answer
    assert "[PHONE]" in result.answer
    (sub,) = result.subtasks  # delivered with the answer: redacted as it is
    assert "jane@example.com" not in sub.output
    assert "[EMAIL]" in sub.output
    # the agent streams, but its tokens would pass round the output guardrail: none is told
    assert not [e for e in events if e.type == "llm_delta"]
    told = [e for e in events if e.type == "guardrail"]
    assert [(e.data["stage"], e.data["action"]) for e in told] == [
        ("tool_call", "redacted"),
        ("output", "redacted"),  # the answer
        ("output", "redacted"),  # the subtask's output
    ]
    assert told[0].subtask_id is not None
    assert told[0].data["tool"] == TOOL_NAME
    assert all(e.data["guardrail"] == name for e in told)
    assert sorted(d.decision.stage for d in decisions) == ["output", "output", "tool_call"]
    assert all("jane" not in str(e.data) for e in told)  # what matched is never told


def test_a_tool_result_tripwire_ends_the_job_before_the_model_sees_it(rt, wire, tmp_path):
    team = f"tripping-{uuid.uuid4().hex[:6]}"
    wire.reset()
    call = WireCall(TOOL_NAME, {"ledger": str(tmp_path / "l.log"), "token": "t1"})
    wire.script(Reply(tool_calls=(call,)), Reply(text="should never be asked"))
    spec = {"stages": ["tool_result"], "tools": [TOOL_NAME],
            "rules": [{"kind": "keywords", "words": ["recorded"]}],
            "applies_to": {"teams": [team]}}  # fmt: skip
    with guardrail(rt, spec) as name:
        job = rt.submit("Record t1.", team=wire_team(wire, team))
        with pytest.raises(runtime.JobFailed) as caught:
            job.result(timeout=90)
        events = list(job.events(timeout=10))

    result = caught.value.detail["result"]
    assert result.error.code is ErrorCode.GUARDRAIL
    assert result.error.detail["guardrail"] == name
    assert result.error.detail["stage"] == "tool_result"
    assert len(wire.requests) == 1  # the model was never shown the result
    (told,) = [e for e in events if e.type == "guardrail"]
    assert (told.data["action"], told.data["tool"]) == ("blocked", TOOL_NAME)


def test_a_chats_earlier_messages_are_guarded_before_any_model_reads_them(rt, api, wire):
    """The OpenAI endpoint's earlier turns become the job's history: input, like its task."""
    import openai  # noqa: PLC0415

    team = register(api, wire_team(wire, f"chat-guarded-{uuid.uuid4().hex[:6]}"))
    wire.reset()
    wire.script(Reply(text="Noted."))
    spec = {"stages": ["input"], "action": "redact", "rules": [{"kind": "pii"}],
            "applies_to": {"tenants": ["acme"]}}  # the tenant's: before routing too  # fmt: skip
    client = openai.OpenAI(base_url=f"{api.url}/v1", api_key=USER_KEY, max_retries=0, timeout=90)
    with guardrail(rt, spec):
        answer = client.chat.completions.create(
            model=team,
            messages=[
                {"role": "user", "content": "My card is 4111 1111 1111 1111."},
                {"role": "assistant", "content": "Thanks."},
                {"role": "user", "content": "Please confirm my details."},
            ],
        )
    asked = str([r.body["messages"] for r in wire.requests])
    assert answer.choices[0].message.content
    assert "4111" not in asked
    assert "[CREDIT_CARD]" in asked


def test_over_http_admins_set_guardrails_and_tenants_see_only_their_decisions(api):
    team = register(api, offline_team(f"http-guarded-{uuid.uuid4().hex[:6]}"))
    name = f"http-{uuid.uuid4().hex[:6]}"
    spec = {"stages": ["input"], "rules": [{"kind": "keywords", "words": ["forbidden"]}],
            "applies_to": {"teams": [team]}}  # fmt: skip
    with api.client(ADMIN_KEY) as admin, api.client(USER_KEY) as acme, \
            api.client(OTHER_KEY) as globex:  # fmt: skip
        by_tenant = acme.put(f"/v1/guardrails/{name}", json=spec)
        made = admin.put(f"/v1/guardrails/{name}", json=spec)
        again = admin.put(f"/v1/guardrails/{name}", json={**spec, "description": "v2"})
        try:
            refused = acme.post("/v1/jobs", json={"task": "Do the forbidden thing.", "team": team})
            fine = acme.post("/v1/jobs", json={"task": "Do the allowed thing.", "team": team})
            done = finished(acme, fine.json()["id"])
            theirs = acme.get("/v1/guardrail-decisions").json()
            others = globex.get("/v1/guardrail-decisions").json()
            listed = admin.get("/v1/guardrails").json()
            first = admin.get(f"/v1/guardrails/{name}", params={"version": 1}).json()
        finally:
            gone = admin.delete(f"/v1/guardrails/{name}")
        after = admin.get(f"/v1/guardrails/{name}")

    assert by_tenant.status_code == 403
    assert made.status_code == 200, made.text
    assert (made.json()["version"], again.json()["version"]) == (1, 2)
    assert refused.status_code == 422, refused.text
    assert refused.json()["code"] == "guardrail"
    assert (refused.json()["guardrail"], refused.json()["rule"]) == (name, "0:keywords")
    assert done["status"] == "succeeded"
    assert any(d["decision"]["guardrail"] == name for d in theirs)
    assert all(d["tenant"] == "acme" for d in theirs)
    assert not any(d["decision"]["guardrail"] == name for d in others)
    assert any(g["name"] == name and g["version"] == 2 for g in listed)
    assert first["spec"]["description"] == ""
    assert gone.status_code == 200
    assert after.status_code == 404
    assert after.json()["code"] == "guardrail_not_found"
