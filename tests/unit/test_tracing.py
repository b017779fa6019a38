"""Every job's trace: spans on the JobResult, as JSON, and as live OpenTelemetry spans."""

import json

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind
from wiring import build_troupe, order, run

from raytroupe.actors.telemetry import tracing
from raytroupe.protocols import AgentSpec, JobResult, PlannedSubtask, Span, TeamSpec, as_written
from tests.support.inline import agent_name

TASK = "Tasks:\n- Compute 17 * 23 + 4\n- Describe the tower"


def calculating_team(**fields) -> TeamSpec:
    agents = (
        AgentSpec(name="ada", role="researcher"),
        AgentSpec(name="alan", role="analyst", tools=("calculator",)),
    )
    return TeamSpec(name="research", agents=agents, **fields)


@pytest.fixture(scope="module")
def job() -> JobResult:
    async def main():
        troupe = await build_troupe()
        return await troupe.run(TASK, calculating_team())

    result = run(main())
    assert result.status == "succeeded", result.error
    return result


def kinds(spans: tuple[Span, ...], kind: str) -> list[Span]:
    return [s for s in spans if s.kind == kind]


def test_a_job_has_one_root_a_plan_its_subtasks_their_attempts_and_an_aggregate(job):
    trace = job.trace
    (root,) = kinds(trace, "job")
    assert trace[0] == root
    assert root.parent_id is None
    assert [s for s in trace if s.parent_id is None] == [root]
    assert len(kinds(trace, "plan")) == 1
    assert len(kinds(trace, "aggregate")) == 1
    subtasks = kinds(trace, "subtask")
    assert sorted(s.attributes["subtask_id"] for s in subtasks) == ["s1", "s2"]
    by_id = {s.span_id: s for s in trace}
    for sub in subtasks:
        assert sub.parent_id == root.span_id
        assert sub.attributes["status"] == "succeeded"
        assert sub.attributes["attempt"] == 1
        attempts = [s for s in trace if s.parent_id == sub.span_id]
        assert [a.kind for a in attempts] == ["attempt"]
        assert attempts[0].attributes["agent"] == sub.attributes["agent"]
        assert str(attempts[0].attributes["routed_to"]).startswith("role:")
    for span in kinds(trace, "model_call") + kinds(trace, "tool_call"):
        assert by_id[span.parent_id].kind == "attempt"


def test_model_and_tool_calls_carry_their_facts(job):
    calls = kinds(job.trace, "model_call")
    assert len(calls) == 3  # two turns for the arithmetic (tool, then answer), one for words
    assert job.usage.calls == 3  # sized by its text: no planner call, no aggregation call
    for call in calls:
        assert call.attributes["provider"] == "offline"
        assert call.attributes["model_alias"] == "default"
        assert isinstance(call.attributes["prompt_tokens"], int)
        assert call.attributes["prompt_tokens"] > 0
        assert isinstance(call.attributes["completion_tokens"], int)
        assert "finish_reason" in call.attributes
    (tool,) = kinds(job.trace, "tool_call")
    assert tool.attributes["tool"] == "calculator"
    assert tool.attributes["ok"] is True
    assert tool.attributes["error_code"] is None
    assert isinstance(tool.attributes["duration_s"], float)


def test_a_trace_is_one_tree_in_one_trace_and_time(job):
    trace = job.trace
    by_id = {s.span_id: s for s in trace}
    assert len(by_id) == len(trace)
    assert {s.trace_id for s in trace} == {trace[0].trace_id}
    assert trace[0].trace_id
    for span in trace[1:]:
        parent = by_id[span.parent_id]
        assert parent.start <= span.start <= span.end <= parent.end, (span, parent)


def test_a_trace_round_trips_through_json(job):
    data = json.loads(job.trace_json())
    assert data["job_id"] == job.job_id
    assert data["trace_id"] == job.trace[0].trace_id
    assert tuple(Span.model_validate(s) for s in data["spans"]) == job.trace
    assert JobResult.model_validate_json(job.model_dump_json()) == job


def test_a_redundant_subtask_has_a_resolution_span():
    async def main():
        troupe = await build_troupe()
        agents = (AgentSpec(name="a1", role="w"), AgentSpec(name="a2", role="w"))
        step = PlannedSubtask(id="s1", role="w", instructions="Say hello.", redundancy=2)
        team = TeamSpec(name="q", agents=agents, plan=(step,))
        return await troupe.run("q", team)

    result = run(main())
    assert result.status == "succeeded", result.error
    (sub,) = kinds(result.trace, "subtask")
    (resolution,) = kinds(result.trace, "resolution")
    assert resolution.parent_id == sub.span_id
    assert resolution.attributes["strategy"] == "majority"
    assert resolution.attributes["candidates"] == 2
    assert resolution.attributes["chosen_agent"] in {"a1", "a2"}
    assert "rationale" in resolution.attributes
    attempts = [s for s in result.trace if s.parent_id == sub.span_id and s.kind == "attempt"]
    assert len(attempts) == 2


@pytest.fixture
def live_spans():
    """The in-process troupe's live OpenTelemetry spans, in memory (none after the test)."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.install(provider)
    yield exporter
    tracing.install(None)
    provider.shutdown()


def test_live_spans_form_one_tree_with_gen_ai_attributes(live_spans):
    async def main():
        troupe = await build_troupe()  # planned by the model: the job's own model calls traced
        return await troupe.run(TASK, calculating_team(planning="model"))

    result = run(main())
    assert result.status == "succeeded", result.error
    spans = live_spans.get_finished_spans()
    by_id = {s.context.span_id: s for s in spans}
    (root,) = [s for s in spans if s.parent is None]
    assert root.name == f"job {agent_name('research')}"  # the exported trace: actors' names
    assert root.attributes["raytroupe.job.id"] == result.job_id
    assert root.attributes["raytroupe.job.status"] == "succeeded"
    assert {s.context.trace_id for s in spans} == {root.context.trace_id}

    def parent(span):
        return by_id[span.parent.span_id]

    names = sorted(s.name for s in spans)
    assert names.count("plan") == names.count("aggregate") == 1
    assert sorted(n for n in names if n.startswith("subtask ")) == ["subtask s1", "subtask s2"]
    agents = [s for s in spans if s.name.startswith("invoke_agent ")]
    # exported spans name the actors (the driver's inline agents: in its tenant's scope)
    assert sorted(as_written(a.name, "default") for a in agents) == [
        "invoke_agent ada", "invoke_agent alan",
    ]  # fmt: skip
    assert all(a.name.startswith(f"invoke_agent {agent_name('')}") for a in agents)
    for agent in agents:
        assert parent(agent).name.startswith("subtask ")
        assert parent(parent(agent)) is root
        assert agent.attributes["gen_ai.operation.name"] == "invoke_agent"
        assert agent.attributes["gen_ai.usage.input_tokens"] > 0
    chats = [s for s in spans if s.name.startswith("chat ")]
    # planning and aggregating (the job's), two turns of alan, one of ada
    assert len(chats) == 5
    assert sorted(as_written(parent(c).name, "default") for c in chats) == [
        "aggregate", "invoke_agent ada", "invoke_agent alan", "invoke_agent alan", "plan",
    ]  # fmt: skip
    for chat in chats:
        attributes = chat.attributes
        assert chat.kind is SpanKind.CLIENT
        assert chat.name == f"chat {attributes['gen_ai.request.model']}"
        assert attributes["gen_ai.operation.name"] == "chat"
        assert attributes["gen_ai.provider.name"] == "offline"
        assert attributes["gen_ai.usage.input_tokens"] > 0
        assert attributes["gen_ai.usage.output_tokens"] >= 0  # a bare tool call writes none
        assert attributes["gen_ai.response.finish_reasons"]
    assert sum(c.attributes["gen_ai.usage.output_tokens"] for c in chats) > 0
    (tool,) = [s for s in spans if s.name.startswith("execute_tool ")]
    assert tool.name == "execute_tool calculator"
    assert parent(tool).name == f"invoke_agent {agent_name('alan')}"
    assert tool.attributes["gen_ai.tool.name"] == "calculator"
    assert tool.attributes["gen_ai.tool.call.id"]
    shown = " ".join(str(s.to_json()) for s in spans)
    assert "17 * 23" not in shown  # content (the task, the tool's arguments) stays out
    assert "tower" not in shown


def test_a_broken_exporter_never_fails_a_job():
    class Broken(InMemorySpanExporter):
        def export(self, _spans):
            raise RuntimeError("collector down")

    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(Broken()))
    tracing.install(provider)
    try:

        async def main():
            troupe = await build_troupe()
            team = TeamSpec(agents=(AgentSpec(name="a", role="r"),))
            return await troupe.run("Describe the tower", team)

        result = run(main())
    finally:
        tracing.install(None)
    assert result.status == "succeeded", result.error


def test_subtasks_finished_before_a_restart_keep_a_span_from_their_timestamps(tmp_path):
    from test_orchestrator_journal import TASK as STEPS  # noqa: PLC0415
    from test_orchestrator_journal import TEAM, system  # noqa: PLC0415

    from raytroupe.actors.orchestrator.journal import Journal  # noqa: PLC0415

    path = tmp_path / "journal.sqlite"

    async def first_life():
        desk, orchestrator, pool = await system(Journal(path), allowed=1)
        job_id = await desk.submit(*order(STEPS, TEAM))
        await pool.held.wait()  # s1 done, s2 held
        for task in list(orchestrator._tasks):
            task.cancel()
        return job_id

    async def second_life(job_id):
        _, orchestrator, _ = await system(Journal(path), allowed=99)
        return await orchestrator.wait(job_id, 10)

    result = run(second_life(run(first_life())))
    assert result.status == "succeeded", result.error
    subtasks = {s.attributes["subtask_id"]: s for s in kinds(result.trace, "subtask")}
    assert sorted(subtasks) == ["s1", "s2", "s3"]
    (s1,) = [s for s in result.subtasks if s.id == "s1"]
    assert (subtasks["s1"].start, subtasks["s1"].end) == (s1.started_at, s1.finished_at)
    assert not [s for s in result.trace if s.parent_id == subtasks["s1"].span_id]
    by_id = {s.span_id: s for s in result.trace}
    for span in result.trace[1:]:
        parent = by_id[span.parent_id]
        assert parent.start <= span.start <= span.end <= parent.end
