"""Guardrails without Ray: the rules, what a match does, the store and its versions."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest
from pydantic import ValidationError

from raytroupe.actors.guardrails.check import decision_of, guard, guard_json, judge_request
from raytroupe.actors.guardrails.store import GuardrailStore
from raytroupe.actors.state import open_database
from raytroupe.protocols import (
    Forbidden,
    GuardrailNotFound,
    GuardrailTripped,
    InvalidInput,
    LLMRequest,
    LLMResponse,
    ModelError,
)
from raytroupe.protocols.guardrails import BoundGuardrail, GuardrailDecision, GuardrailSpec
from tests.support.guardrail_checks import NO_CODENAME, RAISES


def bound(name: str = "g", version: int = 1, **spec: object) -> BoundGuardrail:
    return BoundGuardrail(name=name, version=version, spec=GuardrailSpec.model_validate(spec))


def run(coro):
    return asyncio.run(coro)


def answering(text: str) -> Callable[[LLMRequest], object]:
    asked: list[LLMRequest] = []

    async def ask(request: LLMRequest) -> LLMResponse:
        asked.append(request)
        return LLMResponse(text=text, model="judge", provider="scripted")

    ask.asked = asked  # type: ignore[attr-defined]
    return ask


# -- what a match does ------------------------------------------------------------------------


def test_a_blocking_rule_trips_naming_the_rule_and_never_the_text():
    rules = [{"kind": "pii"}, {"kind": "regex", "patterns": [r"sk-[a-z0-9]{8,}"]}]
    secrets = bound("secrets", 3, stages=["output"], rules=rules)
    with pytest.raises(GuardrailTripped) as caught:
        run(guard("the key is sk-abcdef123456", "output", [secrets], ask=None))
    error = caught.value
    assert error.detail == {
        "guardrail": "secrets", "version": 3, "rule": "1:regex", "stage": "output",
        "tool": None, "reason": "1 match(es) of 1 pattern(s)",
    }  # fmt: skip
    assert "sk-abcdef" not in str(error)
    assert decision_of(error) == GuardrailDecision(
        guardrail="secrets", version=3, rule="1:regex", stage="output", action="blocked",
        reason="1 match(es) of 1 pattern(s)",
    )  # fmt: skip


def test_a_redacting_rule_rewrites_each_match_and_records_it():
    rules = [{"kind": "keywords", "words": ["Project X", "acme"], "label": "NAME"}]
    words = bound("words", stages=["output"], action="redact", rules=rules)
    guarded = run(guard("ACME ships Project X; acmes stay.", "output", [words], ask=None))
    assert guarded.text == "[NAME] ships [NAME]; acmes stay."  # whole words, any case
    (decision,) = guarded.decisions
    assert (decision.action, decision.rule, decision.reason) == ("redacted", "0:keywords",
                                                                 "2 keyword(s)")  # fmt: skip


def test_pii_is_redacted_by_kind():
    pii = bound("pii", stages=["tool_result"], action="redact", rules=[{"kind": "pii"}])
    text = "Mail jane.doe@example.com or call (415) 555-0132; card 4111 1111 1111 1111."
    guarded = run(guard(text, "tool_result", [pii], ask=None, tool="lookup"))
    assert guarded.text == "Mail [EMAIL] or call [PHONE]; card [CREDIT_CARD]."
    assert guarded.decisions[0].reason == "personal data: credit_card, email, phone (3)"
    assert guarded.decisions[0].tool == "lookup"


def test_a_text_too_long_to_check_for_pii_is_blocked_even_by_a_redacting_guardrail():
    pii = bound("pii", stages=["output"], action="redact", rules=[{"kind": "pii"}])
    with pytest.raises(GuardrailTripped, match="not checked: text of 200001 characters"):
        run(guard("x" * 200_001, "output", [pii], ask=None))


def test_overlapping_matches_of_two_rules_are_one_redaction():
    both = bound("both", stages=["input"], action="redact", rules=[
        {"kind": "regex", "patterns": ["secret plan"]}, {"kind": "keywords", "words": ["plan B"]},
    ])  # fmt: skip
    assert run(guard("the secret plan B", "input", [both], ask=None)).text == "the [MATCH] B"


def test_a_guardrail_applies_only_at_its_stages_to_its_tools_when_enabled():
    g = bound(
        stages=["tool_call"], tools=["http_get"], rules=[{"kind": "keywords", "words": ["x"]}]
    )
    off = bound(stages=["input"], enabled=False, rules=[{"kind": "keywords", "words": ["x"]}])
    assert run(guard("x", "tool_call", [g, off], ask=None, tool="calculator")).decisions == ()
    assert run(guard("x", "output", [g], ask=None)).decisions == ()
    assert run(guard("x", "input", [off], ask=None)).decisions == ()
    with pytest.raises(GuardrailTripped):
        run(guard("x", "tool_call", [g], ask=None, tool="http_get"))


def test_regex_rules_are_re2_linear_time_even_for_a_catastrophic_pattern():
    """Python's re would backtrack for ages on this; RE2 answers at once (no ReDoS)."""
    g = bound(stages=["input"], rules=[{"kind": "regex", "patterns": [r"^(a+)+$"]}])
    assert run(guard("a" * 200_000 + "!", "input", [g], ask=None)).decisions == ()


def test_json_values_keep_their_shape_when_redacted_and_are_read_whole_when_blocked():
    pii = bound("pii", stages=["tool_call"], action="redact", rules=[{"kind": "pii"}])
    args = {"to": "bob@example.org", "cc": ["eve@example.org"], "count": 2, "urgent": True}
    redacted, decisions = run(guard_json(args, "tool_call", [pii], ask=None, tool="send"))
    assert redacted == {"to": "[EMAIL]", "cc": ["[EMAIL]"], "count": 2, "urgent": True}
    assert len(decisions) == 2
    schema = bound("shape", stages=["tool_call"], rules=[{"kind": "json_schema", "schema": {
        "type": "object", "properties": {"count": {"maximum": 1}}}}])  # fmt: skip
    with pytest.raises(GuardrailTripped, match="fails its JSON Schema at count"):
        run(guard_json(args, "tool_call", [schema], ask=None, tool="send"))


# -- judges and callables ---------------------------------------------------------------------


def test_a_judge_allows_refuses_and_fails_closed():
    judge = bound(
        "judge", stages=["output"], rules=[{"kind": "judge", "criteria": "medical advice"}]
    )
    allowed = answering('{"allowed": true}')
    assert run(guard("drink water", "output", [judge], ask=allowed)).text == "drink water"
    (request,) = allowed.asked  # type: ignore[attr-defined]
    assert request.purpose == "judge"
    assert "medical advice" in request.messages[0].text
    assert "<<<\ndrink water\n>>>" in request.messages[1].text  # the text fenced, as data
    with pytest.raises(GuardrailTripped, match="judged: dosage"):
        run(guard("take 4 g", "output", [judge], ask=answering('{"allowed": false, "reason": '
                                                                    '"dosage"}')))  # fmt: skip
    for unreadable in ("sure!", '{"allowed": "yes"}', "[]"):
        with pytest.raises(GuardrailTripped):
            run(guard("x", "output", [judge], ask=answering(unreadable)))

    async def down(_: LLMRequest) -> LLMResponse:
        raise ModelError("pool gone")

    with pytest.raises(GuardrailTripped, match="could not be asked"):
        run(guard("x", "output", [judge], ask=down))
    with pytest.raises(GuardrailTripped, match="no model to judge with"):
        run(guard("x", "output", [judge], ask=None))


def test_a_judge_is_shown_a_long_text_cut():
    request = judge_request(
        GuardrailSpec.model_validate({"stages": ["output"], "rules": [
            {"kind": "judge", "criteria": "c"}]}).rules[0],  # type: ignore[arg-type]
        "y" * 50_000, "output",
    )  # fmt: skip
    assert len(request.messages[1].text) < 21_000
    assert "[... cut]" in request.messages[1].text


def test_a_callable_passes_refuses_or_fails_closed():
    named = bound(stages=["input"], rules=[{"kind": "callable", "target": NO_CODENAME}])
    assert run(guard("hello", "input", [named], ask=None)).decisions == ()
    with pytest.raises(GuardrailTripped, match="names the codename at the input"):
        run(guard("about bluebird", "input", [named], ask=None))
    broken = bound(stages=["input"], rules=[{"kind": "callable", "target": RAISES}])
    with pytest.raises(GuardrailTripped, match="failed: RuntimeError"):
        run(guard("hello", "input", [broken], ask=None))


def test_rules_that_cannot_say_where_they_matched_cannot_redact():
    for rule in ({"kind": "judge", "criteria": "c"}, {"kind": "callable", "target": NO_CODENAME},
                 {"kind": "json_schema", "schema": {}}):  # fmt: skip
        with pytest.raises(ValidationError, match="cannot redact"):
            GuardrailSpec.model_validate(
                {"stages": ["output"], "action": "redact", "rules": [rule]}
            )
    with pytest.raises(ValidationError, match="listed twice"):
        GuardrailSpec.model_validate({"stages": ["output", "output"], "rules": [{"kind": "pii"}]})


# -- the store --------------------------------------------------------------------------------


@pytest.fixture
def store(tmp_path) -> GuardrailStore:
    return GuardrailStore(open_database(tmp_path / "j.sqlite", "test", ()), [NO_CODENAME])


def spec(**fields: object) -> GuardrailSpec:
    return GuardrailSpec.model_validate({"stages": ["input"], "rules": [{"kind": "pii"}], **fields})


def test_each_set_is_a_new_version_and_old_versions_stay_readable(store):
    assert store.put("pii", spec(), "alice").version == 1
    assert store.put("pii", spec(action="redact"), "bob").version == 2
    assert store.guardrail("pii").spec.action == "redact"
    assert store.guardrail("pii", 1).updated_by == "alice"
    store.delete("pii")
    with pytest.raises(GuardrailNotFound):
        store.guardrail("pii")
    assert store.guardrail("pii", 2).version == 2  # a job that ran under it can be explained
    assert store.put("pii", spec(), None).version == 3  # a version is never reused
    assert [g.version for g in store.guardrails()] == [3]
    with pytest.raises(GuardrailNotFound):
        store.delete("nothing")


def test_a_guardrail_binds_jobs_by_tenant_team_skill_and_key(store):
    store.put("everyone", spec(), None)
    store.put("acme-support", spec(applies_to={"tenants": ["acme"], "teams": ["support"]}), None)
    store.put("one-key", spec(applies_to={"keys": ["ci-bot"]}), None)
    store.put("off", spec(enabled=False), None)
    names = lambda *job: [b.name for b in store.binding(*job)]  # noqa: E731
    assert names("acme", "support", None, "alice") == ["acme-support", "everyone"]
    assert names("acme", "research", None, "alice") == ["everyone"]
    assert names("globex", "support", None, "ci-bot") == ["everyone", "one-key"]


def test_what_a_guardrail_may_name_is_checked_when_it_is_set(store):
    with pytest.raises(Forbidden, match="does not allow"):
        store.put("x", spec(rules=[{"kind": "callable", "target": "os:system"}]), None)
    with pytest.raises(InvalidInput, match="not an RE2 regex") as caught:
        store.put("x", spec(rules=[{"kind": "regex", "patterns": ["ok", "(?<=a)b"]}]), None)
    assert caught.value.detail["field"] == "rules.0.patterns.1"
    with pytest.raises(InvalidInput):
        store.put("x", spec(rules=[{"kind": "json_schema", "schema": {"type": "nope"}}]), None)
    with pytest.raises(InvalidInput, match="'ZZ'"):
        store.put("x", spec(rules=[{"kind": "pii", "regions": ["US", "ZZ"]}]), None)
    elsewhere = {"$ref": "https://evil.example/s.json"}  # resolved while a job runs: never
    with pytest.raises(InvalidInput):
        store.put("x", spec(rules=[{"kind": "json_schema", "schema": elsewhere}]), None)
    assert store.guardrails() == []  # nothing half-set
    assert store.put("x", spec(rules=[{"kind": "callable", "target": NO_CODENAME}]), None)


def test_decisions_are_kept_per_tenant_newest_first(store):
    def decision(n: int) -> GuardrailDecision:
        return GuardrailDecision(guardrail="g", version=1, rule="0:pii", stage="output",
                                 action="redacted", reason=f"r{n}")  # fmt: skip

    store.record("acme", "job-1", decision(1))
    store.record("acme", None, decision(2))
    store.record("globex", "job-2", decision(3))
    assert [r.decision.reason for r in store.decisions("acme")] == ["r2", "r1"]
    assert [r.decision.reason for r in store.decisions("acme", job_id="job-1")] == ["r1"]
    assert [r.tenant for r in store.decisions(None)] == ["globex", "acme", "acme"]
    assert store.decisions("acme", limit=1)[0].job_id is None
