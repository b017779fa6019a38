"""The tool calls of one model answer run at once (``AgentSpec.parallel_tool_calls``).

Each test runs an ``AgentActor`` in process (router, a model that answers as the test says,
real tool sandboxes) with a ``meet`` tool whose calls wait for one another: a call that
waits for a later call of its turn to start goes on only if the two run at once. A wait
gives up after ``patience_s`` (noted in the tool's log), so that a wrong order fails the
test rather than hang it; only a failing test, or one that shows calls one after another,
waits that long.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from wiring import envelope, in_process_sandbox, run

from raytroupe.actors import AgentActor, LocalRouterClient, MessageRouter
from raytroupe.actors.agent.turns import HANDOFF_TOOL, NOT_RUN
from raytroupe.actors.endpoint import serve_envelope
from raytroupe.actors.telemetry import tracing
from raytroupe.actors.tools.delegation import HANDOFF
from raytroupe.protocols import (
    AgentMessage,
    AgentSpec,
    CancelJob,
    ChatMessage,
    ErrorCode,
    Event,
    LLMRequest,
    LLMResponse,
    MemoryPolicy,
    Reasoning,
    TaskRequest,
    TaskResult,
    Thought,
    ToolCall,
    ToolDef,
    ToolInfrastructureError,
    decode,
    encode,
)

PATIENCE_S = 10.0
"""How long a call waits for one that should run beside it: only a failing test waits it out."""

BRIEF_S = 0.3
"""How long a call waits for one that must not start before it ends (the test waits it out)."""

MEET = ToolDef(
    name="meet",
    description="Meets the other calls of its turn (records each run).",
    parameters={
        "type": "object",
        "properties": {
            "q": {"type": "string"},
            "waits": {"type": "string"},
            "broken": {"type": "boolean"},
        },
        "required": ["q"],
    },
)

PAY = ToolDef(
    name="pay",
    description="Pays an amount (a side effect: at most once per call in a subtask).",
    parameters={"type": "object", "properties": {"amount": {"type": "integer"}}},
    side_effects=True,
)

HANDOFF_DEF = HANDOFF.model_copy(update={"timeout_s": 30.0})


@dataclass
class Meeting:
    """The ``meet`` tool: ``{"q": name, "waits": "start x"}`` waits for that log entry.

    Its log says ``start q`` and ``end q`` for each run (``cancelled q`` for one cut short);
    ``broken``: the call fails as its host would (``ToolInfrastructureError``).
    """

    patience_s: float = PATIENCE_S
    log: list[str] = field(default_factory=list)
    seen: defaultdict[str, asyncio.Event] = field(
        default_factory=lambda: defaultdict(asyncio.Event)
    )

    def note(self, entry: str) -> None:
        self.log.append(entry)
        self.seen[entry].set()

    async def __call__(self, arguments: dict[str, Any], _ctx: object) -> str:
        q = arguments["q"]
        self.note(f"start {q}")
        try:
            if waits := arguments.get("waits"):
                await asyncio.wait_for(self.seen[waits].wait(), self.patience_s)
        except TimeoutError:
            self.note(f"{q} gave up waiting for {waits}")
        except asyncio.CancelledError:
            self.note(f"cancelled {q}")
            raise
        if arguments.get("broken"):
            self.note(f"broke {q}")
            raise ToolInfrastructureError(f"the host of {q} broke")
        self.note(f"end {q}")
        return f"met {q}"

    async def pay(self, arguments: dict[str, Any], _ctx: object) -> str:
        """The ``pay`` tool: held a moment, long enough for a second call to come meanwhile."""
        self.note(f"pay {arguments['amount']}")
        await asyncio.sleep(BRIEF_S)
        return f"paid {arguments['amount']}"

    async def handoff(self, arguments: dict[str, Any], _ctx: object) -> dict[str, str]:
        """A ``handoff`` that another agent answers at once."""
        self.note(f"handoff to {arguments['agent']}")
        return {"agent": arguments["agent"], "output": "grace's answer"}


class Model:
    """The LLM pool: answers each call with the next of ``answers``, and keeps the calls."""

    def __init__(self, *answers: LLMResponse) -> None:
        self.answers = list(answers)
        self.requests: list[LLMRequest] = []
        self.asked = asyncio.Event()

    async def receive(self, data: bytes, /) -> bytes | None:
        return await serve_envelope(data, self._answer, me="llm-0", accepts=(LLMRequest,))

    async def _answer(self, message: AgentMessage, request: LLMRequest) -> AgentMessage:
        self.requests.append(request)
        self.asked.set()
        return message.reply(self.answers.pop(0), sender="llm-0")


class Odd:
    """A sandbox that answers a ``meet`` call for ``q: odd`` with a payload no agent expects."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    async def receive(self, data: bytes, /) -> bytes | None:
        message = decode(data)
        if isinstance(message.payload, ToolCall) and message.payload.arguments.get("q") == "odd":
            return encode(message.reply(Event(name="odd"), sender="tools-0"))
        return await self.inner.receive(data)


def meet(q: str, **arguments: object) -> dict[str, object]:
    return {"q": q, **arguments}


def calls(*arguments: dict[str, object], tool: str = "meet", text: str = "") -> LLMResponse:
    """A model answer calling ``tool`` once per ``arguments``, call ids c0, c1, ..."""
    made = tuple(ToolCall(call_id=f"c{i}", tool=tool, arguments=a) for i, a in enumerate(arguments))
    return LLMResponse(
        text=text, tool_calls=made, finish_reason="tool_calls", model="m", provider="fake"
    )


def answer(text: str = "done") -> LLMResponse:
    return LLMResponse(text=text, model="m", provider="fake")


@dataclass
class Rig:
    client: LocalRouterClient
    agent: AgentActor
    model: Model
    meeting: Meeting

    async def ask(self) -> TaskResult:
        request = TaskRequest(task_id="s1", instructions="Meet everyone")
        reply = await self.client.request(
            envelope(request, "role:worker", sender="orchestrator", job_id="job-1")
        )
        assert isinstance(reply.payload, TaskResult)
        return reply.payload

    def tool_messages(self, request: int = 1) -> list[tuple[str | None, str]]:
        """The tool turns the model was shown in its ``request``-th call."""
        shown = self.model.requests[request].messages
        return [(m.tool_call_id, m.text) for m in shown if m.role == "tool"]


async def rig(
    model: Model, meeting: Meeting | None = None, *, sandboxes: int = 1, odd: bool = False, **spec
) -> Rig:
    meeting = meeting or Meeting()
    tools = ("meet", "pay", HANDOFF_TOOL)
    agent_spec = AgentSpec.model_validate(
        {
            "name": "ada",
            "role": "worker",
            "model": "m",
            "tools": tools,
            "memory": MemoryPolicy(recall=False, write_results=False),
            **spec,
        }
    )
    router = MessageRouter()
    client = LocalRouterClient(router)
    await router.register("llm-0", model, ["llm"])
    root = Path(tempfile.mkdtemp(prefix="troupe-parallel-"))  # one state: one key record
    granted = ()
    for n in range(sandboxes):
        sandbox = await in_process_sandbox(root=root)
        sandbox.register(MEET, meeting)
        sandbox.register(PAY, meeting.pay)
        sandbox.register(HANDOFF_DEF, meeting.handoff)
        granted = await sandbox.grant("ada", tools)
        await router.register(f"tools-{n}", Odd(sandbox) if odd else sandbox, ["tools"])
    agent = AgentActor(agent_spec, client, granted)
    await router.register("ada", agent, ["worker"])
    return Rig(client, agent, model, meeting)


def test_the_calls_of_one_answer_run_at_once():
    async def main():
        # the first call goes on only once the second has started
        r = await rig(Model(calls(meet("a", waits="start b"), meet("b")), answer()))
        return await r.ask(), r

    result, r = run(main(), guard_s=3 * PATIENCE_S)
    assert r.meeting.log == ["start a", "start b", "end b", "end a"]
    assert (result.status, result.tool_calls, result.turns) == ("succeeded", 2, 2)
    assert r.model.requests[0].parallel_tool_calls is True


@pytest.fixture
def live_spans():
    """The live OpenTelemetry spans of the test, in memory (none after it)."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.install(provider)
    yield exporter
    tracing.install(None)
    provider.shutdown()


def test_calls_at_once_each_have_their_own_span_under_the_agents(live_spans):
    async def main():
        r = await rig(Model(calls(meet("a", waits="start b"), meet("b")), answer()))
        return await r.ask()

    assert run(main(), guard_s=3 * PATIENCE_S).status == "succeeded"
    spans = live_spans.get_finished_spans()
    (agent,) = [s for s in spans if s.name.startswith("invoke_agent ")]
    tools = {s.attributes["gen_ai.tool.call.id"]: s for s in spans if s.name == "execute_tool meet"}
    a, b = tools["c0"], tools["c1"]
    assert a.parent.span_id == b.parent.span_id == agent.context.span_id  # not one in the other
    assert a.start_time < b.start_time < b.end_time < a.end_time  # open at once


def test_the_calls_run_one_after_another_when_the_spec_says_so():
    async def main():
        meeting = Meeting(patience_s=BRIEF_S)  # "b" starts only once "a" gave up and ended
        model = Model(calls(meet("a", waits="start b"), meet("b")), answer())
        r = await rig(model, meeting, parallel_tool_calls=False)
        return await r.ask(), r

    result, r = run(main())
    assert r.meeting.log == [
        "start a",
        "a gave up waiting for start b",
        "end a",
        "start b",
        "end b",
    ]
    assert (result.status, result.tool_calls) == ("succeeded", 2)
    assert r.model.requests[0].parallel_tool_calls is False
    assert r.tool_messages() == [("c0", "met a"), ("c1", "met b")]


def test_results_are_shown_in_the_models_order_whichever_call_ends_first():
    async def main():
        # each call waits for the next to end: they end last to first
        turn = calls(meet("a", waits="end b"), meet("b", waits="end c"), meet("c"))
        r = await rig(Model(turn, answer()))
        return await r.ask(), r

    result, r = run(main(), guard_s=3 * PATIENCE_S)
    ended = [entry for entry in r.meeting.log if entry.startswith("end")]
    assert ended == ["end c", "end b", "end a"]
    assert r.tool_messages() == [("c0", "met a"), ("c1", "met b"), ("c2", "met c")]
    shown = r.model.requests[1].messages
    assert [m.role for m in shown[-4:]] == ["assistant", "tool", "tool", "tool"]
    tools = [s for s in result.spans if s.kind == "tool_call"]
    assert [s.attributes["result"] for s in tools] == ["met a", "met b", "met c"]
    assert [json.loads(s.attributes["arguments"])["q"] for s in tools] == ["a", "b", "c"]


def test_a_repeated_call_stops_the_turn_there_and_the_calls_before_it_run_at_once():
    async def main():
        turn = calls(meet("a", waits="start b"), meet("b"), meet("b"), meet("c"))
        r = await rig(Model(turn, answer("a and b")), max_repeated_tool_calls=2)
        return await r.ask(), r

    result, r = run(main(), guard_s=3 * PATIENCE_S)
    assert r.meeting.log == ["start a", "start b", "end b", "end a"]  # not the repeat, nor c
    assert r.tool_messages() == [("c0", "met a"), ("c1", "met b"), ("c2", NOT_RUN), ("c3", NOT_RUN)]
    assert (result.status, result.output, result.tool_calls) == ("succeeded", "a and b", 2)
    assert r.model.requests[1].tool_choice == "none"  # the wrap-up turn the repeat brought


def test_a_hosts_failure_fails_the_subtask_once_the_other_calls_have_ended():
    async def main():
        # "a" breaks at once; "b" ends only after that
        turn = calls(meet("a", broken=True), meet("b", waits="broke a"))
        r = await rig(Model(turn))
        return await r.ask(), r

    result, r = run(main(), guard_s=3 * PATIENCE_S)
    assert r.meeting.log == ["start a", "broke a", "start b", "end b"]
    assert (result.status, result.stop_reason) == ("failed", "error")
    assert result.error.code is ErrorCode.TOOL_INFRASTRUCTURE
    assert result.error.message == "the host of a broke"
    assert result.tool_calls == 2
    assert [s.attributes["result"] for s in result.spans if s.kind == "tool_call"] == [
        "the host of a broke",
        "met b",
    ]
    assert len(r.model.requests) == 1  # the model is not told of it


def test_of_several_host_failures_the_first_in_the_models_order_fails_the_subtask():
    async def main():
        turn = calls(meet("a", broken=True, waits="broke b"), meet("b", broken=True))
        r = await rig(Model(turn))
        return await r.ask(), r

    result, r = run(main(), guard_s=3 * PATIENCE_S)
    assert r.meeting.log == ["start a", "start b", "broke b", "broke a"]
    assert result.error.code is ErrorCode.TOOL_INFRASTRUCTURE
    assert result.error.message == "the host of a broke"


def test_a_call_that_cannot_be_answered_stops_the_others_of_its_turn():
    async def main():
        # "b" would wait for ever; the odd answer to the other call fails the subtask
        r = await rig(Model(calls(meet("b", waits="never"), meet("odd"))), odd=True)
        return await r.ask(), r

    result, r = run(main(), guard_s=3 * PATIENCE_S)
    assert (result.status, result.stop_reason) == ("failed", "error")
    assert result.error.code is ErrorCode.TOOL
    assert "answered with 'event'" in result.error.message
    assert r.meeting.log == ["start b", "cancelled b"]


def test_cancelling_the_subtask_cancels_every_call_in_flight():
    async def main():
        r = await rig(Model(calls(meet("a", waits="never"), meet("b", waits="never"))))
        asked = asyncio.create_task(r.ask())
        await r.meeting.seen["start a"].wait()
        await r.meeting.seen["start b"].wait()
        cancel = envelope(CancelJob(), "ada", sender="orchestrator", job_id="job-1")
        await r.agent.receive(encode(cancel))
        return await asked, r

    result, r = run(main(), guard_s=3 * PATIENCE_S)
    assert result.stop_reason == "cancelled"
    assert sorted(r.meeting.log) == ["cancelled a", "cancelled b", "start a", "start b"]


def test_a_turn_with_a_handoff_runs_one_call_after_another():
    async def main():
        meeting = Meeting(patience_s=BRIEF_S)
        handoff = {"agent": "grace", "instructions": "Finish it."}
        turn = LLMResponse(
            tool_calls=(
                ToolCall(call_id="c0", tool="meet", arguments=meet("a", waits="handoff to grace")),
                ToolCall(call_id="c1", tool=HANDOFF_TOOL, arguments=handoff),
                ToolCall(call_id="c2", tool="meet", arguments=meet("c")),
            ),
            finish_reason="tool_calls",
            model="m",
            provider="fake",
        )
        r = await rig(Model(turn), meeting)
        return await r.ask(), r

    result, r = run(main())
    # "a" ended before the handoff started; the call after the handoff never ran
    assert r.meeting.log == [
        "start a",
        "a gave up waiting for handoff to grace",
        "end a",
        "handoff to grace",
    ]
    assert (result.status, result.stop_reason, result.output) == (
        "succeeded",
        "handoff",
        "grace's answer",
    )
    assert result.tool_calls == 2


def test_the_handoff_tool_is_the_one_agents_look_for():
    assert HANDOFF.name == HANDOFF_TOOL


def test_identical_side_effects_in_one_turn_take_effect_once_across_sandboxes():
    async def main():
        # two sandboxes over one state: the second call, at once, would reach the other one
        # while the first runs there, and be refused
        turn = calls({"amount": 3}, {"amount": 3}, tool="pay")
        r = await rig(Model(turn, answer()), sandboxes=2)
        return await r.ask(), r

    result, r = run(main())
    assert r.meeting.log == ["pay 3"]
    assert r.tool_messages() == [("c0", "paid 3"), ("c1", "paid 3")]
    assert (result.status, result.tool_calls) == ("succeeded", 2)


def test_the_model_call_carries_the_specs_tool_call_and_reasoning_settings():
    async def main():
        thought = Thought(provider="anthropic", text="Meet a first.", signature="sig")
        first = calls(meet("a")).model_copy(update={"thoughts": (thought,)})
        spec = {"reasoning": Reasoning(effort="high"), "parallel_tool_calls": False}
        r = await rig(Model(first, answer()), **spec)
        return await r.ask(), r, thought

    result, r, thought = run(main())
    assert result.status == "succeeded"
    asked, again = r.model.requests
    for request in (asked, again):
        assert request.purpose == "work"
        assert request.reasoning == Reasoning(effort="high")
        assert request.parallel_tool_calls is False
    assistant = again.messages[-2]
    assert assistant == ChatMessage(
        role="assistant", tool_calls=calls(meet("a")).tool_calls, thoughts=(thought,)
    )
