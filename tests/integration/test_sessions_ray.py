"""Sessions on a real Ray and a real Serve: a driver's conversation, the HTTP API's
sessions (scoped to the key's tenant), the OpenAI-compatible endpoint's ``user`` and
``X-Session-Id``, and a session that outlives its orchestrator's process (PostgreSQL)."""

from __future__ import annotations

import importlib.util

import openai
import pytest

from raytroupe import runtime
from raytroupe.protocols import SessionNotFound
from tests.support.http_api import ADMIN_KEY, OTHER_KEY, USER_KEY, finished
from tests.support.restarts import kill_and_wait_for_restart

TEAM = "ray-sessions"
FACT = "Please remember that my sister Marguerite lives in Lyon."
QUESTION = "In which city does my sister live?"


@pytest.fixture(scope="module")
def team(api):
    spec = runtime.Team(
        name=TEAM, agents=[runtime.AgentSpec(name=f"{TEAM}-ada", role="assistant")]
    ).spec()
    with api.client(ADMIN_KEY) as admin:
        response = admin.put(f"/v1/teams/{TEAM}", json=spec.model_dump(mode="json"))
        assert response.status_code in {200, 201}, response.text
    return TEAM


def test_a_drivers_session_carries_a_fact_to_a_later_job(rt, team):
    session = rt.session(tenant="ray-sessions-driver", title="family")
    assert session.ask(FACT, team, timeout=120)
    answer = session.ask(QUESTION, team, timeout=120)
    assert "Lyon" in answer
    turns = session.turns()
    assert [(t.task, t.status) for t in turns] == [(FACT, "succeeded"), (QUESTION, "succeeded")]
    mine = rt.as_tenant("ray-sessions-driver")
    assert [s.id for s in mine.sessions()] == [session.id]
    assert mine.session(session.id).info().turns == tuple(turns)
    with pytest.warns(DeprecationWarning, match="as_tenant"):
        assert [s.id for s in rt.sessions(tenant="ray-sessions-driver")] == [session.id]
    session.delete()
    with pytest.raises(SessionNotFound):
        session.info()


def test_http_sessions_belong_to_the_keys_tenant(api, team):
    with api.client(USER_KEY) as user, api.client(OTHER_KEY) as other:
        made = user.post("/v1/sessions", json={"id": "ray-http-chat", "title": "chat"})
        assert made.status_code == 201, made.text
        job = user.post("/v1/jobs", json={"task": FACT, "team": team,
                                          "session_id": "ray-http-chat"})  # fmt: skip
        assert job.status_code == 202, job.text
        assert finished(user, job.json()["id"])["status"] == "succeeded"
        # another tenant: the session does not exist for it, and cannot be used or deleted
        assert other.get("/v1/sessions/ray-http-chat").status_code == 404
        assert other.delete("/v1/sessions/ray-http-chat").status_code == 404
        refused = other.post("/v1/jobs", json={"task": QUESTION, "team": team,
                                               "session_id": "ray-http-chat"})  # fmt: skip
        assert refused.status_code == 404
        assert refused.json()["code"] == "session_not_found"
        assert "ray-http-chat" not in [s["id"] for s in other.get("/v1/sessions").json()]
        # the owner's next job sees the fact
        job = user.post("/v1/jobs", json={"task": QUESTION, "team": team,
                                          "session_id": "ray-http-chat"})  # fmt: skip
        view = finished(user, job.json()["id"])
        assert view["status"] == "succeeded"
        assert "Lyon" in view["result"]["answer"]
        session = user.get("/v1/sessions/ray-http-chat").json()
        assert [t["task"] for t in session["turns"]] == [FACT, QUESTION]
        assert user.get("/v1/sessions").json()[0]["id"] == "ray-http-chat"
        # bad input is refused, typed
        assert user.post("/v1/sessions", json={"id": "../x"}).status_code == 422
        bad = user.post("/v1/jobs", json={"task": "x", "team": team, "session_id": "a b"})
        assert bad.status_code == 422
        assert user.delete("/v1/sessions/ray-http-chat").status_code == 204
        assert user.get("/v1/sessions/ray-http-chat").status_code == 404


def test_the_openai_endpoint_keeps_a_conversation_by_user_or_header(api, team):
    client = openai.OpenAI(base_url=f"{api.url}/v1", api_key=USER_KEY, max_retries=0,
                           timeout=120)  # fmt: skip
    client.chat.completions.create(
        model=team, messages=[{"role": "user", "content": FACT}], user="ray-openai-user"
    )
    by_user = client.chat.completions.create(
        model=team, messages=[{"role": "user", "content": QUESTION}], user="ray-openai-user"
    )
    assert "Lyon" in by_user.choices[0].message.content
    by_header = client.chat.completions.create(
        model=team,
        messages=[{"role": "user", "content": QUESTION}],
        extra_headers={"X-Session-Id": "ray-openai-user"},
    )
    assert "Lyon" in by_header.choices[0].message.content
    # the session made for the user is that user's: another end user's chat cannot join it
    with pytest.raises(openai.PermissionDeniedError, match="another end user"):
        client.chat.completions.create(
            model=team, messages=[{"role": "user", "content": QUESTION}],
            user="ray-openai-other", extra_headers={"X-Session-Id": "ray-openai-user"},
        )  # fmt: skip
    with api.client(USER_KEY) as http:
        listed = http.get("/v1/sessions", params={"user": "ray-openai-user"}).json()
        others = http.get("/v1/sessions", params={"user": "ray-openai-other"}).json()
    assert [(s["id"], s["user"]) for s in listed] == [("ray-openai-user", "ray-openai-user")]
    assert others == []
    # a conversation with no session knows nothing of it
    alone = client.chat.completions.create(
        model=team, messages=[{"role": "user", "content": QUESTION}]
    )
    assert "Lyon" not in alone.choices[0].message.content
    other = openai.OpenAI(base_url=f"{api.url}/v1", api_key=OTHER_KEY, max_retries=0,
                          timeout=120)  # fmt: skip
    theirs = other.chat.completions.create(
        model=team, messages=[{"role": "user", "content": QUESTION}], user="ray-openai-user"
    )
    assert "Lyon" not in theirs.choices[0].message.content  # the same id, another tenant
    with pytest.raises(openai.UnprocessableEntityError):
        client.chat.completions.create(
            model=team, messages=[{"role": "user", "content": QUESTION}], user="not a session"
        )


def test_a_session_outlives_its_orchestrator(rt, team):
    session = rt.session("ray-kept", tenant="ray-sessions-kill")
    session.ask(FACT, team, timeout=120)
    kill_and_wait_for_restart(rt.client.handles.desk)  # it keeps the sessions
    again = rt.session("ray-kept", tenant="ray-sessions-kill")
    assert "Lyon" in again.ask(QUESTION, team, timeout=120)
    assert [t.task for t in again.turns()] == [FACT, QUESTION]


def test_the_example_fills_a_knowledge_base_and_holds_a_conversation(rt):
    """examples/conversation_and_knowledge.py's demo, on the session's Ray."""
    spec = importlib.util.spec_from_file_location(
        "conversation_and_knowledge", "examples/conversation_and_knowledge.py"
    )
    assert spec is not None
    assert spec.loader is not None
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    said: list[str] = []
    example.demo(rt, said.append)
    assert said[:2] == ["ingested ray_basics.md: 3 passages", "ingested serve_faq.html: 3 passages"]
    assert said[2].startswith("[serve_faq.html#1] Ray Serve FAQ > How does autoscaling work? (")
    answers = [line for line in said if line.startswith("  answer: ")]
    assert "[serve_faq.html#1]" in answers[1]  # the passage it drew on, cited
    assert "billing service" in answers[2]  # from the session's first turn
    assert said[-1].endswith("3 turns, ['succeeded', 'succeeded', 'succeeded']")
