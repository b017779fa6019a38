"""A tool's host failing it (its scratch directory) fails the job, in process, without Ray.

The model never hears of it as a tool's answer to work around: the subtask fails with the
typed error, and so does the job, whose result and events name the path to fix.
"""

import time
from pathlib import Path

from wiring import build_troupe, run

from raytroupe.actors.endpoint import serve_envelope
from raytroupe.protocols import (
    AgentSpec,
    ErrorCode,
    ErrorPayload,
    LLMRequest,
    PlannedSubtask,
    ScriptedModel,
    ScriptedTurn,
    TaskRequest,
    TaskResult,
    TeamSpec,
    ToolCall,
)
from tests.support.inline import written

CALC = ToolCall(call_id="c1", tool="calculator", arguments={"expression": "6*7"})
DELEGATE = ToolCall(call_id="d1", tool="delegate",
                    arguments={"agent": "helper", "instructions": "Work it out."})  # fmt: skip


def script(*turns: ScriptedTurn) -> ScriptedModel:
    return ScriptedModel(turns=turns)


def one_step(*agents: AgentSpec, **step: object) -> TeamSpec:
    """A team whose job is one subtask, for the first agent's role."""
    planned = PlannedSubtask(id="s1", role=agents[0].role, instructions="{task}", **step)
    return TeamSpec(name="infra", planner_model="offline", agents=agents, plan=(planned,))


def broken_tools_root(tmp_path: Path) -> tuple[Path, Path]:
    """A tools root whose scratch root is a file; and that scratch root."""
    (tmp_path / "scratch").write_text("not a directory")
    return tmp_path, tmp_path / "scratch"


def work_requests(troupe, model: str) -> list[LLMRequest]:
    return [r for r in troupe.llm.payloads(LLMRequest) if r.purpose == "work" and r.model == model]


def test_an_unusable_scratch_root_fails_the_job_and_the_model_is_not_asked_again(tmp_path):
    tools_root, scratch = broken_tools_root(tmp_path)
    ada = AgentSpec(name="ada", role="w", model="m", tools=("calculator",))

    async def main():
        models = {"m": script(ScriptedTurn(tool_calls=(CALC,)), ScriptedTurn(text="42, anyway"))}
        troupe = await build_troupe(models, tools_root=tools_root)
        result = await troupe.run("What is six times seven?", one_step(ada))
        return result, await troupe.orchestrator.events(result.job_id), troupe

    result, events, troupe = run(main())
    assert result.status == "failed"
    assert result.answer == ""
    (sub,) = result.subtasks
    assert (sub.status, sub.stop_reason, sub.tool_calls) == ("failed", "error", 1)
    assert sub.error.code is ErrorCode.TOOL_INFRASTRUCTURE
    assert str(scratch) in sub.error.message
    assert result.error.code is ErrorCode.TOOL_INFRASTRUCTURE
    assert str(scratch) in result.error.message
    assert result.error.message.startswith("1 of 1 subtasks did not succeed: s1")
    last = events[-1]
    assert last.type == "job_failed"
    assert last.data["code"] == "tool_infrastructure"
    assert str(scratch) in last.data["error"]
    # asked once, for the turn that called the tool: its failure was not fed back to it
    (asked,) = work_requests(troupe, "m")
    assert [m.role for m in asked.messages] == ["system", "user"]


def test_a_redundant_answer_failed_by_its_host_fails_the_subtask_whatever_the_others_say(
    tmp_path,
):
    tools_root, scratch = broken_tools_root(tmp_path)
    agents = (
        AgentSpec(name="a1", role="w", model="m1", tools=("calculator",)),
        AgentSpec(name="a2", role="w", model="m2"),
    )

    async def main():
        models = {"m1": script(ScriptedTurn(tool_calls=(CALC,)), ScriptedTurn(text="42")),
                  "m2": script(ScriptedTurn(text="42"))}  # fmt: skip
        troupe = await build_troupe(models, tools_root=tools_root)
        return await troupe.run("Six times seven?", one_step(*agents, redundancy=2))

    result = run(main())
    (sub,) = result.subtasks
    assert (sub.status, sub.agent) == ("failed", "a1")  # a2's answer alone would have won
    assert sub.error.code is ErrorCode.TOOL_INFRASTRUCTURE
    assert sub.usage.calls == 2  # both agents' model calls, counted
    assert result.status == "failed"
    assert result.error.code is ErrorCode.TOOL_INFRASTRUCTURE
    assert str(scratch) in result.error.message


class HostFailed:
    """An agent whose every subtask fails at its tools' host (as a broken scratch root does)."""

    def __init__(self, name: str) -> None:
        self.name = name

    async def receive(self, data: bytes) -> bytes | None:
        return await serve_envelope(data, self._answer, me=self.name, accepts=(TaskRequest,))

    async def _answer(self, message, request: TaskRequest):
        error = ErrorPayload(
            code=ErrorCode.TOOL_INFRASTRUCTURE,
            message="refusing the scratch directory /tmp/raytroupe-0/scratch: it belongs to "
            "another user",
        )
        now = time.time()
        done = TaskResult(
            task_id=request.task_id,
            agent=self.name,
            status="failed",
            stop_reason="error",
            error=error,
            started_at=now,
            finished_at=now,
        )
        return message.reply(done, sender=self.name)


def test_delegated_work_failed_by_its_host_fails_the_delegating_subtask_too():
    boss = AgentSpec(name="boss", role="m", model="boss", tools=("delegate",))
    helper = AgentSpec(name="helper", role="h", model="offline")

    async def main():
        models = {"boss": script(ScriptedTurn(tool_calls=(DELEGATE,)), ScriptedTurn(text="done"))}
        wrap = lambda name, agent: HostFailed(name) if written(name) == "helper" else agent  # noqa: E731
        troupe = await build_troupe(models, wrap=wrap)
        return await troupe.run("Ask the helper.", one_step(boss, helper)), troupe

    result, troupe = run(main())
    assert result.status == "failed"
    (sub,) = result.subtasks
    assert (sub.agent, sub.stop_reason) == ("boss", "error")
    assert sub.error.code is ErrorCode.TOOL_INFRASTRUCTURE
    assert "helper could not do it: refusing the scratch directory" in sub.error.message
    assert result.error.code is ErrorCode.TOOL_INFRASTRUCTURE
    assert len(work_requests(troupe, "boss")) == 1
