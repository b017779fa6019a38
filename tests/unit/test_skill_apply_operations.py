"""Registering a skill, declared once: ``apply_skill`` on the HTTP API (its body JSON, or the
skill file itself), its clients and the driver; for admins only; 201 for a new version, 200
for one registered already; a URL naming another skill than the body is a conflict; a bad file
is refused with its lines before the registry hears of it. Against a real Ray and Serve:
tests/integration/test_skills_http.py."""

from __future__ import annotations

import json

import pytest
from surfaces import ADMIN, USER, Driver, over_http, sent

from raytroupe.protocols import Forbidden, InvalidInput, SkillSpec

SKILL = {"name": "sk", "version": "1", "description": "d", "prompt": {"instructions": "x"}}
SKILL_YAML = 'name: sk\nversion: "1"\ndescription: d\nprompt:\n  instructions: x\n'
SKILL_MARKDOWN = '---\nname: sk\nversion: "2"\ndescription: d\n---\nSay x.\n'


class Registry:
    """The desk's skill registrations, recorded."""

    def __init__(self):
        self.calls = []
        self.kept: set[tuple[str, str]] = set()

    async def put_skill(self, spec, *, source="api"):
        self.calls.append(("put_skill", spec.name, spec.version, source))
        new = (spec.name, spec.version) not in self.kept
        self.kept.add((spec.name, spec.version))
        return new


def _sent(registry, requests, key=ADMIN):
    """``requests`` (method, path, content type, body) sent with ``key``; the responses."""
    return sent(registry, [
        (method, path, {"content": body, "headers": {"Content-Type": kind}})
        for method, path, kind, body in requests
    ], key)  # fmt: skip


def test_a_skill_applies_alike_from_the_clients_and_the_driver():
    async def over(client):
        return [await client.apply_skill(SKILL), await client.apply_skill(SkillSpec(**SKILL))]

    registry = Registry()
    new, again = over_http(registry, ADMIN, over)
    assert (new.created, again.created) == (True, False)
    http_calls = registry.calls

    registry = Registry()
    driver = Driver(registry, admin=True)
    assert [driver.apply_skill(SKILL), driver.apply_skill(SkillSpec(**SKILL))] == [new, again]
    assert [c[:3] for c in registry.calls] == [c[:3] for c in http_calls]
    assert {c[3] for c in http_calls} == {"api:boss"}  # who changed it, in the history


def test_the_body_is_json_or_the_skill_file_and_the_url_names_the_same_skill():
    answers = _sent(Registry(), [
        ("PUT", "/v1/skills/sk", "application/yaml", SKILL_YAML),
        ("PUT", "/v1/skills/sk", "application/json", json.dumps(SKILL)),
        ("PUT", "/v1/skills/sk", "text/markdown", SKILL_MARKDOWN),
        ("PUT", "/v1/skills/other", "application/yaml", SKILL_YAML),
        ("POST", "/v1/skills", "application/yaml", SKILL_YAML.replace('"1"', '"3"')),
        ("PUT", "/v1/skills/sk", "application/yaml", "name: sk\nversion: [1]\n"),
        ("PUT", "/v1/skills/sk", "application/yaml", "- a list, no skill\n"),
    ])  # fmt: skip
    assert [a.status_code for a in answers] == [201, 200, 201, 409, 201, 422, 422], [
        a.text for a in answers
    ]
    assert answers[2].json()["version"] == "2"
    assert "the URL's 'other'" in answers[3].json()["detail"]
    assert any(p.startswith("<request body>:2: version") for p in answers[5].json()["problems"])


def test_a_tenants_key_applies_no_skill_and_a_bad_one_reaches_no_registry():
    registry = Registry()
    answers = _sent(registry, [("PUT", "/v1/skills/sk", "application/yaml", SKILL_YAML)], USER)
    assert answers[0].status_code == 403
    with pytest.raises(Forbidden):
        Driver(registry, admin=False).apply_skill(SKILL)
    with pytest.raises(InvalidInput):
        Driver(registry, admin=True).apply_skill({**SKILL, "version": "v" * 17})
    assert registry.calls == []
