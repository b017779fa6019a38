"""Offline token counts against real models', and trimming against a real context window.

Real models served by ``llama-server`` (built once per machine by the project's own installer,
weights pinned and sha256-checked) through the pool, as in ``test_local_model.py``:
SmolLM2-135M-Instruct, and Qwen2.5-Coder-0.5B-Instruct, whose chat template writes the tool
schemas into the prompt. A server's ``usage.prompt_tokens`` is its own tokenizer's count,
chat template included: the offline count raised by ``SAFETY_FACTOR`` must never be below
it, so that a conversation the agent trims to a window is one the server accepts. The
per-prompt ratios are printed (run with ``-s``) and recorded as test properties;
``actors/llm/tokens.py`` quotes them.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

import pytest

from raytroupe.actors.agent.context import (
    SUMMARY_TOKENS,
    dropped_note,
    plan_cut,
    reserved_tokens,
    summary_message,
    summary_prompt,
)
from raytroupe.actors.llm.gateway import CallContext
from raytroupe.actors.llm.local import InProcessServers
from raytroupe.actors.llm.pool import LLMAdapterPool
from raytroupe.actors.llm.tokens import SAFETY_FACTOR, prompt_tokens, tools_tokens, upper_bound
from raytroupe.protocols import (
    ChatMessage,
    ContextTooLong,
    LLMRequest,
    LLMResponse,
    LocalModel,
    ToolCall,
    ToolSpec,
)
from tests.support.local_models import llama_server, smol_spec
from tests.support.weights import QWEN_05B, fetch

# the first test of a session that needs llama-server builds it (~5 min on a fresh 2-core
# machine, a cached wheel after): more than the suite's 300 s per test
# system tier: llama.cpp's server and real weights
pytestmark = [pytest.mark.system, pytest.mark.timeout(1500)]

T = TypeVar("T")
WINDOW = 2048
CONTEXT = CallContext(job_id="job-context", tenant="default", agent="tester")

LOOKUP = ToolSpec(
    name="lookup",
    description="Look a city up in the almanac: population, founding year, rivers.",
    parameters={
        "type": "object",
        "properties": {"city": {"type": "string"}, "fields": {"type": "array"}},
        "required": ["city"],
    },
)

PROSE = """\
The harbour town woke slowly. Fishermen hauled their nets across the wet stones while the
baker, who had been up since three, stacked loaves in the window. Nobody noticed the stranger
at first: a tall woman in a grey coat, carrying a leather case that looked older than she was.
She asked the innkeeper for a room facing the sea, paid in advance for a week, and said she
was here to survey the lighthouse. The innkeeper, who knew the lighthouse had been shut for
twenty years, said nothing, but he told his wife that evening, and by morning everyone knew.
"""

CODE = '''\
import asyncio
from dataclasses import dataclass, field


@dataclass
class Ledger:
    """Balances by account; every change is journaled."""

    balances: dict[str, int] = field(default_factory=dict)
    journal: list[tuple[str, int]] = field(default_factory=list)

    def apply(self, account: str, amount: int) -> int:
        if amount == 0:
            raise ValueError("a zero entry means nothing")
        self.balances[account] = self.balances.get(account, 0) + amount
        self.journal.append((account, amount))
        return self.balances[account]


async def settle(ledger: Ledger, entries: list[tuple[str, int]]) -> dict[str, int]:
    for account, amount in entries:
        await asyncio.sleep(0)
        ledger.apply(account, amount)
    return {k: v for k, v in sorted(ledger.balances.items()) if v != 0}
'''

DATA = json.dumps(
    {
        "job_id": "job-7f3a",
        "status": "succeeded",
        "subtasks": [
            {"id": "t1", "agent": "researcher", "turns": 3, "usage": {"prompt": 812, "done": 64}},
            {"id": "t2", "agent": "writer", "turns": 1, "usage": {"prompt": 455, "done": 210}},
        ],
        "tags": ["report", "weekly", "finance"],
        "cost_usd": 0.0042,
        "approved": True,
        "reviewer": None,
    },
    indent=2,
)

NUMBERS = """\
date        open     high     low      close    volume
2024-03-01  182.35   184.10   181.02   183.77   51234871
2024-03-04  183.90   185.65   182.44   185.01   48812093
2024-03-05  184.72   186.30   183.15   183.40   55012387
2024-03-06  183.10   183.95   180.66   181.27   60219954
2024-03-07  181.55   182.80   179.91   182.63   47730128
Totals: 917.62 920.52 907.18 916.08 263009433; mean change -0.17%, sigma 1.0473.
"""

CALLED = ToolCall(call_id="call_0", tool="lookup", arguments={"city": "Lyon", "fields": ["rivers"]})
TOOL_TURNS = (
    ChatMessage(role="system", content="You are ada, a researcher. Use the tools."),
    ChatMessage(role="user", content="Which rivers meet in Lyon, and when was it founded?"),
    ChatMessage(role="assistant", content="", tool_calls=(CALLED,)),
    ChatMessage(
        role="tool",
        tool_call_id="call_0",
        content=json.dumps({"city": "Lyon", "rivers": ["Rhône", "Saône"], "founded": -43}),
    ),
    ChatMessage(role="user", content="Answer in one sentence."),
)

ACCENTS = """\
Le café de la gare était très animé ce matin-là ; à côté, l'hôtel ouvrait ses fenêtres.
Die Straßenbahn fährt über die Brücke nach Süden, während die Möwen über dem Fluss kreisen.
"""


def _asking(text: str) -> tuple[ChatMessage, ...]:
    """A system message (an agent always sends one) and ``text`` as the user's turn."""
    return (ChatMessage(role="system", content="You are ada, a careful assistant."),
            ChatMessage(role="user", content=text))  # fmt: skip


PROMPTS: dict[str, tuple[tuple[ChatMessage, ...], tuple[ToolSpec, ...]]] = {
    "prose": (_asking(PROSE), ()),
    "code": (_asking(f"Review this code:\n{CODE}"), ()),
    "json": (_asking(f"Summarize this result:\n{DATA}"), ()),
    "numbers": (_asking(f"Which day closed highest?\n{NUMBERS}"), ()),
    "accented prose": (_asking(ACCENTS), ()),
    "tool conversation": (TOOL_TURNS, (LOOKUP,)),
}


def _qwen(**fields: object) -> LocalModel:
    """Qwen2.5-Coder-0.5B-Instruct (Q4_K_M, 491 MB), served as SmolLM2 is in tests."""
    llama_server()
    values: dict[str, object] = {
        "gguf": str(fetch(QWEN_05B)),
        "sha256": QWEN_05B.sha256,
        "threads": 2,
        "context_size": 2048,
        "timeout_s": 300.0,
        **fields,
    }
    return LocalModel.model_validate(values)


MODELS: dict[str, Callable[..., LocalModel]] = {"smollm2-135m": smol_spec, "qwen2.5-0.5b": _qwen}


def _with_pool(
    use: Callable[[LLMAdapterPool], Coroutine[Any, Any, T]], tmp_path, spec: LocalModel
) -> T:
    async def go() -> T:
        servers = InProcessServers(log_dir=tmp_path)
        pool = LLMAdapterPool({"local": spec}, local_servers=servers)
        await pool.on_start()
        try:
            return await use(pool)
        finally:
            await pool.close()
            await servers.stop("local")

    return asyncio.run(go())


def _ask(
    messages: tuple[ChatMessage, ...], tools: tuple[ToolSpec, ...] = (), max_tokens: int = 1
) -> LLMRequest:
    return LLMRequest(
        model="local", messages=messages, tools=tools, max_tokens=max_tokens, temperature=0.0
    )


@pytest.mark.parametrize("model", MODELS)
def test_bounded_counts_are_never_below_the_real_models(model, tmp_path, record_property):
    async def measure(pool: LLMAdapterPool) -> dict[str, int]:
        reported = {}
        for kind, (messages, tools) in PROMPTS.items():
            answer = await pool.complete(_ask(messages, tools), CONTEXT, None)
            reported[kind] = answer.usage.prompt_tokens
        return reported

    spec = MODELS[model](context_size=WINDOW, timeout_s=600.0)
    reported = _with_pool(measure, tmp_path, spec)
    rows = [f"{model:<18} {'counted':>7} {'reported':>8} {'ratio':>6} {'bound':>6}"]
    for kind, (messages, tools) in PROMPTS.items():
        counted = prompt_tokens(messages, tools)
        ratio = counted / reported[kind]
        rows.append(
            f"{kind:<18} {counted:>7} {reported[kind]:>8} {ratio:>6.2f} "
            f"{ratio * SAFETY_FACTOR:>6.2f}"
        )
        record_property(f"tokens {model} {kind}", f"{counted}/{reported[kind]}")
    print("\n" + "\n".join(rows))  # noqa: T201 - the ratios are the point of this test (-s)
    below = {
        kind: (upper_bound(prompt_tokens(*PROMPTS[kind])), reported[kind])
        for kind in PROMPTS
        if upper_bound(prompt_tokens(*PROMPTS[kind])) < reported[kind]
    }
    assert not below, f"bounded counts below the server's (bound, reported): {below}"


def _long_conversation(turns: int) -> list[ChatMessage]:
    """A tool loop grown far past the window: a page of the almanac per turn."""
    messages = list(TOOL_TURNS[:2])
    for n in range(turns):
        call = ToolCall(call_id=f"call_{n}", tool="lookup", arguments={"city": f"City {n}"})
        page = f"City {n}: " + PROSE.replace("harbour", f"harbour {n}")
        messages += [
            ChatMessage(role="assistant", tool_calls=(call,)),
            ChatMessage(role="tool", tool_call_id=call.call_id, content=page),
        ]
    return messages


@pytest.mark.parametrize("model", MODELS)
def test_a_trimmed_conversation_is_accepted_where_the_whole_one_is_refused(model, tmp_path):
    grown = _long_conversation(20)
    reserved = reserved_tokens(window=WINDOW, answer=16, tools=tools_tokens((LOOKUP,)), recalled=())
    cut = plan_cut(grown, window=WINDOW, reserved=reserved)
    assert cut is not None

    async def send(pool: LLMAdapterPool) -> tuple[object, LLMResponse, LLMResponse]:
        try:
            whole: object = await pool.complete(
                _ask(tuple(grown), (LOOKUP,), max_tokens=16), CONTEXT, None
            )
        except ContextTooLong as exc:
            whole = exc
        # a short answer is enough: the server checks the prompt, the arithmetic below the
        # room kept for the answer (a tiny model on a busy CPU takes minutes for 384 tokens)
        summarized = await pool.complete(
            _ask(summary_prompt(cut, WINDOW), max_tokens=32), CONTEXT, None
        )
        replacement = summary_message(cut, summarized.text) or dropped_note(cut)
        trimmed = await pool.complete(
            _ask(tuple(cut.apply(replacement)), (LOOKUP,), max_tokens=16), CONTEXT, None
        )
        return whole, summarized, trimmed

    spec = MODELS[model](context_size=WINDOW, timeout_s=600.0)
    whole, summarized, trimmed = _with_pool(send, tmp_path, spec)
    assert isinstance(whole, ContextTooLong), whole
    assert summarized.context_window == WINDOW  # the pool says which window answered
    assert summarized.usage.prompt_tokens + SUMMARY_TOKENS <= WINDOW
    assert trimmed.usage.prompt_tokens + 16 <= WINDOW  # the answer's 16 tokens still fit
    assert trimmed.finish_reason in ("stop", "length", "tool_calls")
