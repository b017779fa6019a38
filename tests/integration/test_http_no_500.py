"""No input gets a 500: pathological documents and bytes against the real Serve app.

Each document kind the API takes (an inline team in ``POST /v1/jobs``, a team with a graph,
a skill, an eval suite, a session, a chat completion) starts from a valid document, and
hypothesis replaces a field of it, at any depth, by something pathological: nesting
thousands deep, numbers past what a float or Python's int parser takes, NUL characters,
lone surrogates, bytes that are not UTF-8, wrong types, self-referencing and remote
``$ref`` schemas, ``$dynamicRef``, regexes that do not compile. Every answer must be below
500, and an error a problem document (``application/problem+json``) with a ``code``.

Accepted jobs run on the offline model and are cancelled at once, so that examples stay
cheap; the named tests below are the 500s this suite found, kept as regressions.
(:mod:`tests.integration.test_http_schema` fuzzes the operations from the OpenAPI
document's own schemas; this suite goes where those schemas do not: what a valid-looking
document holds.)
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from raytroupe import runtime
from tests.support.graph_specs import PAUSED
from tests.support.http_api import ADMIN_KEY, FUZZ_KEY
from tests.support.listener import listening

# system tier: hypothesis over request bodies, envelopes and graph state
pytestmark = pytest.mark.system

PROBLEM = "application/problem+json"
REGISTERED = "no500-team"
SKILL = "no500-skill"
_FUZZ = settings(
    max_examples=60,
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


# -- bodies json.dumps cannot write -----------------------------------------------------------


@dataclass(frozen=True)
class Raw:
    """JSON text put into a body as it is: deep nesting, huge numbers, bytes not UTF-8."""

    text: bytes


def encode(value: Any) -> bytes:
    """``value`` as a JSON body, its :class:`Raw` parts as they are (lone surrogates escaped)."""
    if isinstance(value, Raw):
        return value.text
    if isinstance(value, dict):
        items = (json.dumps(str(k)).encode() + b":" + encode(v) for k, v in value.items())
        return b"{" + b",".join(items) + b"}"
    if isinstance(value, list | tuple):
        return b"[" + b",".join(encode(v) for v in value) + b"]"
    return json.dumps(value).encode()


def _deep_arrays(n: int) -> Raw:
    return Raw(b"[" * n + b"]" * n)


def _deep_objects(n: int) -> Raw:
    return Raw(b'{"a":' * n + b"1" + b"}" * n)


def _deep_schema(n: int) -> Raw:
    return Raw(b'{"items":' * n + b'{"type":"string"}' + b"}" * n)


# -- pathological values ----------------------------------------------------------------------

NESTED = [_deep_arrays(n) for n in (100, 300, 990, 10_000)] + [
    _deep_objects(n) for n in (250, 10_000)
]
NUMBERS = [
    Raw(b"1" + b"0" * 5000),  # past Python's 4300-digit limit
    Raw(b"-" + b"9" * 4200),
    Raw(b"1e400"),
    Raw(b"-1e400"),
    Raw(b"1e-400"),
    Raw(b"NaN"),
    Raw(b"Infinity"),
    Raw(b"-Infinity"),
    2**63,
    -(2**63) - 1,
    2**64,
    -0.0,
    1e308,
]
TEXTS = [
    "\x00",
    "a\x00b",
    "\ud800",
    "x\udfffy",
    "\uffff",
    "\U0010ffff",
    "\u202e",
    "A" * 70_000,
    "{task}{state}{item}{resume}{",
    "%s%n",
    "../../../etc/passwd",
    " ",
    "",
]
NOT_UTF8 = [Raw(b'"\xff"'), Raw(b'"\xed\xa0\x80"'), Raw(b'"\xc0\x80"'), Raw(b'"a\xf4\x90\x80\x80"')]
WRONG_TYPES = [None, True, 0, -1, 1.5, [], {}, [None], {"": None}, [[]], {"a": {"b": {}}}]
NESTED_GROUPS = "(" * 240 + "a" + ")" * 240
"""Groups nested as deep as a 500-character pattern allows: the compilers recurse."""
PATTERNS = ["(", "[z-a]", "(?P<x>", "a{99999999999}", "\\", "(?<=a+)b", "^(a|aa)+$", "(?R)", "*",
            NESTED_GROUPS]  # fmt: skip
_DRAFT4 = "http://json-schema.org/draft-04/schema#"
SCHEMAS: list[Any] = [
    {"$ref": "#"},
    {"$defs": {"a": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"},
    {
        "$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"allOf": [{"$ref": "#/$defs/a"}]}},
        "$ref": "#/$defs/a",
    },
    {"allOf": [{"$ref": "#"}]},
    {"not": {"$ref": "#"}},
    {"if": {"$ref": "#"}, "then": {}},
    {"properties": {"a": {"$ref": "#/properties/a"}}},
    {"$ref": "http://127.0.0.1:9/x"},
    {"$ref": "file:///etc/passwd"},
    {"$ref": "urn:x"},
    {"$id": "urn:x", "$ref": "urn:x"},
    {"$id": "http://127.0.0.1:9/s", "$ref": "#/nowhere"},
    {"properties": {"a": {"$id": "http://127.0.0.1:9/t", "$ref": "u"}}},
    {"$ref": "#/nowhere"},
    {"$ref": "#nowhere"},
    {"$ref": "#/%zz"},
    {"$dynamicRef": "#meta"},
    {"$dynamicAnchor": "meta", "$dynamicRef": "#meta"},
    {"$dynamicAnchor": "meta", "items": {"$dynamicRef": "#meta"}},
    {"$defs": {"a": {"$schema": _DRAFT4, "pattern": "^(a|aa)+$"}}, "$ref": "#/$defs/a"},
    {"$schema": "http://127.0.0.1:9/meta"},
    {"pattern": "("},
    {"patternProperties": {"(": {}}},
    {"multipleOf": Raw(b"1e-400")},
    {"multipleOf": Raw(b"1e400")},
    {"maximum": Raw(b"1" + b"0" * 4000)},
    {"maximum": Raw(b"NaN")},
    {"enum": []},
    {"type": "nonsense"},
    {"format": "regex"},
    {"pattern": "a{99999999999}"},
    {"pattern": NESTED_GROUPS},
    {"patternProperties": {"a{99999999999}": {}}},
    {"multipleOf": Raw(b"1" + b"0" * 400)},
    {"description": "\ud800", "const": "x\udfff"},
    {"properties": {"a": {"$ref": "#/properties/b"}, "b": {"$ref": "#/properties/a"}}},
    {"$defs": {"x": {"type": "string"}}, "$ref": "#/$defs/x/type"},
    {"const": {"$ref": "#"}},
    _deep_schema(40),
    _deep_schema(100),
    _deep_schema(190),
    _deep_schema(5000),
]
KEYS = ["\x00", "\ud800", "", "$ref", "a" * 5000, "__proto__", "task"]

PATHOLOGICAL = st.sampled_from(
    [*NESTED, *NUMBERS, *TEXTS, *NOT_UTF8, *WRONG_TYPES, *PATTERNS, *SCHEMAS]
)


def _paths(value: Any, at: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield at
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _paths(item, (*at, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _paths(item, (*at, index))


def _replaced(document: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    parent = document
    for part in path[:-1]:
        parent = parent[part]
    parent[path[-1]] = value
    return document


@st.composite
def mutated(draw: st.DrawFn, base: Any) -> Any:
    """``base`` with one or two of its values (at any depth) replaced, or a key added."""
    document = copy.deepcopy(base)
    for _ in range(draw(st.integers(1, 2))):
        path = draw(st.sampled_from(list(_paths(document))))
        target = document
        for part in path:
            target = target[part]
        value = copy.deepcopy(draw(PATHOLOGICAL))  # a later step may edit inside it
        if isinstance(target, dict) and draw(st.integers(0, 4)) == 0:
            target[draw(st.sampled_from(KEYS))] = value
        else:
            document = _replaced(document, path, value)
    return document


# -- valid documents ----------------------------------------------------------------------------


def team_document() -> dict[str, Any]:
    """An inline team of the default policy: one offline agent, a schema for its answer."""
    return {
        "name": "nf",
        "description": "no 500",
        "agents": [{"name": "nf-a", "role": "worker", "instructions": "Be brief.",
                    "model": "default", "tools": ["calculator"], "max_turns": 2}],
        "planner_model": "default",
        "max_parallel": 2,
        "output_schema": {"type": "object", "properties": {"x": {"type": "string",
                                                                  "pattern": "^a"}}},
        "plan": [{"id": "s", "role": "worker", "instructions": "Say hi to {task}",
                  "output_schema": {"type": "string"}}],
    }  # fmt: skip


def graph_document() -> dict[str, Any]:
    """An inline team whose work is a two-node graph over a typed state."""
    return {
        "name": "nf-graph",
        "agents": [{"name": "nf-g", "role": "worker", "model": "default"}],
        "planner_model": "default",
        "graph": {
            "start": "one",
            "answer": "text",
            "max_steps": 3,
            "state": {
                "json_schema": {"type": "object", "properties": {
                    "text": {"type": "string", "maxLength": 1000},
                    "items": {"type": "array", "items": {"type": "integer"}}}},
                "reducers": {"items": "append"},
                "initial": {"items": [1]},
            },
            "nodes": [
                {"id": "one", "role": "worker", "writes": ["text"], "instructions": "{task}"},
                {"id": "two", "role": "worker", "writes": ["text"],
                 "instructions": "Again: {state.text}"},
            ],
            "edges": [{"source": "one", "target": "two", "when": "^h", "condition": "True"},
                      {"source": "two", "target": "end"}],
        },
    }  # fmt: skip


def skill_document() -> dict[str, Any]:
    return {
        "name": SKILL,
        "version": "1",
        "description": "Says hi.",
        "execution_mode": "direct",
        "prompt": {"instructions": "Say hi.", "constraints": ["short"]},
        "llm": {"alias": "default", "max_tokens": 50},
        "input_schema": {"type": "object", "properties": {"who": {"type": "string"}}},
        "output_schema": {"type": "object", "properties": {"hi": {"type": "string"}}},
        "quality_gate": {"required": ["hi"], "regex": [{"pattern": "hi", "field": "hi"}],
                         "counts": [{"min": 1, "max": 10}]},
    }  # fmt: skip


def eval_document() -> dict[str, Any]:
    return {
        "team": REGISTERED,
        "concurrency": 1,
        "budget": {"tokens": 2000},
        "suite": {
            "name": "nf-suite",
            "cases": [{"id": "c1", "task": "Say hi.", "input": {"who": "me"}, "expect": [
                {"kind": "contains", "values": ["hi"]},
                {"kind": "regex", "pattern": "h+"},
                {"kind": "json_schema", "schema": {"type": "object"}},
                {"kind": "number", "value": 1.0, "tolerance": 0.5},
                {"kind": "exact", "value": {"a": [1]}},
            ]}],
        },
    }  # fmt: skip


def session_document() -> dict[str, Any]:
    return {"title": "no 500", "history_tokens": 2000}


def chat_document() -> dict[str, Any]:
    """A chat naming a team that does not exist: the body is checked, no job runs."""
    return {
        "model": "no500-nobody",
        "messages": [{"role": "system", "content": "Be brief."},
                     {"role": "user", "content": [{"type": "text", "text": "hi"}]}],
        "response_format": {"type": "json_schema", "json_schema": {"schema": {"type": "object"}}},
        "user": "no500-session",
    }  # fmt: skip


# -- fixtures and checks --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def registered(api):
    """A registered team on the offline model, for the eval suites to run."""
    team = runtime.Team(
        name=REGISTERED,
        planner_model="offline",
        agents=[runtime.AgentSpec(name="no500-agent", role="worker", model="offline")],
    )
    with api.client(ADMIN_KEY) as admin:
        response = admin.put(f"/v1/teams/{REGISTERED}", json=team.spec().model_dump(mode="json"))
        assert response.status_code in (200, 201), response.text
    yield REGISTERED
    with api.client(ADMIN_KEY) as admin:
        admin.delete(f"/v1/teams/{REGISTERED}")
        admin.delete(f"/v1/skills/{SKILL}")


@pytest.fixture(scope="module")
def fuzz(api):
    with api.client(FUZZ_KEY) as client:
        yield client


@pytest.fixture(scope="module")
def admin(api):
    with api.client(ADMIN_KEY) as client:
        yield client


def sent(client: httpx.Client, method: str, path: str, body: Any, **headers: str) -> httpx.Response:
    """``body`` (a document, or bytes as they are) sent; the answer checked: no 5xx."""
    content = body if isinstance(body, bytes) else encode(body)
    headers.setdefault("Content-Type", "application/json")
    response = client.request(method, path, content=content, headers=headers)
    assert_no_500(response)
    return response


def assert_no_500(response: httpx.Response) -> None:
    """Below 500; an error is a problem document with a code, and shows no traceback."""
    where = f"{response.request.method} {response.request.url.path}"
    assert response.status_code < 500, (
        f"{where} -> {response.status_code}: {response.text[:600]}\n"
        f"body: {response.request.content[:300]!r}"
    )
    assert "Traceback" not in response.text
    if response.status_code >= 400:
        assert response.headers["content-type"] == PROBLEM, (where, response.text[:300])
        assert response.json()["code"], response.text[:300]


def _cancelled(client: httpx.Client, response: httpx.Response) -> None:
    """An accepted job cancelled at once (409 if it had finished): examples stay cheap."""
    if response.status_code == 202:
        job_id = response.json()["id"]
        assert_no_500(client.post(f"/v1/jobs/{job_id}/cancel"))


# -- properties ------------------------------------------------------------------------------------


def test_no_mutated_inline_team_gets_a_server_error(fuzz):
    @_FUZZ
    @given(team=mutated(team_document()))
    def submit(team):
        _cancelled(fuzz, sent(fuzz, "POST", "/v1/jobs", {"task": "hi", "team": team}))

    submit()


def test_no_mutated_graph_team_gets_a_server_error(fuzz):
    @_FUZZ
    @given(body=mutated({"task": "hi", "team": graph_document(), "input": {"text": "h"}}))
    def submit(body):
        _cancelled(fuzz, sent(fuzz, "POST", "/v1/jobs", body))

    submit()


SCHEMA_SLOTS = {
    "team.output_schema": lambda s: {"task": "hi", "team": {**team_document(), "output_schema": s}},
    "team.plan.0.output_schema": lambda s: {"task": "hi", "team": {
        **team_document(), "plan": [{"id": "s", "role": "worker", "instructions": "x",
                                     "output_schema": s}]}},
    "team.graph.state.json_schema": lambda s: {"task": "hi", "team": _graph_with_schema(s)},
}  # fmt: skip


def _graph_with_schema(schema: Any) -> dict[str, Any]:
    team = graph_document()
    state = team["graph"]["state"]
    if isinstance(schema, dict):  # still an object with the graph's fields
        fields = state["json_schema"]["properties"]
        more = schema.get("properties")
        schema = {**state["json_schema"], **schema}
        if isinstance(more, dict):
            schema["properties"] = {**fields, **more}
    state["json_schema"] = schema
    return team


@pytest.mark.parametrize("slot", sorted(SCHEMA_SLOTS))
def test_no_pathological_schema_gets_a_server_error(fuzz, slot):
    for schema in SCHEMAS:
        _cancelled(fuzz, sent(fuzz, "POST", "/v1/jobs", SCHEMA_SLOTS[slot](schema)))


def test_no_pathological_graph_state_value_gets_a_server_error(fuzz):
    """The state's first value is checked against its schema at the door: values of any shape."""
    recursive = {"type": "object", "properties": {"t": {"$ref": "#/$defs/t"}},
                 "$defs": {"t": {"type": "array", "items": {"$ref": "#/$defs/t"}}}}  # fmt: skip
    multiple = {"type": "object", "properties": {"t": {"multipleOf": 0.1}}}
    for schema in (recursive, multiple):
        for value in (*NESTED, *NUMBERS, *NOT_UTF8, "\ud800"):
            team = _graph_with_schema(schema)
            team["graph"]["state"]["initial"] = {"t": value}
            _cancelled(fuzz, sent(fuzz, "POST", "/v1/jobs", {"task": "hi", "team": team}))
            body = {"task": "hi", "team": _graph_with_schema(schema), "input": {"t": value}}
            _cancelled(fuzz, sent(fuzz, "POST", "/v1/jobs", body))


def test_no_mutated_skill_gets_a_server_error(registered, admin):
    @_FUZZ
    @given(skill=mutated(skill_document()))
    def post(skill):
        sent(admin, "POST", "/v1/skills", skill)

    post()
    for slot in ("input_schema", "output_schema"):
        for schema in SCHEMAS:
            sent(admin, "POST", "/v1/skills", {**skill_document(), slot: schema})


def test_no_mutated_eval_suite_gets_a_server_error(registered, fuzz):
    @_FUZZ
    @given(body=mutated(eval_document()))
    def post(body):
        sent(fuzz, "POST", "/v1/evals", body)

    post()
    for schema in SCHEMAS:
        body = eval_document()
        body["suite"]["cases"][0]["expect"] = [{"kind": "json_schema", "schema": schema}]
        sent(fuzz, "POST", "/v1/evals", body)


def test_no_mutated_session_or_chat_gets_a_server_error(fuzz):
    @_FUZZ
    @given(body=mutated(session_document()))
    def session(body):
        sent(fuzz, "POST", "/v1/sessions", body)

    @_FUZZ
    @given(body=mutated(chat_document()))
    def chat(body):
        sent(fuzz, "POST", "/v1/chat/completions", body)

    session()
    chat()


# -- bytes -------------------------------------------------------------------------------------

BODY_ROUTES = [
    ("POST", "/v1/jobs", FUZZ_KEY),
    ("POST", "/v1/evals", FUZZ_KEY),
    ("POST", "/v1/sessions", FUZZ_KEY),
    ("POST", "/v1/chat/completions", FUZZ_KEY),
    ("POST", "/v1/jobs/no500-nothing/resume", FUZZ_KEY),
    ("POST", "/v1/jobs/no500-nothing/feedback", FUZZ_KEY),
    ("POST", "/v1/knowledge/no500/search", FUZZ_KEY),
    ("POST", "/v1/skills", ADMIN_KEY),
    ("PUT", "/v1/teams/no500-nobody", ADMIN_KEY),
    ("PUT", "/v1/tenants/no500/policy", ADMIN_KEY),
]
RAW_BODIES = [
    b"\xff\xfe",
    b'{"task": "\xff"}',
    b'{"task": "\xed\xa0\x80"}',
    b'{"task": "hi"',
    b"",
    b"\x00",
    b'\xef\xbb\xbf{"task": "hi"}',
    b'{"task": "\\ud800"}',
    b'{"\\ud800": 1}',
    b'{"title": "\\u0000"}',
    b'{"task": "\\',
    b"[" * 10_000,
    b"[" * 10_000 + b"]" * 10_000,
    b'{"a":' * 10_000,
    b"1" + b"0" * 5000,
    b"NaN",
    b'{"task": NaN, "budget": {"tokens": 1e400}}',
    b'{"task": "a", "task": "b"}',
    b"{" + b'"a": 1,' * 20_000 + b'"b": 2}',
    b"name: &a [*a]",
    b"---\nname: x\n---\n",
]
SKILL_TYPES = ("application/json", "application/yaml", "text/markdown", "text/plain", "")


def test_no_raw_body_gets_a_server_error(api):
    for method, path, key in BODY_ROUTES:
        with api.client(key) as client:
            for body in RAW_BODIES:
                types = SKILL_TYPES if path == "/v1/skills" else ("application/json", "")
                for kind in types:
                    sent(client, method, path, body, **{"Content-Type": kind})


# -- the 500s this suite found, kept --------------------------------------------------------------


def _refused(response: httpx.Response, *, status: int = 422, says: str = "") -> dict[str, Any]:
    assert_no_500(response)
    assert response.status_code == status, response.text
    body: dict[str, Any] = response.json()
    assert says in " ".join([body["detail"], *body.get("problems", [])]), body
    return body


def _job(client: httpx.Client, team: dict[str, Any], **fields: Any) -> httpx.Response:
    return sent(client, "POST", "/v1/jobs", {"task": "hi", "team": team, **fields})


def test_a_graph_state_schema_referring_to_itself_is_refused_at_the_door(fuzz):
    """Was a 500 (RecursionError checking the state's first value): a loop without end."""
    team = _graph_with_schema({"$ref": "#"})
    _refused(_job(fuzz, team), says="applies itself to the same value without end (# -> #)")


def test_an_inline_output_schema_referring_to_itself_is_refused_at_the_door(fuzz):
    """Was accepted, to recurse without end when the answer was checked."""
    team = {**team_document(), "output_schema": {"$ref": "#"}}
    _refused(_job(fuzz, team), says="output_schema applies itself to the same value")
    plan = [{"id": "s", "role": "worker", "instructions": "x",
             "output_schema": {"$defs": {"a": {"allOf": [{"$ref": "#/$defs/a"}]}},
                               "$ref": "#/$defs/a"}}]  # fmt: skip
    _refused(_job(fuzz, {**team_document(), "plan": plan}), says="#/$defs/a -> #/$defs/a")


@pytest.mark.parametrize(
    ("schema", "says"),
    [
        ({"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"not": {"$ref": "#/$defs/a"}}},
          "$ref": "#/$defs/a"}, "without end"),
        ({"if": {"$ref": "#"}}, "without end"),
        ({"$ref": "#/nowhere"}, "points at nothing"),
        ({"$ref": "#nowhere"}, "points at nothing"),
        ({"$ref": "#/%zz"}, "points at nothing"),
        ({"$id": "http://127.0.0.1:9/s", "$ref": "#/nowhere"}, "points at nothing"),
        ({"$dynamicRef": "#meta"}, "$dynamicRef"),
        ({"$defs": {"a": {"$schema": _DRAFT4, "pattern": "^(a|aa)+$"}}, "$ref": "#/$defs/a"},
         "names the dialect"),
        ({"properties": {"text": {"$id": "http://127.0.0.1:9/t"}}}, "only the root"),
        (_deep_schema(100), "nests deeper than"),
        ({"pattern": "a{99999999999}"}, "cannot be used"),
    ],
)  # fmt: skip
def test_a_graph_state_schema_that_could_not_be_evaluated_is_refused(fuzz, schema, says):
    """Each was a 500 (RecursionError, a referencing error, OverflowError, or a KeyError
    from the draft-4 validator the subschema switched to) when a value met it."""
    _refused(_job(fuzz, _graph_with_schema(schema), input={"text": "h"}), says=says)


def test_a_remote_ref_is_refused_without_a_connection(fuzz, admin):
    with listening() as listener:
        ref = {"$ref": f"{listener.url}/schema.json"}
        _refused(_job(fuzz, _graph_with_schema(ref)), says="refers to other documents")
        _refused(_job(fuzz, {**team_document(), "output_schema": ref}), says="other documents")
        skill = {**skill_document(), "input_schema": ref}
        _refused(sent(admin, "POST", "/v1/skills", skill), says="other documents")
    assert not listener.reached


def test_a_state_value_nested_past_a_recursive_schema_fails_validation(fuzz):
    """A recursive schema recurses once per level of the value: nested as deep as a body
    may be, it fails validation (out of stack, or wrong), never a 500."""
    team = _graph_with_schema(
        {"properties": {"t": {"$ref": "#/$defs/t"}},
         "$defs": {"t": {"type": "array", "items": {"$ref": "#/$defs/t"}}}}
    )  # fmt: skip
    for depth in (150, 195):
        team["graph"]["state"]["initial"] = {"t": Raw(b"[" * depth + b"1" + b"]" * depth)}
        _refused(_job(fuzz, team), says="initial value does not fit its schema")


def test_a_huge_integer_against_a_multiple_of_fails_validation(fuzz):
    """Was a 500: jsonschema divided a 400-digit integer by 0.1 as floats (OverflowError);
    a number past 1e308 is read as infinity, a multiple of nothing."""
    team = _graph_with_schema({"properties": {"t": {"multipleOf": 0.1}}})
    for number in (Raw(b"1" + b"0" * 400), Raw(b"1" + b"0" * 400 + b".5"), Raw(b"-1e400")):
        team["graph"]["state"]["initial"] = {"t": number}
        _refused(_job(fuzz, team), says="initial value does not fit its schema")


def test_patterns_that_overflow_or_recurse_in_the_compiler_are_refused(fuzz, registered):
    """Were 500s: re.compile raises OverflowError for a{99999999999}, not re.error."""
    team = {**team_document(), "output_schema": {"type": "string", "pattern": "a{99999999999}"}}
    _refused(_job(fuzz, team), says="cannot be used")
    suite = eval_document()
    suite["suite"]["cases"][0]["expect"] = [{"kind": "regex", "pattern": "a{99999999999}"}]
    _refused(sent(fuzz, "POST", "/v1/evals", suite), says="not a valid regular expression")
    graph = graph_document()
    graph["graph"]["edges"][0]["when"] = NESTED_GROUPS
    _cancelled(fuzz, _job(fuzz, graph))


def test_a_skill_body_nested_or_numbered_past_what_json_reads_is_refused(admin):
    """Were 500s: json.loads raised RecursionError and ValueError (4300 digits)."""
    for body, says in (
        (b"[" * 10_000 + b"]" * 10_000, "nests too deeply"),
        (b'{"a":' * 10_000 + b"1" + b"}" * 10_000, "nests too deeply"),
        (b"1" + b"0" * 5000, "4300"),
    ):
        problem = _refused(sent(admin, "POST", "/v1/skills", body), says=says)
        assert problem["code"] == "invalid_input"
    deep = {**skill_document(), "output_schema": _deep_schema(150)}
    _refused(sent(admin, "POST", "/v1/skills", deep), says="nests deeper than")


def test_a_chat_message_whose_role_is_no_text_is_refused(fuzz):
    """Was a 500: a list or object as a role met a set (unhashable)."""
    for role in ([], {"a": 1}, [["user"]]):
        chat = {**chat_document(), "messages": [{"role": role, "content": "hi"}]}
        _refused(sent(fuzz, "POST", "/v1/chat/completions", chat), says="unknown role")


def test_a_session_title_with_a_nul_is_refused(fuzz):
    """Was a 500: PostgreSQL keeps no NUL in text."""
    _refused(sent(fuzz, "POST", "/v1/sessions", {"title": "a\x00b"}), says="NUL")


def test_a_paused_graph_takes_no_value_it_could_not_keep(fuzz):
    """Was a 500: a fork whose state held a lone surrogate failed writing its checkpoint."""
    team = {
        "name": "nf-paused",
        "planner_model": "default",
        "graph": PAUSED,
        "agents": [{"name": "nf-w", "role": "writer"}, {"name": "nf-e", "role": "editor"}],
    }
    accepted = _job(fuzz, team)
    assert accepted.status_code == 202, accepted.text
    job_id = accepted.json()["id"]
    with fuzz.stream("GET", f"/v1/jobs/{job_id}/events") as events:
        for line in events.iter_lines():
            if line == "event: graph_interrupted":
                break
    for value in ("\ud800", "x\udfff", NOT_UTF8[1], _deep_arrays(100)):
        path = f"/v1/jobs/{job_id}"
        _refused(sent(fuzz, "POST", f"{path}/fork", {"step": 0, "state": {"text": value}}))
        _refused(sent(fuzz, "POST", f"{path}/resume", {"value": value}))
        _refused(sent(fuzz, "POST", f"{path}/resume", {"state": {"verdict": value}}))
    _refused(sent(fuzz, "POST", f"{path}/fork", {"step": 0, "state": {"\ud800": "x"}}))
    for value in (*NUMBERS, "\x00", *WRONG_TYPES, *NESTED):
        for field in ("text", "t"):
            edit = {"step": 0, "state": {field: value}}
            forked = sent(fuzz, "POST", f"/v1/jobs/{job_id}/fork", edit)
            if forked.status_code == 202:
                assert_no_500(fuzz.post(f"/v1/jobs/{forked.json()['job_id']}/cancel"))
    assert_no_500(fuzz.post(f"/v1/jobs/{job_id}/cancel"))
