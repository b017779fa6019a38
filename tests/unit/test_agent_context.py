"""An agent's conversation kept within its context window (actors.agent.context, the loop).

The cutter's rules first (pure functions), then the ReAct loop in one process: a 40-turn
tool loop whose tool results take hundreds of tokens each, on a scripted model that refuses
any prompt over its 4,096-token window as a real provider does. The tool is a function tool
of this module (``page``), run by a real in-process tool sandbox.
"""

import json
import random
from dataclasses import dataclass
from pathlib import Path

import pytest
from structlog.testing import capture_logs
from wiring import Tap, envelope, run, started

from raytroupe.actors import AgentActor, LLMAdapterPool, LocalRouterClient, MessageRouter
from raytroupe.actors.agent import react as agent_react
from raytroupe.actors.agent import turns as agent_turns
from raytroupe.actors.agent.context import (
    ANSWER_TOKENS,
    SUMMARY_PREFIX,
    SUMMARY_TOKENS,
    TRIM_TO,
    dropped_note,
    plan_cut,
    reserved_tokens,
    summary_message,
    summary_prompt,
    turns,
)
from raytroupe.actors.llm import ScriptedProvider
from raytroupe.actors.llm.factory import build_provider
from raytroupe.actors.llm.provider import DeltaSink
from raytroupe.actors.llm.tokens import (
    REQUEST_TOKENS,
    count_tokens,
    messages_tokens,
    prompt_tokens,
    upper_bound,
)
from raytroupe.actors.tools.config import ToolsConfig
from raytroupe.actors.tools.sandbox import ToolSandbox
from raytroupe.protocols import (
    AgentSpec,
    ChatMessage,
    ContextTooLong,
    DeploymentSpec,
    ErrorCode,
    LLMRequest,
    LLMResponse,
    MemoryPolicy,
    ScriptedModel,
    ScriptedTurn,
    TaskRequest,
    TaskResult,
    ToolCall,
    ToolSpec,
)

HERE = __name__
WINDOW = 4096
LOOP = 40
WORDS = ("river", "stone", "lantern", "orchard", "harbour", "copper", "meadow", "signal",
         "quarry", "velvet", "ember", "glacier", "tundra", "beacon", "saffron", "marble",
         "thicket", "canyon", "falcon", "cobalt", "prairie", "lagoon", "thistle")  # fmt: skip


def page(number: int) -> str:
    """Read one page of the ledger."""
    rng = random.Random(number)  # noqa: S311 - a page's words, not a secret
    return f"Page {number}: " + " ".join(rng.choice(WORDS) for _ in range(300))


# --- conversations ---------------------------------------------------------------------------


SYSTEM = ChatMessage(role="system", content="You are ada, a worker. Read the ledger.")
TASK = ChatMessage(role="user", content="Read every page of the ledger, then say how many.")


def call_unit(number: int, calls: int = 1) -> list[ChatMessage]:
    """An assistant turn asking for ``calls`` pages, and their results."""
    asked = tuple(
        ToolCall(call_id=f"c{number}-{k}", tool="page", arguments={"number": number + k})
        for k in range(calls)
    )
    results = [
        ChatMessage(role="tool", tool_call_id=c.call_id, content=page(c.arguments["number"]))
        for c in asked
    ]
    return [ChatMessage(role="assistant", tool_calls=asked), *results]


def conversation(units: int, calls: int = 1) -> list[ChatMessage]:
    messages = [SYSTEM, TASK]
    for n in range(units):
        messages += call_unit(100 * n, calls)
    return messages


def whole_units(messages: list[ChatMessage]) -> bool:
    """Every tool result follows the assistant message that asked for it (or its siblings)."""
    asked: set[str] = set()
    for message in messages:
        if message.role == "assistant":
            asked = {c.call_id for c in message.tool_calls}
        elif message.role == "tool":
            if message.tool_call_id not in asked:
                return False
        else:
            asked = set()
    return True


def answers_of(messages: list[ChatMessage]) -> set[str]:
    return {m.tool_call_id for m in messages if m.role == "tool"}


RESERVED = reserved_tokens(window=WINDOW, answer=None, tools=60, recalled=())


def fits(request: LLMRequest) -> bool:
    """The request, bounded, leaves the default answer's tokens free in the window."""
    return upper_bound(prompt_tokens(request.messages, request.tools)) + ANSWER_TOKENS <= WINDOW


# --- the cutter ------------------------------------------------------------------------------


def test_a_conversation_that_fits_is_left_alone():
    messages = conversation(3)
    assert upper_bound(messages_tokens(messages)) <= WINDOW - RESERVED
    assert plan_cut(messages, window=WINDOW, reserved=RESERVED) is None


def test_the_oldest_turns_go_the_head_and_the_newest_stay_and_the_rest_fits():
    messages = conversation(12)
    cut = plan_cut(messages, window=WINDOW, reserved=RESERVED)
    assert cut is not None
    assert cut.head == (SYSTEM, TASK)
    assert cut.kept[-2:] == tuple(messages[-2:])  # the newest turn
    assert list(cut.head) + [m for u in cut.cut for m in u] + list(cut.kept) == messages
    assert cut.before == upper_bound(messages_tokens(messages)) > cut.room == WINDOW - RESERVED
    # down to the low-water mark, a summary's room included: the next turns fit as they are
    summary_room = SUMMARY_TOKENS + count_tokens(SUMMARY_PREFIX) + 5
    kept = messages_tokens(cut.head) + messages_tokens(cut.kept) + summary_room
    assert upper_bound(kept) <= int(cut.room * TRIM_TO)
    one_more = kept + messages_tokens(cut.cut[-1])
    assert upper_bound(one_more) > int(cut.room * TRIM_TO)  # no more was cut than needed


def test_a_tool_call_is_never_parted_from_its_results():
    messages = conversation(8, calls=3)  # three calls per turn, three results after each
    for window in range(2500, 9000, 250):
        reserved = reserved_tokens(window=window, answer=None, tools=60, recalled=())
        cut = plan_cut(messages, window=window, reserved=reserved)
        if cut is None:
            continue
        for unit in cut.cut:
            assert unit[0].role == "assistant"
            assert answers_of(list(unit)) == {c.call_id for c in unit[0].tool_calls}
        kept = list(cut.kept)
        assert kept[0].role == "assistant"
        assert whole_units(kept)


def test_only_the_newest_turn_is_never_cut_even_when_it_does_not_fit():
    messages = conversation(1, calls=6)
    assert upper_bound(messages_tokens(messages)) > 1500
    assert plan_cut(messages, window=1500, reserved=100) is None


def test_a_second_cut_folds_the_first_summary_into_its_own():
    messages = conversation(12)
    first = plan_cut(messages, window=WINDOW, reserved=RESERVED)
    assert first is not None
    summary = summary_message(first, "Pages 0 to 800 were read: mostly rivers.")
    assert summary is not None
    assert summary.text.startswith(SUMMARY_PREFIX)
    shorter = first.apply(summary)
    grown = shorter + [m for n in range(6) for m in call_unit(5000 + 100 * n)]
    second = plan_cut(grown, window=WINDOW, reserved=RESERVED, summary=summary)
    assert second is not None
    assert second.earlier is summary
    assert second.head == (SYSTEM, TASK)
    assert all(m is not summary for u in second.cut for m in u)
    _system, asked = summary_prompt(second, WINDOW)
    assert asked.text.splitlines()[0] == "summary: Pages 0 to 800 were read: mostly rivers."
    folded = summary_message(second, "Pages 0 to 5500 were read.")
    assert folded is not None
    after = second.apply(folded)
    assert [m.text.startswith(SUMMARY_PREFIX) for m in after].count(True) == 1
    assert after[2] is folded


def test_a_summary_equal_to_a_turn_is_known_by_identity_only():
    messages = conversation(12)
    stranger = ChatMessage(role="user", content=SUMMARY_PREFIX + "not from a cut")
    cut = plan_cut(
        [SYSTEM, TASK, stranger, *messages[2:]], window=WINDOW, reserved=RESERVED, summary=None
    )
    assert cut is not None
    assert cut.earlier is None
    assert cut.cut[0] == (stranger,)


def test_the_summary_prompt_fits_the_window_however_much_was_cut():
    messages = conversation(60)
    cut = plan_cut(messages, window=WINDOW, reserved=RESERVED)
    assert cut is not None
    assert messages_tokens(m for u in cut.cut for m in u) > 4 * WINDOW  # far too much to send
    prompt = summary_prompt(cut, WINDOW)
    assert upper_bound(prompt_tokens(prompt)) + SUMMARY_TOKENS <= WINDOW
    lines = prompt[1].text.splitlines()
    assert lines[0] == 'assistant: called page with {"number": 0}'
    assert lines[1].startswith("tool page: Page 0: ")
    assert lines[1].endswith(" …")  # shortened: every page alike, to one length
    assert len(lines) == sum(len(u) for u in cut.cut)


def test_a_summary_that_does_not_fit_gives_way_to_a_note():
    cut = plan_cut(conversation(12), window=WINDOW, reserved=RESERVED)
    assert cut is not None
    assert summary_message(cut, "") is None
    assert summary_message(cut, " ".join(WORDS) * 200) is None  # over the room
    note = dropped_note(cut)
    assert cut.fits(note)
    assert note.text == f"{len(cut.cut)} earlier turns were dropped to fit the context window."


def test_a_note_keeps_the_earlier_summary_when_there_is_room():
    messages = conversation(12)
    first = plan_cut(messages, window=WINDOW, reserved=RESERVED)
    assert first is not None
    summary = summary_message(first, "Pages 0 to 800 were read.")
    assert summary is not None
    grown = first.apply(summary) + [m for n in range(6) for m in call_unit(9000 + 100 * n)]
    second = plan_cut(grown, window=WINDOW, reserved=RESERVED, summary=summary)
    assert second is not None
    note = dropped_note(second)
    assert note.text.startswith(summary.text)
    assert f"Then {len(second.cut)} earlier turns were dropped, unsummarized" in note.text


def test_the_answer_is_reserved_and_what_the_call_carries_besides():
    recalled = (ChatMessage(role="system", content="Relevant memories:\n- rivers"),)
    framing = upper_bound(REQUEST_TOKENS)
    assert reserved_tokens(window=WINDOW, answer=None, tools=0, recalled=()) == (
        ANSWER_TOKENS + framing
    )
    assert reserved_tokens(window=2048, answer=None, tools=0, recalled=()) == 512 + framing
    assert reserved_tokens(window=2048, answer=700, tools=0, recalled=()) == 700 + framing
    with_tools = reserved_tokens(window=WINDOW, answer=100, tools=80, recalled=recalled)
    assert with_tools == 100 + upper_bound(80 + messages_tokens(recalled) + REQUEST_TOKENS)


# --- the scripted model's window, and the pool's answer ----------------------------------------


def test_the_scripted_model_refuses_a_prompt_over_its_window_as_a_provider_does():
    messages = tuple(conversation(3))
    exact = prompt_tokens(messages)
    tools = (ToolSpec(name="page", description="Read one page of the ledger."),)

    async def main():
        model = ScriptedProvider(
            ScriptedModel(turns=(ScriptedTurn(text="ok"),), context_window=exact)
        )
        refused = []
        for request in (
            LLMRequest(model="m", messages=messages, max_tokens=1),  # the answer counts too
            LLMRequest(model="m", messages=messages, tools=tools),  # so do the tools
            LLMRequest(model="m", messages=(*messages, TASK)),
        ):
            with pytest.raises(ContextTooLong) as caught:
                await model.complete(request)
            refused.append(caught.value)
        assert model.remaining == 1  # a refused prompt plays no turn
        answer = await model.complete(LLMRequest(model="m", messages=messages))
        await model.close()
        return refused, answer

    refused, answer = run(main())
    assert answer.text == "ok"
    assert [e.detail["prompt_tokens"] for e in refused] == [
        exact,
        prompt_tokens(messages, tools),
        exact + messages_tokens([TASK]),
    ]
    assert all(e.detail["context_window"] == exact for e in refused)
    assert all(e.code is ErrorCode.CONTEXT_TOO_LONG for e in refused)


@pytest.mark.parametrize("window", [None, 4096])
def test_the_pool_says_which_window_the_answering_deployment_has(window):
    async def main():
        pool = LLMAdapterPool(
            {"m": ScriptedModel(turns=(ScriptedTurn(text="ok"),), context_window=window)}
        )
        return await pool.complete(LLMRequest(model="m", messages=(TASK,)))

    answer = run(main())
    assert (answer.text, answer.deployment, answer.context_window) == ("ok", "m", window)


# --- the loop --------------------------------------------------------------------------------


class ApartSummaries:
    """One model alias whose summaries are scripted apart from its work turns.

    Both halves are real scripted providers, each refusing what exceeds its window: the
    agent cannot know beforehand after which turns it will need a summary.
    """

    name = "scripted"

    def __init__(self, work: ScriptedModel, summaries: ScriptedModel) -> None:
        self.work = ScriptedProvider(work)
        self.summaries = ScriptedProvider(summaries)

    async def complete(
        self, request: LLMRequest, *, on_delta: DeltaSink | None = None
    ) -> LLMResponse:
        which = self.summaries if request.purpose == "summarize" else self.work
        return await which.complete(request, on_delta=on_delta)

    async def close(self) -> None:
        await self.work.close()  # summaries are asked for as the loop needs: some stay unused


@dataclass
class Rig:
    agent: AgentActor
    client: LocalRouterClient
    llm: Tap
    model: ApartSummaries

    async def result(self) -> TaskResult:
        request = TaskRequest(task_id="s1", instructions=TASK.text)
        reply = await self.client.request(
            envelope(request, "role:worker", sender="orchestrator", job_id="job-1")
        )
        assert isinstance(reply.payload, TaskResult)
        return reply.payload

    def requests(self, purpose: str) -> list[LLMRequest]:
        return [r for r in self.llm.payloads(LLMRequest) if r.purpose == purpose]


def reading(pages: int, *, written: bool = False) -> tuple[ScriptedTurn, ...]:
    """Work turns: one page per turn (a native call, or one written in the text), the answer."""

    def turn(n: int) -> ScriptedTurn:
        if written:
            return ScriptedTurn(text=json.dumps({"name": "page", "arguments": {"number": n}}))
        call = ToolCall(call_id=f"c{n}", tool="page", arguments={"number": n})
        return ScriptedTurn(tool_calls=(call,))

    return (*map(turn, range(pages)), ScriptedTurn(text=f"The ledger has {pages} pages."))


def summaries(*turns: ScriptedTurn) -> ScriptedModel:
    return ScriptedModel(
        turns=turns or tuple(ScriptedTurn(text=f"Summary {n}: pages read.") for n in range(LOOP))
    )


async def rig(
    tmp_path: Path,
    *,
    window: int | None = WINDOW,
    agent_window: int | None = None,
    summarized: ScriptedModel | None = None,
    written: bool = False,
) -> Rig:
    work = ScriptedModel(turns=reading(LOOP, written=written), context_window=window)
    apart = ApartSummaries(work, summarized or summaries())

    def provider(spec: DeploymentSpec):
        return apart if spec == work else build_provider(spec)

    router = MessageRouter()
    client = LocalRouterClient(router)
    pool = LLMAdapterPool({"m": work}, provider_factory=provider)
    llm = Tap(pool)
    await router.register("llm-0", llm, ["llm"])
    tools = ToolsConfig(
        state_dir=tmp_path / "state",
        scratch_root=tmp_path / "scratch",
        functions={"page": f"{HERE}:page"},
    )
    sandbox = await started(ToolSandbox(tools, router=client))
    await router.register("tools-0", sandbox, ["tools"])
    spec = AgentSpec(
        name="ada",
        role="worker",
        instructions="Read the ledger.",
        model="m",
        tools=("page",),
        max_turns=LOOP + 1,
        memory=MemoryPolicy(recall=False, write_results=False),
        context_window=agent_window,
    )
    agent = await started(AgentActor(spec, client, await sandbox.grant("ada", ["page"])))
    await router.register("ada", agent, ["worker"])
    return Rig(agent, client, llm, apart)


def test_a_40_turn_tool_loop_on_a_4k_window_completes_summarizing_what_it_cuts(tmp_path):
    async def main():
        r = await rig(tmp_path)
        with capture_logs() as logs:
            result = await r.result()
        return r, result, logs

    r, result, logs = run(main(), guard_s=120)
    assert result.status == "succeeded", result.error
    assert result.output == f"The ledger has {LOOP} pages."
    assert (result.turns, result.tool_calls) == (LOOP + 1, LOOP)
    work, summarize = r.requests("work"), r.requests("summarize")
    assert len(work) == LOOP + 1
    assert len(summarize) >= 3  # ~360 tokens a turn: the window fills every few turns
    assert r.model.summaries.remaining == LOOP - len(summarize)  # each summary was played
    # what the model saw: a whole, bounded conversation every time, one summary at most
    for request in work:
        assert fits(request)
        assert request.messages[0].role == "system"
        assert request.messages[1].text == TASK.text
        assert whole_units(list(request.messages))
        said = [m for m in request.messages if m.text.startswith(SUMMARY_PREFIX)]
        assert len(said) <= 1
    last = work[-1].messages
    assert last[2].text == SUMMARY_PREFIX + f"Summary {len(summarize) - 1}: pages read."
    assert last[-2].tool_call_id == f"c{LOOP - 1}"  # the newest result is there,
    assert last[-1].text == agent_turns.WRAP_UP  # before the last turn's wrap-up
    # a later summary folds the one before it
    assert summarize[1].messages[1].text.startswith("summary: Summary 0: pages read.")
    for request in summarize:
        assert request.model == "m"
        assert request.max_tokens == SUMMARY_TOKENS
        assert upper_bound(prompt_tokens(request.messages)) + SUMMARY_TOKENS <= WINDOW
    # the summaries' calls are paid for and traced like the work's
    assert result.usage.calls == LOOP + 1 + len(summarize)
    assert len([s for s in result.spans if s.kind == "model_call"]) == LOOP + 1 + len(summarize)
    trimmed = [e for e in logs if e["event"] == "context_trimmed"]
    assert len(trimmed) == len(summarize)
    assert all(e["summarized"] and e["tokens_after"] < e["tokens_before"] for e in trimmed)
    assert all(e["tokens_before"] > e["room"] >= e["tokens_after"] for e in trimmed)


def test_the_same_loop_without_trimming_is_refused_by_the_model(tmp_path, monkeypatch):
    """Proof that the test above needs the trimming: the scripted model refuses what grew."""
    monkeypatch.setattr(agent_react, "plan_cut", lambda *_args, **_kwargs: None)

    async def main():
        r = await rig(tmp_path)
        return r, await r.result()

    r, result = run(main(), guard_s=120)
    assert (result.status, result.stop_reason) == ("failed", "error")
    assert result.error.code is ErrorCode.CONTEXT_TOO_LONG
    assert "context window is 4096 tokens" in result.error.message
    assert 5 < result.turns < LOOP
    assert r.requests("summarize") == []


def test_without_a_window_the_loop_never_summarizes(tmp_path):
    async def main():
        r = await rig(tmp_path, window=None)
        return r, await r.result()

    r, result = run(main(), guard_s=120)
    assert result.status == "succeeded", result.error
    assert r.requests("summarize") == []
    assert len(r.requests("work")[-1].messages) == 2 + 2 * LOOP + 1  # all of it, the wrap-up
    assert upper_bound(messages_tokens(r.requests("work")[-1].messages)) > 4 * WINDOW


def test_the_agents_own_window_is_kept_when_the_model_has_none(tmp_path):
    async def main():
        r = await rig(tmp_path, window=None, agent_window=WINDOW)
        return r, await r.result()

    r, result = run(main(), guard_s=120)
    assert result.status == "succeeded", result.error
    assert r.requests("summarize")
    assert all(map(fits, r.requests("work")))


def test_a_failing_summarizer_leaves_a_note_and_the_loop_completes(tmp_path):
    broken = summaries(*(ScriptedTurn(error=ErrorCode.BAD_REQUEST) for _ in range(LOOP)))

    async def main():
        r = await rig(tmp_path, summarized=broken)
        with capture_logs() as logs:
            result = await r.result()
        return r, result, logs

    r, result, logs = run(main(), guard_s=120)
    assert result.status == "succeeded", result.error
    assert result.output == f"The ledger has {LOOP} pages."
    failed = [e for e in logs if e["event"] == "context_summary_failed"]
    assert failed
    assert all(e["code"] == "bad_request" for e in failed)
    trimmed = [e for e in logs if e["event"] == "context_trimmed"]
    assert len(trimmed) == len(failed) == len(r.requests("summarize"))
    assert not any(e["summarized"] for e in trimmed)
    last = r.requests("work")[-1].messages
    assert "dropped" in last[2].text
    assert last[2].text.endswith("to fit the context window.")
    assert all(map(fits, r.requests("work")))
    assert result.usage.calls == LOOP + 1  # a failed summary costs nothing


def test_calls_written_in_text_are_numbered_on_after_cut_turns(tmp_path):
    async def main():
        r = await rig(tmp_path, written=True)
        return r, await r.result()

    r, result = run(main(), guard_s=120)
    assert result.status == "succeeded", result.error
    assert r.requests("summarize")
    ids = [m.tool_call_id for q in r.requests("work") for m in q.messages if m.role == "tool"]
    assert sorted(set(ids), key=lambda i: int(i.removeprefix("call_"))) == [
        f"call_{n}" for n in range(LOOP)
    ]  # one id per call of the run, none given twice


@pytest.mark.parametrize("served", [None, 8192, 2048])
def test_the_window_is_the_smaller_of_the_agents_and_the_models(served):
    loop = agent_turns.Loop([SYSTEM, TASK], limits=None)
    spec = AgentSpec(name="ada", role="worker", context_window=WINDOW)
    loop.served_window = served
    assert loop.window(spec) == min(w for w in (WINDOW, served) if w)
    assert loop.window(AgentSpec(name="ada", role="worker")) == served


def test_a_tool_call_and_its_results_are_one_turn():
    call = ToolCall(call_id="c1", tool="search", arguments={"q": "x"})
    messages = [
        ChatMessage(role="user", content="one"),
        ChatMessage(role="assistant", tool_calls=(call,)),
        ChatMessage(role="tool", tool_call_id="c1", content="result"),
        ChatMessage(role="tool", tool_call_id="c1", content="more"),
        ChatMessage(role="tool", tool_call_id="c9", content="another result"),
        ChatMessage(role="user", content="and now?"),
    ]
    assert [len(u) for u in turns(messages)] == [1, 4, 1]
    assert [len(u) for u in turns(messages[2:])] == [1, 1, 1, 1]
