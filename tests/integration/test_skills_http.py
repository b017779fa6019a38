"""Skills over HTTP on a real Serve: /v1/skills, skill jobs, routing, the OpenAI-compatible shape.

Keys (tests/support/http_api.py): an admin of acme, a user of acme, ``blue`` (may run one
registered team), and ``skillful`` (may run the skills sentiment and summarize, no team).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from raytroupe import runtime
from raytroupe.protocols import Forbidden, InvalidInput, SkillNotFound, SkillSpec
from raytroupe.runtime.http_client import Client
from tests.support.http_api import ADMIN_KEY, BLUE_KEY, SKILL_KEY, USER_KEY, finished

# system tier: a deeper scenario than the quick tier's core (docs/testing.md)
pytestmark = pytest.mark.system

EXAMPLES = Path(__file__).parents[2] / "examples"
PROBLEM = "application/problem+json"
YAML = {"Content-Type": "application/yaml"}

SKILL_YAML = """\
name: sk-http
version: "1"
description: Classify a message for the HTTP tests.
execution_mode: direct
prompt:
  instructions: Classify the sentiment of the message.
output_schema:
  type: object
  properties:
    sentiment: {enum: [positive, negative]}
  required: [sentiment]
"""


@pytest.fixture(scope="module")
def examples(rt, api):
    rt.put_team(runtime.Team.from_yaml(EXAMPLES / "teams" / "research.yaml").spec())
    for path in sorted((EXAMPLES / "skills").iterdir()):
        rt.put_skill(path)


def test_admins_register_skills_as_yaml_and_versions_are_immutable(api):
    with api.client(ADMIN_KEY) as admin:
        created = admin.post("/v1/skills", content=SKILL_YAML, headers=YAML)
        assert created.status_code == 201, created.text
        assert created.json() == {"name": "sk-http", "version": "1", "created": True}
        again = admin.post("/v1/skills", content=SKILL_YAML, headers=YAML)
        assert (again.status_code, again.json()["created"]) == (200, False)
        changed = SKILL_YAML.replace("Classify the sentiment", "Judge the mood")
        conflict = admin.put("/v1/skills/sk-http", content=changed, headers=YAML)
        assert conflict.status_code == 409
        assert "versions are immutable" in conflict.json()["detail"]
        v2 = admin.put("/v1/skills/sk-http", content=changed.replace('"1"', '"2"'), headers=YAML)
        assert (v2.status_code, v2.json()["version"]) == (201, "2")
        assert admin.get("/v1/skills/sk-http").json()["prompt"]["instructions"].startswith("Judge")
        assert admin.get("/v1/skills/sk-http", params={"version": "1"}).json()["version"] == "1"
        back = admin.post("/v1/skills/sk-http/rollback", json={})
        assert back.json()["version"] == "1"
        history = admin.get("/v1/skills/sk-http/history").json()
        assert [(e["action"], e["version"]) for e in history] == [
            ("applied", "1"), ("applied", "2"), ("rolled_back", "1")
        ]  # fmt: skip
        wrong_name = admin.put("/v1/skills/other", content=SKILL_YAML, headers=YAML)
        assert wrong_name.status_code == 409
        gone = admin.delete("/v1/skills/sk-http")
        assert gone.json()["versions"] == ["1", "2"]
        assert admin.get("/v1/skills/sk-http").status_code == 404


def test_a_bad_skill_file_is_refused_with_its_lines(api):
    bad = SKILL_YAML.replace("execution_mode: direct", "execution_mode: sideways").replace(
        'version: "1"', "version: [1]"
    )
    with api.client(ADMIN_KEY) as admin:
        response = admin.post("/v1/skills", content=bad, headers=YAML)
        assert response.status_code == 422
        assert response.headers["content-type"].startswith(PROBLEM)
        problems = response.json()["problems"]
        assert "<request body>:2: version: Input should be a valid string" in problems
        assert any(p.startswith("<request body>:4: execution_mode:") for p in problems)
        as_json = admin.post("/v1/skills", json={"name": "x"})
        assert as_json.status_code == 422
        assert "version: Field required" in " ".join(as_json.json()["problems"])
        bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
            f"{'b' * n}: &{'b' * n} [" + ", ".join([f"*{'b' * (n - 1) or 'a'}"] * 10) + "]\n"
            for n in range(1, 8)
        )
        refused = admin.post("/v1/skills", content=bomb, headers=YAML)
        assert refused.status_code == 422
        assert "aliases are expanded" in refused.text


def test_tenants_cannot_change_skills_and_see_only_theirs(api, examples):
    skill = {
        "name": "sk-evil", "version": "1", "description": "d",
        "prompt": {"instructions": "x"}, "quality_gate": {"validator": "os:system"},
    }  # fmt: skip
    with api.client(USER_KEY) as user:
        assert user.post("/v1/skills", json=skill).status_code == 403
        assert user.delete("/v1/skills/sentiment").status_code == 403
        assert user.post("/v1/skills/sentiment/rollback", json={}).status_code == 403
    with api.client(SKILL_KEY) as tenant:
        listed = tenant.get("/v1/skills").json()
        assert [s["name"] for s in listed["skills"]] == ["sentiment", "summarize"]
        assert listed["problems"] == []
        assert tenant.get("/v1/skills/arithmetic").status_code == 404
        refused = tenant.post("/v1/jobs", json={"task": "1 + 1", "skill": "arithmetic"})
        assert refused.status_code == 403
        models = [m["id"] for m in tenant.get("/v1/models").json()["data"]]
        assert models == ["skill:sentiment", "skill:summarize", "auto"]


def test_a_team_skill_does_not_open_a_team_the_tenants_policy_closes(api, examples):
    with api.client(BLUE_KEY) as blue:  # blue may run one registered team, not research
        refused = blue.post("/v1/jobs", json={"task": "Find out X.", "skill": "research-brief"})
        assert refused.status_code == 403
        assert "research" in refused.json()["detail"]


def test_a_skill_job_over_http_checks_its_input_and_answers_in_the_standard_shape(api, examples):
    with api.client(USER_KEY) as user:
        bad = user.post("/v1/jobs", json={"skill": "invoice-fields", "input": {"text": 7}})
        assert bad.status_code == 422
        assert bad.json()["fields"] == ["text"]
        bill = {"text": "Invoice INV-9: 99.90 EUR due 2025-01-31."}
        accepted = user.post("/v1/jobs", json={"skill": "invoice-fields", "input": bill})
        assert accepted.status_code == 202, accepted.text
        result = finished(user, accepted.json()["id"])["result"]
        out = result["output"]
        assert (out["skill"], out["version"], result["status"]) == (
            "invoice-fields",
            "1",
            "succeeded",
        )
        assert isinstance(out["data"]["total"], float)
        assert out["quality"]["passed"] is True
        assert out["trace_id"]
        nothing = user.post("/v1/jobs", json={"skill": "invoice-fields"})
        assert nothing.status_code == 422


def test_a_job_naming_nothing_is_routed_over_http(api, examples):
    with api.client(SKILL_KEY) as tenant:
        review = "Label this app store review as positive, negative or neutral: 'love it'."
        accepted = tenant.post("/v1/jobs", json={"task": review})
        assert accepted.status_code == 202, accepted.text
        result = finished(tenant, accepted.json()["id"])["result"]
        assert result["route"]["target"] == "sentiment"
        assert result["route"]["kind"] == "skill"
        assert result["output"]["skill"] == "sentiment"


def test_the_openai_compatible_endpoint_returns_the_standard_envelope_as_json(api, examples):
    body = {
        "model": "skill:sentiment",
        "messages": [{"role": "user", "content": "A negative review: it broke in a day."}],
        "response_format": {"type": "json_object"},
    }
    with api.client(SKILL_KEY) as tenant:
        response = tenant.post("/v1/chat/completions", json=body)
        assert response.status_code == 200, response.text
        content = json.loads(response.json()["choices"][0]["message"]["content"])
        assert (content["skill"], content["version"]) == ("sentiment", "1")
        assert content["data"]["sentiment"] == "negative"
        plain = tenant.post("/v1/chat/completions", json={**body, "response_format": None})
        text = plain.json()["choices"][0]["message"]["content"]
        assert json.loads(text) == content["data"]  # the answer itself, without the envelope
        routed = tenant.post("/v1/chat/completions", json={**body, "model": "auto"})
        assert json.loads(routed.json()["choices"][0]["message"]["content"])["skill"] == "sentiment"


def _two_versions(rt, name: str) -> None:
    for version, instructions in (("1", "Say one."), ("2", "Say two.")):
        rt.put_skill(SkillSpec.model_validate({
            "name": name, "version": version, "description": "Declared operations.",
            "execution_mode": "direct", "prompt": {"instructions": instructions},
        }))  # fmt: skip


def test_declared_skill_operations_answer_alike_over_http_and_in_the_driver(rt, api):
    """One declaration per operation: the HTTP client's method, the route it calls and the
    driver's method take the same arguments and give the same answer."""
    _two_versions(rt, "sk-decl")
    with Client(api.url, ADMIN_KEY) as client:
        back = client.rollback_skill("sk-decl")
        assert isinstance(back, SkillSpec)
        assert (back.version, back.prompt.instructions) == ("1", "Say one.")
        assert rt.skill("sk-decl") == back == client.skill("sk-decl")
        promoted = client.promote_skill("sk-decl", "2")
        assert (promoted.version, rt.skill("sk-decl").version) == ("2", "2")
        events = client.skill_history("sk-decl")
        assert events == rt.skill_history("sk-decl")
        assert [e.action for e in events] == ["applied", "applied", "rolled_back", "promoted"]
        assert {e.source for e in events[-2:]} == {"api:acme-admin"}
        everyone = client.skill_history()  # every skill's: a route the CLI lacked over HTTP
        assert {e.name for e in everyone} >= {"sk-decl"}
        assert client.skill("sk-decl", "1").version == "1"
        with pytest.raises(SkillNotFound):
            client.promote_skill("sk-decl", "9")
        with pytest.raises(SkillNotFound):
            rt.promote_skill("sk-decl", "9")
        with pytest.raises(InvalidInput):  # checked on the driver's side too: same types
            rt.rollback_skill("sk-decl", "v" * 17)
        gone = client.delete_skill("sk-decl")
        assert list(gone.versions) == ["1", "2"]
    with api.client(ADMIN_KEY) as admin:
        extra = admin.post("/v1/skills/sk-decl/rollback", json={"version": "1", "force": True})
        assert extra.status_code == 422  # a field the operation does not take is refused
        long = admin.post("/v1/skills/sk-decl/promote", json={"version": "v" * 17})
        assert long.status_code == 422
        assert (
            admin.get("/v1/skill-history", params={"name": "sk-decl"}).json()[-1]["action"]
            == "deleted"
        )


def test_a_tenant_key_reaches_no_admin_skill_operation(rt, api, examples):
    _two_versions(rt, "sk-decl-t")
    suite = {"name": "s", "cases": [{"id": "c", "task": "t", "expect": []}]}
    with api.client(USER_KEY) as user:
        for method, path, body in (
            ("POST", "/v1/skills/sk-decl-t/promote", {"version": "1"}),
            ("POST", "/v1/skills/sk-decl-t/optimise", {"suite": suite}),
            ("GET", "/v1/skill-history", None),
            ("DELETE", "/v1/skills/sk-decl-t", None),
        ):
            refused = user.request(method, path, json=body)
            assert refused.status_code == 403, (path, refused.text)
    assert rt.skill("sk-decl-t").version == "2"  # nothing changed
    with Client(api.url, USER_KEY) as user_client, pytest.raises(Forbidden):
        user_client.promote_skill("sk-decl-t", "1")
    view = rt.as_tenant("acme")
    assert not hasattr(view, "promote_skill")  # a tenant's view has no admin operation
