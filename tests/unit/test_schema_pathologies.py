"""Schemas and values that used to raise past validation (a 500 over HTTP), each refused.

The schema checks (:mod:`protocols.schema_checks`) refuse, where a schema is accepted, what
jsonschema could not evaluate to an end; the guarded keywords of the safe validator turn
what a value can still do to them (nesting past the stack, numbers past floats) into a
failed validation. The property at the end ties them: any schema the door accepts
validates any value without raising.
"""

import json
import math
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError

from raytroupe.actors.skills.files import parse_skill
from raytroupe.deployments.openai_messages import _task
from raytroupe.deployments.skills_api import _skill_of
from raytroupe.protocols import ConfigError, InvalidInput
from raytroupe.protocols.evals import RegexExpect
from raytroupe.protocols.json_data import MAX_DATA_DEPTH, check_json_data
from raytroupe.protocols.output_schema import check_output_schema
from raytroupe.protocols.safe_schema import safe_validator
from raytroupe.protocols.schema_checks import MAX_SCHEMA_DEPTH, MAX_SCHEMA_NODES
from raytroupe.protocols.skill import RegexRule
from raytroupe.runtime.operations import jobs as job_ops
from tests.support.listener import listening

DRAFT4 = "http://json-schema.org/draft-04/schema#"
NESTED_GROUPS = "(" * 600 + "a" + ")" * 600


def _nested(depth, leaf=None):
    value = {"type": "string"} if leaf is None else leaf
    for _ in range(depth):
        value = {"items": value}
    return value


def _deep_list(depth, leaf=1):
    value = leaf
    for _ in range(depth):
        value = [value]
    return value


def _refused(schema, says):
    with pytest.raises(ValueError, match=says):
        check_output_schema(schema)


# -- loops without end -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("schema", "chain"),
    [
        ({"$ref": "#"}, "# -> #"),
        ({"type": "object", "properties": {"a": {}}, "$ref": "#"}, "# -> #"),
        ({"$defs": {"a": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"}, "#/$defs/a -> #/$defs/a"),
        ({"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"allOf": [{"$ref": "#/$defs/a"}]}}},
         "#/$defs/a -> #/$defs/b -> #/$defs/b/allOf/0 -> #/$defs/a"),
        ({"properties": {"a": {"$ref": "#/properties/b"}, "b": {"$ref": "#/properties/a"}}},
         "#/properties/a -> #/properties/b -> #/properties/a"),
        ({"anyOf": [{"type": "string"}, {"$ref": "#"}]}, "# -> #/anyOf/1 -> #"),
        ({"not": {"$ref": "#"}}, "# -> #/not -> #"),
        ({"if": {"$ref": "#"}}, "# -> #/if -> #"),
        ({"else": {"oneOf": [{"$ref": "#"}]}}, "# -> #/else -> #/else/oneOf/0 -> #"),
        ({"dependentSchemas": {"a": {"$ref": "#"}}}, "# -> #/dependentSchemas/a -> #"),
        ({"$defs": {"n": {"$anchor": "n", "allOf": [{"$ref": "#n"}]}}, "$ref": "#n"},
         "#/$defs/n -> #/$defs/n/allOf/0 -> #/$defs/n"),
        ({"$defs": {"a~b/c": {"$ref": "#/$defs/a~0b~1c"}}}, "#/$defs/a~0b~1c -> #/$defs/a~0b~1c"),
    ],
)  # fmt: skip
def test_a_schema_that_applies_itself_to_the_same_value_is_refused(schema, chain):
    with pytest.raises(ValueError, match="applies itself to the same value without end") as e:
        check_output_schema(schema)
    assert chain in str(e.value)


class Tree(BaseModel):
    name: str
    children: list["Tree"] = []


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "properties": {"child": {"$ref": "#"}}},
        {"type": "array", "items": {"$ref": "#"}},
        {"$defs": {"n": {"type": "integer"}}, "properties": {"a": {"$ref": "#/$defs/n"}}},
        {"$defs": {"t": {"anyOf": [{"type": "null"}, {"items": {"$ref": "#/$defs/t"}}]}},
         "$ref": "#/$defs/t"},
        {"$defs": {"n": {"$anchor": "node", "properties": {"next": {"$ref": "#node"}}}},
         "$ref": "#node"},
        {"$id": "https://example.com/person.schema.json", "type": "object"},
        {"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object"},
        {"$defs": {"no": False}, "properties": {"a": {"$ref": "#/$defs/no"}}},
        {"const": {"$ref": "#"}},  # data, never evaluated as a schema
        {"properties": {"$ref": {"type": "string"}, "$id": {"type": "string"}}},
        Tree.model_json_schema(),
    ],
)  # fmt: skip
def test_recursive_schemas_that_end_are_fine(schema):
    assert check_output_schema(schema) == schema


def test_a_recursive_model_still_validates_its_values():
    schema = check_output_schema(Tree.model_json_schema())
    tree = {"name": "a", "children": [{"name": "b", "children": [{"name": "c"}]}]}
    assert not list(safe_validator(schema).iter_errors(tree))
    assert list(safe_validator(schema).iter_errors({"name": "a", "children": [{"name": 1}]}))


# -- references that lead nowhere, or elsewhere ---------------------------------------------------


@pytest.mark.parametrize(
    ("schema", "says"),
    [
        ({"$ref": "#/nowhere"}, "points at nothing"),
        ({"$ref": "#nowhere"}, "points at nothing"),
        ({"$ref": "#/%zz"}, "points at nothing"),
        ({"$ref": "#/allOf/-1", "allOf": [{}]}, "points at nothing"),
        ({"$ref": "#/allOf/7", "allOf": [{}]}, "points at nothing"),
        ({"$id": "http://127.0.0.1:9/s", "$ref": "#/nowhere"}, "points at nothing"),
        ({"$defs": {"x": {"type": "string"}}, "$ref": "#/$defs/x/type"}, "points at a str"),
        ({"$dynamicRef": "#meta"}, "uses \\$dynamicRef"),
        ({"$dynamicAnchor": "meta", "items": {"$dynamicRef": "#meta"}}, "uses \\$dynamic"),
        ({"$recursiveRef": "#"}, "uses \\$recursiveRef"),
        ({"properties": {"a": {"$id": "http://127.0.0.1:9/t"}}}, "only the root may have one"),
        ({"$defs": {"a": {"$schema": DRAFT4, "pattern": "^(a|aa)+$"}}, "$ref": "#/$defs/a"},
         "names the dialect"),
        ({"$schema": "http://127.0.0.1:9/meta"}, "names the dialect"),
        ({"$defs": {"a": {"$anchor": "x"}, "b": {"$anchor": "x"}}}, "anchor 'x' twice"),
        ({"$ref": "http://127.0.0.1:9/x"}, "refers to other documents"),
        ({"$ref": "urn:x"}, "refers to other documents"),
        ({"$id": "urn:x", "$ref": "urn:x"}, "refers to other documents"),
    ],
)  # fmt: skip
def test_references_that_could_not_be_followed_are_refused(schema, says):
    _refused(schema, says)


def test_a_subschema_in_another_draft_would_have_matched_without_a_time_limit():
    """Why a nested ``$schema`` is refused: jsonschema switches to that draft's validator."""
    schema = {"properties": {"x": {"$schema": DRAFT4, "pattern": "^a$"}}}
    assert type(safe_validator(schema).evolve(schema=schema["properties"]["x"])).__name__ == (
        "Draft4Validator"
    )
    _refused(schema, "names the dialect")


# -- shape: depth, size, numbers, text, patterns ----------------------------------------------


def test_a_schema_nested_past_the_limit_is_refused_before_the_metaschema_check():
    check_output_schema(_nested(MAX_SCHEMA_DEPTH - 1))
    _refused(_nested(MAX_SCHEMA_DEPTH), f"nests deeper than {MAX_SCHEMA_DEPTH} levels")
    _refused(_nested(5000), "use \\$defs and \\$ref")  # once a RecursionError
    _refused({"enum": [_deep_list(200)]}, "nests deeper")


def test_a_schema_of_too_many_values_is_refused():
    _refused({"enum": list(range(MAX_SCHEMA_NODES))}, f"more than {MAX_SCHEMA_NODES} values")


def test_a_schema_whose_parts_are_shared_is_counted_as_it_is_walked():
    """YAML aliases share one list many times: a "billion laughs" is counted, not walked."""
    shared = [1] * 10
    for _ in range(12):
        shared = [shared] * 10
    _refused({"enum": [shared]}, "nests deeper|more than")


@pytest.mark.parametrize(
    ("number", "says"),
    [(math.inf, "must be finite"), (-math.inf, "must be finite"), (math.nan, "must be finite"),
     (2**1100, "no float holds"), (-(2**1100), "no float holds")],
)  # fmt: skip
def test_numbers_no_float_holds_are_refused(number, says):
    _refused({"type": "number", "maximum": number}, says)
    _refused({"multipleOf": number}, says)


def test_text_that_is_not_unicode_is_refused():
    _refused({"description": "\ud800"}, "not Unicode")
    _refused({"properties": {"x\udfff": {}}}, "not Unicode")


@pytest.mark.parametrize(
    "pattern", ["a{99999999999}", "a{1,4294967296}", NESTED_GROUPS, "(?<=a+)b"]
)
def test_patterns_the_compilers_cannot_take_are_refused(pattern):
    _refused({"type": "string", "pattern": pattern}, "cannot be used|not a valid JSON Schema")
    _refused({"patternProperties": {pattern: {}}}, "cannot be used|not a valid JSON Schema")
    with pytest.raises(ValidationError, match="not a valid regular expression"):
        RegexRule(pattern=pattern[:500])
    with pytest.raises(ValidationError, match="not a valid regular expression"):
        RegexExpect(pattern=pattern[:500])


def test_a_pattern_the_regex_module_rejects_is_refused_though_re_compiles_it():
    _refused({"pattern": "a{4294967295}"}, "cannot be used")  # re: OverflowError, regex: error


# -- values the validator cannot check fail, they do not raise ----------------------------------


def test_a_value_nested_past_the_stack_fails_a_recursive_schema():
    schema = check_output_schema({"type": "array", "items": {"$ref": "#"}})
    deep = _deep_list(sys.getrecursionlimit(), leaf=[])
    errors = [e.message for e in safe_validator(schema).iter_errors(deep)]
    assert errors == ["the value is nested too deeply to be checked"]
    assert safe_validator(schema).is_valid(_deep_list(50, leaf=[]))


def test_unique_items_of_values_nested_past_the_stack_fail():
    deep = _deep_list(sys.getrecursionlimit() * 2)
    assert not safe_validator({"uniqueItems": True}).is_valid([deep, deep])


@pytest.mark.parametrize(
    ("divisor", "number", "multiple"),
    [
        (0.1, 10**400, False),  # once OverflowError: int too large to convert to float
        (0.5, 10**400, True),
        (0.1, 4.0, True),  # jsonschema's float semantics are kept
        (0.1, 0.3, False),
        (10, 10**400, True),
        (7, 10**400, False),
        (2, 7, False),
        (0.1, math.inf, False),
        (0.1, -math.inf, False),
        (0.1, math.nan, False),
        (3, math.inf, False),
    ],
)
def test_multiple_of_never_raises(divisor, number, multiple):
    assert safe_validator({"multipleOf": divisor}).is_valid(number) is multiple


def test_the_safe_validator_fetches_no_remote_reference():
    """jsonschema's default registry would ``urlopen`` it (a schema from an MCP server)."""
    with listening() as listener:
        remote = {"$ref": f"{listener.url}/s.json"}
        relative = {"$id": f"{listener.url}/root", "items": {"$ref": "other.json"}}
        for schema in (remote, relative):
            (error,) = list(safe_validator(schema).iter_errors([1]))
            assert "cannot be resolved" in error.message
    assert not listener.reached
    meta = {"$ref": "https://json-schema.org/draft/2020-12/schema"}  # known without fetching
    assert safe_validator(meta).is_valid({"type": "string"})
    assert not safe_validator(meta).is_valid({"type": 5})


def test_a_reference_that_cannot_be_resolved_fails_the_value():
    """Schemas the door did not check (a tool's, from an MCP server) fail closed."""
    for schema in ({"$ref": "#/nowhere"}, {"$dynamicRef": "#meta"}, {"$ref": "#"}):
        (error,) = list(safe_validator(schema).iter_errors(1))
        assert "cannot be resolved" in error.message or "too deeply" in error.message


# -- the door of every document ---------------------------------------------------------------


def test_a_skill_body_nested_or_numbered_past_what_json_reads_is_invalid_input():
    for body, says in (
        (b"[" * 10_000 + b"]" * 10_000, "nests too deeply"),
        (b'{"a":' * 10_000 + b"1" + b"}" * 10_000, "nests too deeply"),
        (b"1" + b"0" * 5000, "4300"),
    ):
        with pytest.raises(InvalidInput, match=says):
            _skill_of(body, "application/json")


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("[" * 10_000, "nested deeper than 64 levels"),
        ("{a: " * 5000, "nested deeper than 64 levels"),
        ("name: " + "1" * 5000, "not valid YAML: Exceeds the limit"),
        ("name: 2024-13-45", "not valid YAML: month must be in 1..12"),
    ],
)
def test_a_skill_file_the_yaml_parser_cannot_make_is_a_config_error(text, says):
    with pytest.raises(ConfigError, match=says):
        parse_skill(text, "<body>")


@pytest.mark.parametrize("role", [[], {"a": 1}, [["user"]], 1.5])
def test_a_chat_role_that_is_no_text_is_invalid_input(role):
    with pytest.raises(InvalidInput, match="unknown role"):
        _task([{"role": role, "content": "hi"}])


@pytest.mark.parametrize(
    "value",
    ["\ud800", "x\udfffy", {"\ud800": 1}, [{"a": ["\udc00"]}], _deep_list(MAX_DATA_DEPTH + 1)],
)
def test_a_resume_or_fork_value_that_could_not_be_kept_is_refused(value):
    # the operations' own checks: what the driver runs and the routes' bodies are made of
    for op, arguments in (
        (job_ops.resume, {"job_id": "j", "value": value}),
        (job_ops.resume, {"job_id": "j", "state": {"f": value}}),
        (job_ops.fork, {"job_id": "j", "step": 0, "state": {"f": value}}),
    ):
        with pytest.raises(InvalidInput, match=r"not Unicode|nests deeper"):
            op.checked(arguments)


def test_a_state_edit_whose_field_name_is_no_unicode_is_refused():
    state = json.loads('{"\\ud800": 1}')
    with pytest.raises(InvalidInput, match="not Unicode"):
        job_ops.fork.checked({"job_id": "j", "step": 0, "state": state})
    with pytest.raises(InvalidInput, match="not Unicode"):
        job_ops.resume.checked({"job_id": "j", "state": {"\udfff": "x"}})


def test_json_values_as_they_may_be_are_kept():
    for value in (None, 1.5, math.inf, "\x00", "é✓\U0010ffff", {"a": [1, {"b": None}]},
                  _deep_list(MAX_DATA_DEPTH - 1)):  # fmt: skip
        assert check_json_data(value) is value
    assert job_ops.resume.checked({"job_id": "j", "value": json.loads('"\\u00e9"')})["value"] == "é"


# -- the property ---------------------------------------------------------------------------------

_REFS = ["#", "#/$defs/a", "#/$defs/b", "#/properties/x", "#/items", "#/allOf/0", "#/not",
         "#/$defs/a/items", "#/nowhere", "#anchor", "urn:x", "http://127.0.0.1:9/s"]  # fmt: skip
_NUMBERS = [0, 1, -1, 0.1, 0.5, 1e308, -0.0, 2**64, 10**400, math.inf, math.nan]
_PATTERNS = ["^a", "(", "a{99999999999}", "[z-a]", "\\d+", "x"]

_leaf = st.one_of(
    st.booleans(),
    st.fixed_dictionaries({"type": st.sampled_from(["string", "integer", "array", "object"])}),
    st.fixed_dictionaries({"$ref": st.sampled_from(_REFS)}),
    st.fixed_dictionaries({"pattern": st.sampled_from(_PATTERNS)}),
    st.fixed_dictionaries({"multipleOf": st.sampled_from(_NUMBERS)}),
    st.fixed_dictionaries({"maximum": st.sampled_from(_NUMBERS)}),
    st.fixed_dictionaries({"uniqueItems": st.booleans()}),
    st.fixed_dictionaries({"$anchor": st.just("anchor")}),
    st.fixed_dictionaries({"$dynamicRef": st.just("#anchor")}),
    st.fixed_dictionaries({"$schema": st.sampled_from([DRAFT4, "urn:nope"])}),
)


def _applied(children):
    one = st.sampled_from(["not", "if", "then", "else", "items", "contains",
                           "additionalProperties", "propertyNames"])  # fmt: skip
    many = st.sampled_from(["allOf", "anyOf", "oneOf", "prefixItems"])
    named = st.sampled_from(["properties", "$defs", "dependentSchemas", "patternProperties"])
    names = st.sampled_from(["a", "b", "x", "^a"])
    return st.one_of(
        st.dictionaries(one, children, min_size=1, max_size=2),
        st.dictionaries(many, st.lists(children, min_size=1, max_size=3), max_size=1),
        st.dictionaries(named, st.dictionaries(names, children, max_size=2), max_size=1),
        st.tuples(children, children).map(
            lambda t: {**t[0], **t[1]} if all(isinstance(s, dict) for s in t) else t[0]
        ),
    )


SCHEMAS = st.recursive(_leaf, _applied, max_leaves=12).filter(lambda s: isinstance(s, dict))
VALUES = st.one_of(
    st.recursive(
        st.one_of(
            st.none(),
            st.booleans(),
            st.sampled_from(_NUMBERS),
            st.text(max_size=5),
            st.sampled_from(["a", "aa", "\x00", "\ud800"]),
        ),
        lambda inner: st.one_of(
            st.lists(inner, max_size=3),
            st.dictionaries(st.sampled_from(["a", "b", "x", "ab"]), inner, max_size=3),
        ),
        max_leaves=10,
    ),
    st.sampled_from([_deep_list(2000), _deep_list(2000, leaf=[]), [_deep_list(1500)] * 2]),
)


@settings(
    max_examples=400,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
@given(schema=SCHEMAS, value=VALUES)
def test_a_schema_the_door_takes_validates_any_value_without_raising(schema, value):
    try:
        check_output_schema(schema)
    except ValueError:
        return  # refused, with a message: a 422
    validator = safe_validator(schema)
    errors = list(validator.iter_errors(value))
    assert validator.is_valid(value) is not errors
    json.dumps([e.message for e in errors])  # each says what failed, in text
