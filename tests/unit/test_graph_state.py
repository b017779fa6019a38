"""A graph's state without Ray: specs checked at the door, reducers, updates, prompts, and
what a tenant's graph may not name."""

import pytest
from pydantic import ValidationError

from raytroupe.actors.orchestrator.admission import admit_inline
from raytroupe.actors.orchestrator.graphs.state import StateKeeper, render, uses_state
from raytroupe.protocols import AgentSpec, ConfigError, Forbidden, TeamSpec, TenantPolicy
from raytroupe.protocols.graph import GraphNode, GraphSpec
from raytroupe.protocols.graph_checkpoints import GraphTask


def spec(**graph):
    base = {"start": "a", "nodes": [{"id": "a", "role": "w", "instructions": "x"}]}
    return GraphSpec.model_validate({**base, **graph})


STATE = {
    "json_schema": {"type": "object", "properties": {
        "notes": {"type": "array", "items": {"type": "string"}},
        "count": {"type": "integer"},
        "facts": {"type": "object"},
        "draft": {"type": "string"},
        "best": {"type": "string"},
    }},
    "reducers": {"notes": "append", "count": "add", "facts": "merge",
                 "best": "tests.support.graph_models:keep_longest"},
}  # fmt: skip


def test_each_reducer_joins_an_update_to_the_current_value():
    keeper = StateKeeper(spec(state=STATE))
    state, problems = keeper.apply(
        {"notes": ["a"], "count": 1, "facts": {"x": 1}, "best": "longer"},
        [{"notes": "b", "count": 2, "facts": {"y": 2}, "best": "short", "draft": "d1"},
         {"notes": ["c", "d"], "count": 3, "draft": "d2"}],
    )  # fmt: skip
    assert problems == []
    assert state == {"notes": ["a", "b", "c", "d"], "count": 6, "facts": {"x": 1, "y": 2},
                     "best": "longer", "draft": "d2"}  # fmt: skip


@pytest.mark.parametrize(
    ("update", "problem"),
    [
        ({"count": "three"}, "add needs numbers"),
        ({"facts": [1]}, "merge needs objects"),
        ({"draft": 5}, "is not of type 'string'"),
        ({"nope": 1}, "'nope' is not a field of the state"),
    ],
)
def test_an_update_that_does_not_fit_is_refused_whole(update, problem):
    keeper = StateKeeper(spec(state=STATE))
    before = {"count": 1, "draft": "kept"}
    _state, problems = keeper.apply(before, [{"draft": "changed"}, update])
    assert any(problem in p for p in problems), problems
    assert before == {"count": 1, "draft": "kept"}  # the caller keeps the old state


def test_a_pydantic_model_by_import_path_is_the_state_schema():
    keeper = StateKeeper(spec(state={"model": "tests.support.graph_models:Review"}))
    assert keeper.fields == {"draft", "score"}
    _, problems = keeper.apply({}, [{"score": "high"}])
    assert problems


def test_code_that_cannot_be_imported_is_a_config_error():
    with pytest.raises(ConfigError, match="cannot be imported"):
        StateKeeper(spec(state={"model": "no.such.module:Model"}))


def test_a_node_answer_becomes_an_update_by_what_it_writes():
    keeper = StateKeeper(spec(state=STATE))
    text = GraphNode(id="t", role="w", instructions="x", writes=("draft",))
    listed = GraphNode(id="l", role="w", instructions="x", writes=("notes",))
    json_node = GraphNode(id="j", role="w", instructions="x", writes=("count", "notes"))
    assert keeper.update(text, "  hello ") == ({"draft": "hello"}, [])
    assert keeper.update(listed, "one note") == ({"notes": ["one note"]}, [])
    assert keeper.update(json_node, '```json\n{"count": 2, "notes": "n"}\n```') == (
        {"count": 2, "notes": "n"}, [])  # fmt: skip
    _, problems = keeper.update(json_node, '{"count": 2, "draft": "not mine"}')
    assert problems  # a field it does not write
    said = keeper.answer_format(json_node)
    assert "count, notes" in said
    assert keeper.answer_format(text) is None


def test_templates_fill_only_their_placeholders():
    state = {"draft": "d", "notes": ["a"], "n": None}
    out = render("T={task} D={state.draft} N={state.notes} X={state.n} {other} {state.x.y}",
                 task="t", state=state)  # fmt: skip
    assert out == 'T=t D=d N=["a"] X= {other} {state.x.y}'
    # a value holding a placeholder is not read again
    assert render("{state.draft}", task="secret", state={"draft": "{task}"}) == "{task}"
    assert uses_state("a {state.draft}")
    assert not uses_state("a {task}")


@pytest.mark.parametrize(
    ("graph", "message"),
    [
        ({"edges": [{"source": "a", "target": "end"}, {"source": "a", "target": "a"}]},
         "never taken"),
        ({"edges": [{"source": "a", "target": "end", "condition": "__import__('os')"}]},
         "condition of edge"),
        ({"edges": [{"source": "a", "target": "end", "condition": "x.y"}]}, "attribute"),
        ({"edges": [{"source": "a", "target": ["a", "end"], "map": "items"}]}, "one target"),
        ({"nodes": [{"id": "a", "role": "w", "team": "t", "instructions": "x"}]},
         "exactly one of"),
        ({"state": {"json_schema": {"type": "array"}}}, "object with properties"),
        ({"state": {"json_schema": {"type": "object", "properties": {}},
                    "reducers": {"x": "append"}}}, "reducers name fields"),
        ({"state": {"json_schema": {"type": "object", "properties": {"x": {"type": "string"}}},
                    "initial": {"x": 1}}}, "initial value"),
        ({"state": {"json_schema": {"type": "object", "properties": {
            "x": {"$ref": "https://example.com/s.json"}}}}}, "other documents"),
        ({"nodes": [{"id": "a", "role": "w", "instructions": "x", "writes": ["nope"]}]},
         "not a field"),
        ({"start": "zz"}, "not a node"),
    ],
)  # fmt: skip
def test_graphs_are_checked_at_the_door(graph, message):
    with pytest.raises(ValidationError, match=message):
        spec(**graph)


def _tenant_team(graph):
    return TeamSpec(name="t", planner_model="offline",
                    agents=(AgentSpec(name="w", role="w", model="offline"),),
                    graph=GraphSpec.model_validate(graph))  # fmt: skip


@pytest.mark.parametrize(
    ("graph", "field"),
    [
        ({"start": "a", "state": {"model": "tests.support.graph_models:Review"},
          "nodes": [{"id": "a", "role": "w", "instructions": "x"}]}, "team.graph.state"),
        ({"start": "a", "state": {"json_schema": {"type": "object", "properties": {
            "d": {"type": "string"}}}, "reducers": {"d": "os:system"}},
          "nodes": [{"id": "a", "role": "w", "instructions": "x"}]}, "team.graph.state"),
        ({"start": "a", "nodes": [{"id": "a", "team": "payroll"}]}, "team.graph.nodes.a.team"),
        ({"start": "a", "nodes": [{"id": "a", "skill": "secret@2"}]},
         "team.graph.nodes.a.skill"),
        ({"start": "a", "nodes": [{"id": "a", "graph": {"start": "b", "max_steps": 900,
          "nodes": [{"id": "b", "role": "w", "instructions": "y"}]}}]},
         "team.graph.nodes.a.graph.max_steps"),
    ],
)  # fmt: skip
def test_a_tenants_graph_may_not_name_code_or_what_its_policy_keeps_from_it(graph, field):
    policy = TenantPolicy(models=("offline",), teams=("allowed",), skills=("allowed",))
    with pytest.raises(Forbidden) as refused:
        admit_inline(_tenant_team(graph), "acme", "policy", policy)
    assert field in str(refused.value.detail), refused.value.detail


def _edges(graph, max_items=4):
    from raytroupe.actors.orchestrator.graphs.routing import Edges  # noqa: PLC0415

    return Edges(GraphSpec.model_validate(graph), "the task", max_items)


JOINED = {
    "start": ["a", "b"],
    "nodes": [{"id": n, "role": "w", "instructions": "x"} for n in ("a", "b", "b2")]
    + [{"id": "all", "role": "w", "instructions": "x", "join": "all"},
       {"id": "two", "role": "w", "instructions": "x", "join": 2}],
    "edges": [{"source": "a", "target": ["all", "two"]}, {"source": "b", "target": "b2"},
              {"source": "b2", "target": ["all", "two"]}],
}  # fmt: skip


def test_a_join_of_all_waits_while_any_branch_runs_and_a_join_of_k_at_k_arrivals():
    edges = _edges(JOINED)
    a, b, b2 = (GraphTask(node=n) for n in ("a", "b", "b2"))
    due, joins = edges.routed([(a, "x"), (b, "y")], {}, {})
    assert due == (GraphTask(node="b2"),)  # b's branch goes on; both joins have one arrival
    assert joins == {"all": 1, "two": 1}
    due, joins = edges.routed([(b2, "z")], {}, joins)
    assert due == (GraphTask(node="two"),)  # its second arrival; 'all' waits: 'two' runs
    assert joins == {"all": 2}
    due, joins = edges.routed([(GraphTask(node="two"), "done")], {}, joins)
    assert due == (GraphTask(node="all"),)  # nothing else runs: the join of all goes
    assert joins == {}


@pytest.mark.parametrize(
    ("items", "message"),
    [("topics", "gave int, not a list"), ("missing.x", "attribute"),
     ("[1, 2, 3, 4, 5]", "5 items; max_subtasks is 4")],
)  # fmt: skip
def test_a_map_that_gives_no_list_or_too_many_items_fails_naming_the_node(items, message):
    from raytroupe.actors.orchestrator.graphs.routing import GraphFailed  # noqa: PLC0415

    graph = {"start": "a", "nodes": [{"id": "a", "role": "w", "instructions": "x"},
                                     {"id": "m", "role": "w", "instructions": "{item}"}],
             "edges": [{"source": "a", "target": "m", "map": "topics"}]}  # fmt: skip
    if items == "missing.x":
        with pytest.raises(ValidationError, match=message):  # refused when the team loads
            _edges({**graph, "edges": [{"source": "a", "target": "m", "map": items}]})
        return
    graph["edges"][0]["map"] = items
    with pytest.raises(GraphFailed, match=message) as failed:
        _edges(graph).routed([(GraphTask(node="a"), "")], {"topics": 3}, {})
    assert failed.value.error.detail["node"] == "a"
