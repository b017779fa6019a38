import random

import pytest
from pydantic import ValidationError

from raytroupe.protocols import (
    SYSTEM_ADDRESSES,
    AgentMessage,
    AgentSpec,
    DeadLetter,
    ErrorCode,
    ErrorPayload,
    Event,
    JobEvent,
    JobResult,
    OfflineModel,
    Plan,
    PlannedSubtask,
    ScriptedModel,
    ScriptedTurn,
    SubtaskResult,
    TeamSpec,
    Timings,
    ToolCall,
    Usage,
)


def sub(id_, *deps, role="worker"):
    return {"id": id_, "role": role, "instructions": f"do {id_}", "depends_on": list(deps)}


def plan(*subtasks):
    return Plan.model_validate({"subtasks": list(subtasks)})


@pytest.mark.parametrize(
    "subtasks",
    [
        [sub("a")],
        [sub("a"), sub("b"), sub("c")],
        [sub("a"), sub("b", "a"), sub("c", "b")],
        [sub("c", "b"), sub("b", "a"), sub("a")],
        [sub("a"), sub("b", "a"), sub("c", "a"), sub("d", "b", "c")],
        [sub("d", "b", "c"), sub("a"), sub("c", "a"), sub("b", "a")],
        [sub("a"), sub("b", "a", "a")],
    ],
    ids=[
        "single",
        "independent",
        "chain",
        "reversed-chain",
        "diamond",
        "shuffled-diamond",
        "dup-dep",
    ],
)
def test_valid_plans(subtasks):
    p = plan(*subtasks)
    assert [s.id for s in p.subtasks] == [s["id"] for s in subtasks]
    assert all(isinstance(s, PlannedSubtask) for s in p.subtasks)


@pytest.mark.parametrize(
    "subtasks",
    [
        [sub("a"), sub("a")],
        [sub("a"), sub("b"), sub("a", "b")],
        [sub("x", role="r1"), sub("x", role="r2")],
    ],
)
def test_duplicate_ids_are_rejected(subtasks):
    with pytest.raises(ValidationError, match="not unique"):
        plan(*subtasks)


@pytest.mark.parametrize(
    ("subtasks", "missing"),
    [
        ([sub("a", "ghost")], "ghost"),
        ([sub("a"), sub("b", "a", "c")], "c"),
        ([sub("a", "A")], "A"),
    ],
)
def test_unknown_dependencies_are_rejected(subtasks, missing):
    with pytest.raises(ValidationError, match=rf"depends on unknown \['{missing}'\]"):
        plan(*subtasks)


@pytest.mark.parametrize(
    ("subtasks", "in_cycle"),
    [
        ([sub("a", "a")], ["a"]),
        ([sub("a", "b"), sub("b", "a")], ["a", "b"]),
        ([sub("a", "c"), sub("b", "a"), sub("c", "b")], ["a", "b", "c"]),
        ([sub("root"), sub("a", "root", "b"), sub("b", "a")], ["a", "b"]),
        (
            [sub("a"), sub("b", "a"), sub("c", "b", "d"), sub("d", "c"), sub("e", "d")],
            ["c", "d", "e"],
        ),
    ],
    ids=["self", "two", "three", "behind-a-root", "with-downstream"],
)
def test_cycles_are_rejected(subtasks, in_cycle):
    with pytest.raises(ValidationError, match="dependency cycle") as info:
        plan(*subtasks)
    assert str(in_cycle) in str(info.value)


def test_empty_plan_is_rejected():
    with pytest.raises(ValidationError):
        Plan(subtasks=())


def test_plan_size_limit():
    chain = [sub("s0")] + [sub(f"s{i}", f"s{i - 1}") for i in range(1, 1024)]
    assert len(plan(*chain).subtasks) == 1024
    with pytest.raises(ValidationError):
        plan(*chain, sub("s1024", "s1023"))


@pytest.mark.parametrize(
    "bad",
    [
        {"id": "a b"},
        {"id": ""},
        {"id": "role:x"},
        {"role": "x" * 65},
        {"role": "-r"},
        {"instructions": ""},
        {"depends_on": ["not valid"]},
        {"extra": 1},
    ],
)
def test_planned_subtask_fields_are_validated(bad):
    with pytest.raises(ValidationError, match=next(iter(bad))):
        PlannedSubtask.model_validate({**sub("a"), **bad})


def test_random_dags_are_valid_and_back_edges_make_cycles_property():
    rng = random.Random(3)  # noqa: S311 - a seeded, reproducible test input
    for _ in range(200):
        n = rng.randint(2, 30)
        ids = [f"t{i}" for i in range(n)]
        deps = {i: sorted(rng.sample(range(i), rng.randint(0, min(i, 3)))) for i in range(n)}
        order = list(range(n))
        rng.shuffle(order)
        nodes = [sub(ids[i], *(ids[d] for d in deps[i])) for i in order]
        assert len(plan(*nodes).subtasks) == n
        target = rng.randrange(1, n)
        source = rng.randrange(target)
        # make target reachable from source by a direct edge, then close the loop
        deps[target] = sorted({*deps[target], source})
        deps[source] = sorted({*deps[source], target})
        looped = [sub(ids[i], *(ids[d] for d in deps[i])) for i in order]
        with pytest.raises(ValidationError, match="dependency cycle"):
            plan(*looped)


def test_plan_is_frozen():
    p = plan(sub("a"))
    with pytest.raises(ValidationError):
        p.subtasks = ()


def agent(name, role="worker", **fields):
    return {"name": name, "role": role, **fields}


def test_team_spec_defaults_and_roles():
    team = TeamSpec.model_validate(
        {"agents": [agent("w1", "writer"), agent("r1", "researcher"), agent("w2", "writer")]}
    )
    assert team.name == "team"
    assert team.roles == ("writer", "researcher")
    assert team.planner_model == "default"
    assert team.max_parallel == 16
    assert team.models == {}
    first = team.agents[0]
    assert (first.model, first.tools, first.max_turns, first.max_concurrency, first.num_cpus) == (
        "default",
        (),
        6,
        4,
        0.0,
    )


@pytest.mark.parametrize(
    ("names", "duplicates"),
    [
        (["a", "a"], "a"),
        (["a", "b", "a", "b", "c"], "a, b"),
        (["z", "y", "z"], "z"),
    ],
)
def test_team_spec_rejects_duplicate_agent_names(names, duplicates):
    with pytest.raises(ValidationError) as info:
        TeamSpec.model_validate({"agents": [agent(n) for n in names]})
    [error] = info.value.errors()
    assert error["msg"] == f"Value error, duplicate agent names: {duplicates}"


def test_team_spec_accepts_distinct_names_sharing_a_role():
    team = TeamSpec.model_validate({"agents": [agent(f"w{i}", "writer") for i in range(5)]})
    assert team.roles == ("writer",)


@pytest.mark.parametrize("name", sorted(SYSTEM_ADDRESSES))
def test_agent_names_reserved_for_system_actors_are_rejected(name):
    with pytest.raises(ValidationError, match="reserved for a system actor"):
        AgentSpec.model_validate(agent(name))
    with pytest.raises(ValidationError, match="reserved"):
        TeamSpec.model_validate({"agents": [agent("ok"), agent(name)]})


@pytest.mark.parametrize("name", ["routers", "router-1", "my-llm", "driver2"])
def test_names_near_reserved_ones_are_allowed(name):
    assert AgentSpec.model_validate(agent(name)).name == name


@pytest.mark.parametrize(
    "bad",
    [
        {"name": "a b"},
        {"name": "role:w"},
        {"name": ""},
        {"role": "r r"},
        {"model": "m/1"},
        {"tools": ["ok", "not ok"]},
        {"max_turns": 0},
        {"max_turns": 101},
        {"max_concurrency": 0},
        {"max_concurrency": 257},
        {"num_cpus": -1},
        {"surprise": True},
    ],
)
def test_agent_spec_fields_are_validated(bad):
    with pytest.raises(ValidationError, match=next(iter(bad))):
        AgentSpec.model_validate({**agent("a"), **bad})


@pytest.mark.parametrize(
    "bad",
    [
        {"agents": []},
        {"name": "bad name"},
        {"max_parallel": 0},
        {"max_parallel": 1025},
        {"planner_model": ""},
        {"models": {"bad alias": {"provider": "offline"}}},
        {"models": {"m": {"provider": "openai"}}},
        {"models": {"m": {"provider": "scripted", "turns": []}}},
        {"models": {"m": {"provider": "offline", "latency_s": -1}}},
        {"models": {"m": {"provider": "offline", "latency_s": 601}}},
        {"extra": 1},
    ],
)
def test_team_spec_fields_are_validated(bad):
    with pytest.raises(ValidationError):
        TeamSpec.model_validate({"agents": [agent("a")], **bad})


def test_team_spec_models_are_discriminated_by_provider():
    team = TeamSpec.model_validate(
        {
            "agents": [agent("a", model="script")],
            "planner_model": "fast",
            "models": {
                "fast": {"provider": "offline", "latency_s": 0.5},
                "script": {
                    "provider": "scripted",
                    "turns": [
                        {"tool_calls": [{"call_id": "c1", "tool": "search"}]},
                        {"text": "done", "finish_reason": "stop"},
                    ],
                },
            },
        }
    )
    assert team.models["fast"] == OfflineModel(latency_s=0.5)
    script = team.models["script"]
    assert isinstance(script, ScriptedModel)
    assert script.turns[0] == ScriptedTurn(tool_calls=(ToolCall(call_id="c1", tool="search"),))
    assert script.turns[0].finish_reason is None
    assert TeamSpec.model_validate(team.model_dump(mode="json")) == team


def test_usage_addition_and_totals():
    a = Usage(prompt_tokens=1, completion_tokens=2, cost_usd=0.5, calls=1)
    b = Usage(prompt_tokens=10, completion_tokens=20, cost_usd=0.25, calls=2)
    total = a + b
    assert total == Usage(prompt_tokens=11, completion_tokens=22, cost_usd=0.75, calls=3)
    assert total.total_tokens == 33
    assert Usage() + Usage() == Usage()
    with pytest.raises(ValidationError):
        Usage(prompt_tokens=-1)


def test_timings_total():
    t = Timings(submitted_at=100.0, finished_at=112.5, plan_s=1.0)
    assert t.total_s == 12.5


@pytest.mark.parametrize(
    ("type_", "terminal"),
    [
        ("job_submitted", False),
        ("plan_ready", False),
        ("subtask_started", False),
        ("subtask_finished", False),
        ("job_aggregating", False),
        ("job_succeeded", True),
        ("job_failed", True),
    ],
)
def test_job_event_terminal(type_, terminal):
    assert JobEvent(job_id="j", seq=1, at=0.0, type=type_).terminal is terminal


@pytest.mark.parametrize("bad", [{"seq": 0}, {"type": "job_exploded"}, {"extra": 1}])
def test_job_event_fields_are_validated(bad):
    with pytest.raises(ValidationError):
        JobEvent.model_validate({"job_id": "j", "seq": 1, "at": 0.0, "type": "plan_ready", **bad})


def test_job_result_round_trips_through_json():
    error = ErrorPayload(code=ErrorCode.JOB_FAILED, message="subtask b failed")
    result = JobResult(
        job_id="j",
        task="write",
        team="team",
        status="failed",
        subtasks=(
            SubtaskResult(id="a", role="r", instructions="i", status="succeeded", output="x"),
            SubtaskResult(
                id="b", role="r", instructions="i", depends_on=("a",), status="failed", error=error
            ),
            SubtaskResult(id="c", role="r", instructions="i", depends_on=("b",), status="skipped"),
        ),
        usage=Usage(calls=2),
        timings=Timings(submitted_at=1.0, finished_at=2.0),
        error=error,
    )
    assert JobResult.model_validate(result.model_dump(mode="json")) == result
    assert JobResult.model_validate_json(result.model_dump_json()) == result


def test_job_result_status_is_terminal_only():
    with pytest.raises(ValidationError):
        JobResult(
            job_id="j",
            task="t",
            team="team",
            status="running",
            timings=Timings(submitted_at=1.0, finished_at=2.0),
        )


def test_dead_letter_keeps_message_or_raw_bytes():
    msg = AgentMessage(sender="driver", recipient="nobody", payload=Event(name="e"))
    letter = DeadLetter(
        at=1.0, reason=ErrorCode.UNKNOWN_RECIPIENT, detail="no such actor", message=msg
    )
    assert DeadLetter.model_validate(letter.model_dump(mode="json")) == letter
    raw = DeadLetter(at=1.0, reason=ErrorCode.MALFORMED_ENVELOPE, detail="bad", raw=b"\xc1\x00")
    assert raw.raw == b"\xc1\x00"
    assert DeadLetter.model_validate(raw.model_dump()) == raw
    with pytest.raises(ValidationError):
        DeadLetter(at=1.0, reason="not_a_code", detail="x")


@pytest.mark.parametrize(
    "schema",
    [
        {"$ref": "http://169.254.169.254/latest/schema.json"},
        {"type": "object", "properties": {"a": {"$ref": "https://example.com/a.json"}}},
        {"allOf": [{"$dynamicRef": "other.json#x"}]},
    ],
)
def test_an_output_schema_that_refers_to_another_document_is_refused_at_the_door(schema):
    from raytroupe.protocols import AgentSpec, TeamSpec  # noqa: PLC0415

    with pytest.raises(ValidationError, match="refers to other documents"):
        PlannedSubtask(id="s", role="r", instructions="x", output_schema=schema)
    with pytest.raises(ValidationError, match="refers to other documents"):
        TeamSpec(agents=(AgentSpec(name="a", role="r"),), output_schema=schema)


def test_an_output_schema_with_references_inside_itself_is_fine():
    schema = {"$defs": {"n": {"type": "integer"}}, "properties": {"a": {"$ref": "#/$defs/n"}}}
    assert PlannedSubtask(id="s", role="r", instructions="x", output_schema=schema)
