"""The graph engine in one process: shared state, edges, joins, maps, subgraphs, interrupts,
checkpoints, forks and resumes, with scripted models (each plays its answers once, so a
node run twice runs out of answers and fails the job)."""

import asyncio
import time

import pytest
from wiring import build_troupe, order, run

from raytroupe.protocols import (
    AgentSpec,
    Budget,
    Conflict,
    ErrorCode,
    InvalidInput,
    LLMRequest,
    OfflineModel,
    ScriptedModel,
    ScriptedTurn,
    TeamSpec,
)
from raytroupe.protocols.graph import GraphSpec
from tests.support.graph_specs import NESTED, PAUSED


def scripted(*texts):
    return ScriptedModel(turns=tuple(ScriptedTurn(text=t) for t in texts))


def team(graph: dict, *roles: str, name: str = "g") -> TeamSpec:
    agents = tuple(AgentSpec(name=f"{name}-{r}", role=r, model=r) for r in roles)
    return TeamSpec(name=name, planner_model="offline", agents=agents,
                    graph=GraphSpec.model_validate(graph), max_parallel=8)  # fmt: skip


REVIEW = {
    "start": "draft",
    "answer": "draft",
    "max_steps": 10,
    "state": {
        "json_schema": {"type": "object", "properties": {
            "draft": {"type": "string"},
            "notes": {"type": "array", "items": {"type": "string"}},
            "approved": {"type": "boolean"},
        }},
        "reducers": {"notes": "append"},
        "initial": {"notes": []},
    },
    "nodes": [
        {"id": "draft", "role": "writer", "writes": ["draft"],
         "instructions": "Task: {task}\nDraft so far: {state.draft}\nNotes: {state.notes}"},
        {"id": "review", "role": "reviewer", "writes": ["notes", "approved"],
         "instructions": "Review: {state.draft}"},
    ],
    "edges": [
        {"source": "draft", "target": "review"},
        {"source": "review", "target": "end", "condition": "approved"},
        {"source": "review", "target": "draft"},
    ],
}  # fmt: skip


def test_the_writer_revises_its_own_draft_from_the_notes_in_the_state():
    models = {
        "writer": scripted("draft one", "draft two"),
        "reviewer": scripted('{"notes": "shorter", "approved": false}',
                             '{"notes": "good", "approved": true}'),
    }  # fmt: skip

    async def main():
        troupe = await build_troupe(models)
        return await troupe.run("a haiku", team(REVIEW, "writer", "reviewer"))

    result = run(main())
    assert result.status == "succeeded", result.error
    assert [s.id for s in result.subtasks] == ["draft.1", "review.2", "draft.3", "review.4"]
    second = result.subtasks[2].instructions
    assert "Draft so far: draft one" in second  # its own draft, and the reviewer's note
    assert '["shorter"]' in second
    assert result.answer == "draft two"
    assert result.state == {"draft": "draft two", "notes": ["shorter", "good"], "approved": True}


def test_an_invalid_update_goes_back_with_its_problems_then_fails_naming_the_node():
    models = {
        "writer": scripted("draft one", "draft two"),
        "reviewer": scripted('{"approved": "yes"}', '{"notes": "ok", "approved": true}'),
    }

    async def main():
        troupe = await build_troupe(models)
        return await troupe.run("a haiku", team(REVIEW, "writer", "reviewer"))

    result = run(main())
    assert result.status == "succeeded", result.error
    assert [s.id for s in result.subtasks] == ["draft.1", "review.2", "review.2.u2"]
    bad = {"writer": scripted("d"), "reviewer": scripted("not json", '{"approved": 3}')}

    async def failing():
        troupe = await build_troupe(bad)
        return await troupe.run("a haiku", team(REVIEW, "writer", "reviewer"))

    result = run(failing())
    assert result.status == "failed"
    assert result.error.code is ErrorCode.QUALITY_GATE
    assert result.error.detail["node"] == "review"
    assert "not of type 'boolean'" in result.error.message


def test_a_fan_out_runs_its_branches_in_one_superstep_and_a_join_waits_for_all():
    graph = {
        "start": "split",
        "answer": "summary",
        "state": {"json_schema": {"type": "object", "properties": {
            "facts": {"type": "array", "items": {"type": "string"}},
            "summary": {"type": "string"}}}, "reducers": {"facts": "append"}},
        "nodes": [
            {"id": "split", "role": "lead", "instructions": "Split {task}", "writes": []},
            {"id": "a", "role": "a", "instructions": "Part a", "writes": ["facts"]},
            {"id": "b", "role": "b", "instructions": "Part b", "writes": ["facts"]},
            {"id": "b2", "role": "b", "instructions": "Part b, more", "writes": ["facts"]},
            {"id": "sum", "role": "lead", "join": "all", "writes": ["summary"],
             "instructions": "Sum up {state.facts}"},
        ],
        "edges": [
            {"source": "split", "target": ["a", "b"]},
            {"source": "a", "target": "sum"},
            {"source": "b", "target": "b2"},
            {"source": "b2", "target": "sum"},
        ],
    }  # fmt: skip
    models = {"lead": scripted("ok", "all three"), "a": scripted("fact a"),
              "b": scripted("fact b", "fact b2")}  # fmt: skip

    async def main():
        troupe = await build_troupe(models)
        return await troupe.run("it", team(graph, "lead", "a", "b"))

    result = run(main())
    assert result.status == "succeeded", result.error
    assert [s.id for s in result.subtasks] == ["split.1", "a.2", "b.2", "b2.3", "sum.4"]
    assert result.state["facts"] == ["fact a", "fact b", "fact b2"]
    assert "fact b2" in result.subtasks[-1].instructions  # it ran once, after every branch


def test_a_join_of_the_first_k_cancels_the_branches_still_running():
    graph = {
        "start": ["fast", "slow"],
        "nodes": [
            {"id": "fast", "role": "fast", "instructions": "Be quick"},
            {"id": "slow", "role": "slow", "instructions": "Take your time"},
            {"id": "pick", "role": "fast", "instructions": "Pick", "join": 1},
        ],
        "edges": [{"source": "fast", "target": "pick"}, {"source": "slow", "target": "pick"}],
    }
    models = {"fast": scripted("first", "picked"), "slow": OfflineModel(latency_s=30.0)}

    async def main():
        troupe = await build_troupe(models)
        return await troupe.run("race", team(graph, "fast", "slow"), timeout=20)

    result = run(main(), guard_s=25)
    assert result.status == "succeeded", result.error
    by_id = {s.id: s for s in result.subtasks}
    assert by_id["slow.1"].status == "skipped"
    assert by_id["slow.1"].error.code is ErrorCode.CANCELLED
    assert result.answer == "picked"


def test_a_map_step_runs_the_node_once_per_item_of_a_list_in_the_state():
    graph = {
        "start": "plan",
        "state": {"json_schema": {"type": "object", "properties": {
            "topics": {"type": "array", "items": {"type": "string"}},
            "found": {"type": "array", "items": {"type": "string"}}}},
            "reducers": {"found": "append"}},
        "nodes": [
            {"id": "plan", "role": "lead", "writes": ["topics"],
             "instructions": "Topics of {task}"},
            {"id": "research", "role": "worker", "writes": ["found"],
             "instructions": "Research {item}"},
        ],
        "edges": [{"source": "plan", "target": "research", "map": "topics"}],
    }  # fmt: skip
    models = {"lead": scripted('{"topics": ["ray", "actors", "serve"]}'),
              "worker": scripted("r1", "r2", "r3")}  # fmt: skip

    async def main():
        troupe = await build_troupe(models)
        return await troupe.run("ray", team(graph, "lead", "worker"))

    result = run(main())
    assert result.status == "succeeded", result.error
    assert [s.id for s in result.subtasks][1:] == ["research.2.0", "research.2.1", "research.2.2"]
    assert sorted(s.instructions for s in result.subtasks[1:]) == [
        "Research actors", "Research ray", "Research serve"]  # fmt: skip
    assert sorted(result.state["found"]) == ["r1", "r2", "r3"]


def test_a_subgraph_runs_with_its_own_state_mapped_in_and_out():
    models = {"outer": scripted("hello"), "inner": scripted("HELLO")}

    async def main():
        troupe = await build_troupe(models)
        return await troupe.run("hi", team(NESTED, "outer", "inner"))

    result = run(main())
    assert result.status == "succeeded", result.error
    assert [s.id for s in result.subtasks] == ["write.1", "loud.2.upper.1"]
    assert result.subtasks[1].instructions == "Shout hello"
    assert result.answer == "HELLO"


def test_a_loop_that_changes_nothing_fails_naming_the_node():
    graph = {
        "start": "a",
        "state": {"json_schema": {"type": "object", "properties": {"x": {"type": "string"}}}},
        "nodes": [{"id": "a", "role": "w", "instructions": "again", "writes": ["x"]}],
        "edges": [{"source": "a", "target": "a"}],
    }
    models = {"w": scripted("same", "same", "same")}

    async def main():
        troupe = await build_troupe(models)
        return await troupe.run("loop", team(graph, "w"))

    result = run(main())
    assert result.status == "failed"
    assert result.error.code is ErrorCode.ITERATION_LIMIT
    assert result.error.detail["node"] == "a"
    assert len(result.subtasks) == 2


def test_a_condition_that_fails_on_the_state_fails_the_job_typed():
    graph = {
        "start": "a",
        "state": {"json_schema": {"type": "object", "properties": {"x": {"type": "string"}}}},
        "nodes": [{"id": "a", "role": "w", "instructions": "go", "writes": ["x"]}],
        "edges": [{"source": "a", "target": "end", "condition": "x > 3"}],
    }

    async def main():
        troupe = await build_troupe({"w": scripted("text")})
        return await troupe.run("t", team(graph, "w"))

    result = run(main())
    assert result.status == "failed"
    assert result.error.code is ErrorCode.INVALID_INPUT
    assert result.error.detail["node"] == "a"


async def _status(troupe, job_id, wanted, tries=200):
    for _ in range(tries):
        if await troupe.orchestrator.status(job_id) == wanted:
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"job never reached {wanted}")


def test_an_interrupt_pauses_the_graph_until_a_person_resumes_it():
    async def main():
        troupe = await build_troupe({"writer": scripted("v1"), "editor": scripted("v2")})
        orchestrator = troupe.orchestrator
        job_id = await troupe.desk.submit(*order("a poem", team(PAUSED, "writer", "editor")))
        await _status(troupe, job_id, "awaiting_input")
        events = await orchestrator.events(job_id)
        paused = [e for e in events if e.type == "graph_interrupted"][-1]
        with pytest.raises(InvalidInput):  # checked against the schema, nothing recorded
            await orchestrator.resume(job_id, state={"text": 5})
        with pytest.raises(Conflict):
            await orchestrator.resume(job_id, interrupt="0/nowhere/before")
        interrupt = await orchestrator.resume(job_id, value="ship it")
        result = await orchestrator.wait(job_id, 10)
        with pytest.raises(Conflict):  # the graph no longer waits
            await orchestrator.resume(job_id, value="again")
        return paused, interrupt, result

    paused, interrupt, result = run(main())
    assert paused.data["state"] == {"text": "v1"}
    assert interrupt.id == "2/publish/before"
    assert result.status == "succeeded", result.error
    assert result.subtasks[-1].instructions == "Publish v1: ship it"
    assert result.state == {"text": "v2", "verdict": "ship it"}


def test_an_interrupt_after_a_node_lets_a_person_edit_the_state_that_routes_next():
    graph = {
        "start": "check",
        "state": {"json_schema": {"type": "object", "properties": {
            "ok": {"type": "boolean"}, "out": {"type": "string"}}}, "initial": {"ok": False}},
        "nodes": [
            {"id": "check", "role": "w", "instructions": "check", "writes": [],
             "interrupt": "after"},
            {"id": "go", "role": "w", "instructions": "go", "writes": ["out"]},
        ],
        "edges": [{"source": "check", "target": "go", "condition": "ok"}],
    }  # fmt: skip

    async def main():
        troupe = await build_troupe({"w": scripted("checked", "went")})
        job_id = await troupe.desk.submit(*order("t", team(graph, "w")))
        await _status(troupe, job_id, "awaiting_input")
        await troupe.orchestrator.resume(job_id, state={"ok": True})
        return await troupe.orchestrator.wait(job_id, 10)

    result = run(main())
    assert result.status == "succeeded", result.error
    assert result.answer == "went"


def test_checkpoints_are_listed_and_a_fork_starts_from_one_with_an_edited_state():
    graph = {
        "start": "a",
        "answer": "log",
        "state": {"json_schema": {"type": "object", "properties": {
            "log": {"type": "array", "items": {"type": "string"}}}},
            "reducers": {"log": "append"}},
        "nodes": [
            {"id": "a", "role": "w", "instructions": "a", "writes": ["log"]},
            {"id": "b", "role": "w", "instructions": "b after {state.log}", "writes": ["log"]},
        ],
        "edges": [{"source": "a", "target": "b"}],
    }  # fmt: skip

    async def main():
        troupe = await build_troupe({"w": scripted("A", "B", "B2")})
        orchestrator = troupe.orchestrator
        first = await troupe.run("t", team(graph, "w"))
        points = await orchestrator.checkpoints(first.job_id)
        fork_id = await orchestrator.fork(first.job_id, 1, state={"log": ["what if"]})
        forked = await orchestrator.wait(fork_id, 10)
        with pytest.raises(InvalidInput):
            await orchestrator.fork(first.job_id, 99)
        submitted = (await orchestrator.events(fork_id))[0]
        return first, points, forked, submitted

    first, points, forked, submitted = run(main())
    assert submitted.type == "job_submitted"
    assert submitted.data["forked_from"] == {
        "job_id": first.job_id, "step": 1, "state": {"log": ["what if"]}}  # fmt: skip
    assert first.state == {"log": ["A", "B"]}
    assert [(p.step, [t.node for t in p.next]) for p in points] == [
        (0, ["a"]), (1, ["b"]), (2, [])]  # fmt: skip
    assert forked.status == "succeeded", forked.error
    assert [s.id for s in forked.subtasks] == ["b.2"]  # a is not run again
    assert forked.state == {"log": ["what if", "B2"]}


def test_a_restarted_orchestrator_resumes_the_graph_from_its_checkpoint(tmp_path):
    """The scripted writer has one answer per node: a node run twice would fail the job."""
    journal = tmp_path / "journal.db"

    async def before():
        troupe = await build_troupe({"writer": scripted("v1")}, journal=journal)
        job_id = await troupe.desk.submit(*order("a poem", team(PAUSED, "writer", "editor")))
        await _status(troupe, job_id, "awaiting_input")
        await troupe.orchestrator.on_stop()  # the process goes away while it waits
        return job_id

    async def after(job_id):
        troupe = await build_troupe({"editor": scripted("v2")}, journal=journal)
        await _status(troupe, job_id, "awaiting_input")  # paused again, where it was
        await troupe.orchestrator.resume(job_id, value="ok")
        return await troupe.orchestrator.wait(job_id, 10)

    job_id = run(before())
    result = run(after(job_id))
    assert result.status == "succeeded", result.error
    assert [s.id for s in result.subtasks] == ["draft.1", "publish.2"]
    assert result.state == {"text": "v2", "verdict": "ok"}


def test_a_registered_team_runs_as_a_node_in_a_child_job():
    helper = TeamSpec(name="helpers", planner_model="offline",
                      agents=(AgentSpec(name="helper-0", role="h", model="h"),),
                      plan=({"id": "only", "role": "h", "instructions": "{task}"},))  # fmt: skip
    graph = {
        "start": "ask",
        "state": {"json_schema": {"type": "object", "properties": {"got": {"type": "string"}}}},
        "nodes": [{"id": "ask", "team": "helpers", "writes": ["got"],
                   "instructions": "Help with {task}"}],
        "answer": "got",
    }  # fmt: skip

    async def main():
        troupe = await build_troupe({"h": scripted("helped"), "w": scripted("x")})
        await troupe.desk.put_team(helper, create=True)
        return await troupe.run("this", team(graph, "w"))

    result = run(main())
    assert result.status == "succeeded", result.error
    assert result.subtasks[0].agent.startswith("job:")
    assert result.state["got"].endswith("helped")


def test_input_is_the_first_state_nodes_get_what_they_ask_for_and_a_fork_keeps_its_edit():
    graph = {
        "start": "look",
        "state": {"json_schema": {"type": "object", "properties": {
            "topic": {"type": "string"}, "sources": {"type": "object"},
            "found": {"type": "string"}}}},
        "nodes": [{"id": "look", "role": "w", "writes": ["found"], "instructions": "Look",
                   "inputs": {"source": "sources[topic]", "missing": "sources['none']"}}],
    }  # fmt: skip
    given = {"topic": "ray", "sources": {"ray": "Ray runs actors.", "dask": "Dask runs graphs."}}

    async def main():
        troupe = await build_troupe({"w": scripted("one", "two")})
        orchestrator = troupe.orchestrator
        with pytest.raises(InvalidInput, match="first state is invalid"):
            await troupe.desk.submit(*order("t", team(graph, "w"), input={"topic": 5}))
        with pytest.raises(InvalidInput, match="object of its state"):
            await troupe.desk.submit(*order("t", team(graph, "w"), input=["not", "an", "object"]))
        job_id = await troupe.desk.submit(*order("t", team(graph, "w"), input=given))
        first = await orchestrator.wait(job_id, 10)
        fork_id = await orchestrator.fork(job_id, 0, state={"topic": "dask"})
        forked = await orchestrator.wait(fork_id, 10)
        return first, forked, troupe.llm

    first, forked, llm = run(main())
    assert first.status == "succeeded", first.error
    assert first.state["topic"] == "ray"
    assert forked.state["topic"] == "dask"  # the fork's edit, not the original's input
    asked = [str(r.messages) for r in llm.payloads(LLMRequest) if "Look" in str(r.messages)]
    assert "Ray runs actors." in asked[0]
    assert "Dask runs graphs." not in asked[0]  # only what it asked for, not the whole state
    assert "Dask runs graphs." in asked[1]


def test_a_team_node_draws_on_its_parents_budget_account():
    """A child job may not spend the job's budget again: both draw on the parent's account."""
    helper = TeamSpec(name="helpers", planner_model="offline",
                      agents=(AgentSpec(name="helper-0", role="h", model="h"),),
                      plan=({"id": "only", "role": "h", "instructions": "{task}"},))  # fmt: skip
    graph = {
        "start": "think",
        "nodes": [{"id": "think", "role": "w", "instructions": "think"},
                  {"id": "ask", "team": "helpers", "instructions": "Help with {task}"}],
        "edges": [{"source": "think", "target": "ask"}],
    }  # fmt: skip
    spent = ScriptedTurn(text="thought", prompt_tokens=1000, completion_tokens=500)

    async def main(tokens):
        models = {"h": scripted("helped"), "w": ScriptedModel(turns=(spent,))}
        troupe = await build_troupe(models)
        await troupe.desk.put_team(helper, create=True)
        parent = team(graph, "w").model_copy(update={"budget": Budget(tokens=tokens)})
        result = await troupe.run("this", parent)
        return result, await troupe.pool.spent(f"job:{result.job_id}")

    result, _ = run(main(2_000))  # 1,500 spent: the child's call (1,024 reserved) does not fit
    assert result.status == "failed"
    assert result.error.code is ErrorCode.BUDGET_EXCEEDED
    assert result.error.detail["node"] == "ask"
    result, spent_by_all = run(main(10_000))
    assert result.status == "succeeded", result.error
    assert spent_by_all.tokens > 1_500  # the child's calls are on the parent's account


def test_a_caller_may_not_name_a_budget_account():
    reviewed = team(REVIEW, "writer", "reviewer")

    async def main():
        troupe = await build_troupe({"writer": scripted("x"), "reviewer": scripted("y")})
        with pytest.raises(InvalidInput, match="orchestrator's to set"):
            await troupe.desk.submit(
                *order("t", reviewed, budget=Budget(tokens=10, account="job-victim"))
            )

    run(main())
    with pytest.raises(ValueError, match="orchestrator's to set"):
        TeamSpec.model_validate({**reviewed.model_dump(), "budget": {"account": "job-victim"}})


def test_teams_whose_graphs_name_each_other_stop_at_the_depth_limit():
    def bouncing(name, other):
        graph = GraphSpec.model_validate({"start": "hop", "nodes": [{"id": "hop", "team": other}]})
        agents = (AgentSpec(name=f"{name}-0", role="r", model="w"),)
        return TeamSpec(name=name, planner_model="offline", agents=agents, graph=graph)

    async def main():
        troupe = await build_troupe({"w": scripted("unused")})
        await troupe.desk.put_team(bouncing("ping", "pong"), create=True)
        await troupe.desk.put_team(bouncing("pong", "ping"), create=True)
        job_id = await troupe.desk.submit(*order("bounce", "ping"))
        return await troupe.orchestrator.wait(job_id, 20)

    result = run(main(), guard_s=30)
    assert result.status == "failed"
    assert result.error.code is ErrorCode.INVALID_INPUT
    assert result.error.detail["node"] == "hop"
    assert "at most 4" in result.error.message


WAITING = {
    "start": "draft",
    "answer": "text",
    "state": {"json_schema": {"type": "object", "properties": {
        "text": {"type": "string"}, "deadline": {"type": "number"}}}},
    "nodes": [
        {"id": "draft", "role": "writer", "writes": ["text"], "instructions": "Write {task}"},
        {"id": "publish", "role": "editor", "writes": ["text"], "wait_s": 1.0,
         "instructions": "Publish {state.text}"},
    ],
    "edges": [{"source": "draft", "target": "publish"}],
}  # fmt: skip
"""A second node that waits a second after the first: a durable timer between them."""


def _waiting(**publish) -> dict:
    nodes = [WAITING["nodes"][0], {**WAITING["nodes"][1], "wait_s": None, **publish}]
    return {**WAITING, "nodes": nodes}


async def _timer(troupe, job_id, tries=200):
    for _ in range(tries):
        points = await troupe.orchestrator.checkpoints(job_id)
        if points and points[-1].timer is not None:
            return points[-1].timer
        await asyncio.sleep(0.02)
    raise AssertionError("the graph never slept")


def test_a_node_waits_for_its_time_and_a_restart_sleeps_only_what_is_left(tmp_path):
    """The process goes away while the graph sleeps; the next one wakes it at the time set
    before, not a whole wait later, and runs each node once (one scripted answer each)."""
    journal = tmp_path / "journal.db"

    async def before():
        troupe = await build_troupe({"writer": scripted("v1")}, journal=journal)
        job_id = await troupe.desk.submit(*order("a notice", team(WAITING, "writer", "editor")))
        timer = await _timer(troupe, job_id)
        assert await troupe.orchestrator.status(job_id) == "running"
        await troupe.orchestrator.on_stop()
        return job_id, timer

    async def after(job_id):
        troupe = await build_troupe({"editor": scripted("v2")}, journal=journal)
        result = await troupe.orchestrator.wait(job_id, 20)
        return result, await troupe.orchestrator.events(job_id)

    job_id, timer = run(before())
    assert timer.node == "publish"
    result, events = run(after(job_id))
    assert result.status == "succeeded", result.error
    assert [s.id for s in result.subtasks] == ["draft.1", "publish.2"]
    assert result.state["text"] == "v2"
    slept = [e.data["wake_at"] for e in events if e.type == "graph_waiting"]
    assert set(slept) == {timer.wake_at}  # set once: not again after the restart
    (woken,) = [e for e in events if e.type == "graph_woken"]
    started = [e for e in events if e.type == "subtask_started" and e.subtask_id == "publish.2"]
    assert woken.at >= timer.wake_at
    assert started[0].at >= timer.wake_at


def test_wait_until_reads_the_time_from_the_state_and_a_time_gone_by_does_not_wait():
    async def main(deadline):
        graph = _waiting(wait_until="deadline - 60")
        graph["state"] = {**graph["state"], "initial": {"deadline": deadline}}
        troupe = await build_troupe({"writer": scripted("v1"), "editor": scripted("v2")})
        job_id = await troupe.desk.submit(*order("a notice", team(graph, "writer", "editor")))
        result = await troupe.orchestrator.wait(job_id, 20)
        return result, await troupe.orchestrator.events(job_id)

    result, events = run(main(0.0))  # 1970: long gone
    assert result.status == "succeeded", result.error
    (waiting,) = [e for e in events if e.type == "graph_waiting"]
    assert waiting.data == {"namespace": "", "node": "publish", "wake_at": -60.0}
    soon = time.time() + 61.0  # a second from now
    result, events = run(main(soon))
    assert result.status == "succeeded", result.error
    (woken,) = [e for e in events if e.type == "graph_woken"]
    assert woken.at >= soon - 60


@pytest.mark.parametrize(
    ("deadline", "why"),
    [("tomorrow", "not a UNIX time"), (1e12, "more than 2592000 s")],
)
def test_a_wait_until_that_is_no_time_or_too_far_fails_the_job_naming_the_node(deadline, why):
    """The state is written by models: a deadline a thousand years off does not hold a job."""

    async def main():
        graph = _waiting(wait_until="deadline")
        schema = {"type": "object", "properties": {"text": {"type": "string"}, "deadline": {}}}
        graph["state"] = {"json_schema": schema, "initial": {"deadline": deadline}}
        troupe = await build_troupe({"writer": scripted("v1"), "editor": scripted("v2")})
        job_id = await troupe.desk.submit(*order("a notice", team(graph, "writer", "editor")))
        return await troupe.orchestrator.wait(job_id, 20)

    result = run(main())
    assert result.status == "failed"
    assert result.error.code is ErrorCode.INVALID_INPUT
    assert "wait_until of 'publish'" in result.error.message
    assert why in result.error.message


def test_a_node_waits_for_one_time_or_the_other_and_its_expression_is_checked():
    with pytest.raises(ValueError, match="both wait_s and wait_until"):
        GraphSpec.model_validate(_waiting(wait_s=5, wait_until="deadline"))
    with pytest.raises(ValueError, match="wait_until of node 'publish'"):
        GraphSpec.model_validate(_waiting(wait_until="__import__('os')"))
    with pytest.raises(ValueError, match="less than or equal to 2592000"):
        GraphSpec.model_validate(_waiting(wait_s=1e9))
