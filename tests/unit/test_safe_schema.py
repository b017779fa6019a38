"""Schema validation whose patterns cannot stall the process (tenants write schemas, models
write the values)."""

import pytest
from jsonschema import Draft202012Validator

from raytroupe.actors.answer_gate import gate
from raytroupe.protocols.output_schema import check_output_schema
from raytroupe.protocols.safe_schema import safe_validator

SLOW = r"^(a|aa)+$"  # exponential on "aaaa...!" with a backtracking engine
CRAFTED = "a" * 60 + "!"


def _messages(schema, value):
    return sorted(e.message for e in safe_validator(schema).iter_errors(value))


@pytest.mark.parametrize(
    ("schema", "value"),
    [
        ({"type": "string", "pattern": "^INV-\\d+$"}, "INV-12"),
        ({"type": "string", "pattern": "^INV-\\d+$"}, "12"),
        ({"type": "object", "patternProperties": {"^x": {"type": "integer"}}}, {"xa": "no"}),
        (
            {"type": "object", "properties": {"a": {}}, "additionalProperties": False},
            {"a": 1, "b": 2, "c": 3},
        ),
        (
            {"type": "object", "patternProperties": {"^x": {}}, "additionalProperties": False},
            {"x1": 1, "y": 2},
        ),
        ({"type": "object", "additionalProperties": {"type": "string"}}, {"k": 1}),
    ],
)
def test_it_says_what_jsonschema_says_on_ordinary_schemas(schema, value):
    expected = sorted(e.message for e in Draft202012Validator(schema).iter_errors(value))
    assert _messages(schema, value) == expected


def test_a_catastrophic_pattern_fails_the_value_instead_of_hanging():
    (message,) = _messages({"type": "string", "pattern": SLOW}, CRAFTED)
    assert message == f"pattern {SLOW!r} took over 0.2 s: refused"
    keys = {"type": "object", "patternProperties": {SLOW: {}}, "additionalProperties": False}
    messages = _messages(keys, {CRAFTED: 1})
    assert f"pattern {SLOW!r} took over 0.2 s: refused" in messages
    assert any("does not match any of the regexes" in m for m in messages)  # fails closed


def test_a_tenants_output_schema_cannot_stall_the_gate():
    schema = check_output_schema({"type": "object", "properties": {"id": {"pattern": SLOW}}})
    problems = gate(f'{{"id": "{CRAFTED}"}}', schema)
    assert problems == [f"at id: pattern {SLOW!r} took over 0.2 s: refused"]


def test_schemas_that_would_match_patterns_without_a_limit_are_refused():
    with pytest.raises(ValueError, match="unevaluatedProperties with patternProperties"):
        check_output_schema({"type": "object", "properties": {"a": {
            "patternProperties": {SLOW: {}}, "unevaluatedProperties": False}}})  # fmt: skip
