"""A graph workflow: conditional edges, a loop, and a hard limit on steps."""

import pytest
from pydantic import ValidationError
from wiring import build_troupe, run

from raytroupe.protocols import (
    AgentSpec,
    ErrorCode,
    GraphEdge,
    GraphNode,
    GraphSpec,
    ScriptedModel,
    ScriptedTurn,
    TeamSpec,
)
from raytroupe.runtime import Team


def scripted(*texts):
    return ScriptedModel(turns=tuple(ScriptedTurn(text=t) for t in texts))


def loop_team(max_steps=8):
    graph = GraphSpec(
        start="draft",
        max_steps=max_steps,
        nodes=(
            GraphNode(id="draft", role="writer", instructions="Draft: {task}"),
            GraphNode(id="review", role="reviewer", instructions="Review the draft."),
        ),
        edges=(
            GraphEdge(source="draft", target="review"),
            GraphEdge(source="review", target="draft", when=r"^\s*revise"),
            GraphEdge(source="review", target="end"),
        ),
    )
    agents = (
        AgentSpec(name="writer", role="writer", model="w"),
        AgentSpec(name="reviewer", role="reviewer", model="r"),
    )
    return TeamSpec(name="loop", planner_model="offline", agents=agents, graph=graph)


def test_the_graph_loops_until_its_condition_sends_it_to_the_end():
    models = {"w": scripted("draft one", "draft two"),
              "r": scripted("Revise: more detail", "approved")}  # fmt: skip

    async def main():
        troupe = await build_troupe(models)
        return await troupe.run("a haiku about Ray", loop_team())

    result = run(main())
    assert result.status == "succeeded", result.error
    assert [s.id for s in result.subtasks] == ["draft.1", "review.2", "draft.3", "review.4"]
    assert [s.agent for s in result.subtasks] == ["writer", "reviewer"] * 2
    assert result.answer == "approved"
    assert result.subtasks[0].instructions == "Draft: a haiku about Ray"
    assert result.subtasks[2].depends_on == ()  # fed the previous output as input instead


def test_a_loop_that_never_ends_stops_at_the_step_limit():
    models = {"w": scripted(*["draft"] * 2), "r": scripted(*["revise again"] * 2)}

    async def main():
        troupe = await build_troupe(models)
        return await troupe.run("anything", loop_team(max_steps=4))

    result = run(main())
    assert result.status == "failed"
    assert result.error.code is ErrorCode.ITERATION_LIMIT
    assert len(result.subtasks) == 4


@pytest.mark.parametrize(
    ("edges", "message"),
    [
        ((GraphEdge(source="draft", target="nowhere"),), "unknown node"),
        ((GraphEdge(source="draft", target="end", when="(unclosed"),), "not a regex"),
    ],
)
def test_graphs_are_validated(edges, message):
    with pytest.raises(ValidationError, match=message):
        GraphSpec(start="draft", nodes=(GraphNode(id="draft", role="w", instructions="x"),),
                  edges=edges)  # fmt: skip


def test_the_example_review_loop_loads():
    team = Team.from_yaml("examples/teams/review_loop.yaml")
    assert team.graph is not None
    assert team.graph.state is not None
    assert {"draft", "notes"} <= set(team.graph.fields or ())


def test_an_edge_pattern_that_backtracks_without_end_is_cut_off_as_no_match():
    """A team file's pattern meets a model's output: neither may stall the orchestrator."""
    import time  # noqa: PLC0415

    from raytroupe.protocols.graph import EDGE_MATCH_TIMEOUT_S, edge_text_matches  # noqa: PLC0415

    started = time.monotonic()
    assert not edge_text_matches(r"(a|aa)+$", "a" * 64 + "!")
    assert time.monotonic() - started < 100 * EDGE_MATCH_TIMEOUT_S  # cut off, not hung
    assert edge_text_matches(r"(a|aa)+$", "aaaa")
