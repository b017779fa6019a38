"""The pool over the gateway: usage rows, and streamed deltas forwarded as job events."""

import asyncio

import pytest
from wiring import envelope, llm_request, run

from raytroupe.actors.llm import LLMAdapterPool
from raytroupe.actors.llm.provider import DeltaSink
from raytroupe.protocols import (
    Ack,
    AgentMessage,
    ErrorPayload,
    LLMDelta,
    LLMDeltas,
    LLMRequest,
    LLMResponse,
    OfflineModel,
    RecipientUnavailable,
    RouteSpec,
    ScriptedModel,
    ScriptedTurn,
    ToolSpec,
    Usage,
    decode,
    encode,
)


class FakeRouter:
    """A router client that records what it is asked to deliver, and acknowledges it."""

    def __init__(self, fail: Exception | None = None) -> None:
        self.messages: list[AgentMessage] = []
        self.fail = fail

    async def request(self, message: AgentMessage, /) -> AgentMessage:
        self.messages.append(message)
        await asyncio.sleep(0)  # a hop to another actor: more deltas may queue meanwhile
        if self.fail is not None:
            raise self.fail
        return message.reply(Ack())

    async def send(self, message: AgentMessage, /) -> str:
        self.messages.append(message)
        return "delivered"

    def delta_texts(self) -> list[str]:
        return [
            delta.text
            for message in self.messages
            for delta in message.payload.deltas
            if delta.text
        ]


class Trickle:
    """Streams its answer a word at a time, yielding to the event loop between words."""

    name = "trickle"

    def __init__(self, text: str) -> None:
        self.text = text

    async def complete(
        self, request: LLMRequest, *, on_delta: DeltaSink | None = None
    ) -> LLMResponse:
        words = self.text.split(" ")
        if request.stream and on_delta is not None:
            for i, word in enumerate(words):
                await on_delta(LLMDelta(text=word if i == 0 else f" {word}"))
                await asyncio.sleep(0)
        return LLMResponse(
            text=self.text, usage=Usage(completion_tokens=len(words)), model="t", provider="trickle"
        )

    async def close(self) -> None:
        pass


async def ask(pool: LLMAdapterPool, request: LLMRequest, **fields: object) -> LLMResponse:
    reply = decode(await pool.receive(encode(envelope(request, **fields))))
    assert isinstance(reply.payload, LLMResponse), reply.payload
    return reply.payload


# -- usage ------------------------------------------------------------------------------------


def _priced_script(prompt: int, completion: int, turns: int) -> ScriptedModel:
    return ScriptedModel(
        turns=tuple(
            ScriptedTurn(text="ok", prompt_tokens=prompt, completion_tokens=completion)
            for _ in range(turns)
        ),
        input_usd_per_mtok=1.0,
        output_usd_per_mtok=2.0,
    )


def test_usage_rows_sum_calls_tokens_and_cost_by_job_agent_alias_and_deployment():
    async def main():
        pool = LLMAdapterPool(
            {
                "w1": _priced_script(10, 5, turns=3),
                "w2": _priced_script(7, 3, turns=2),
                "r": RouteSpec(deployments=("w2",)),
            }
        )
        for sender, job, model in [
            ("alice", "j1", "w1"),
            ("alice", "j1", "w1"),
            ("bob", "j1", "w1"),
            ("alice", "j1", "r"),
            ("alice", "j2", "w2"),
        ]:
            await ask(pool, llm_request("hi", model=model), sender=sender, job_id=job)
        rows = {
            (r.job_id, r.agent, r.model, r.deployment): (
                r.calls,
                r.prompt_tokens,
                r.completion_tokens,
                pytest.approx(r.cost_usd * 1e6),
            )
            for r in await pool.usage()
        }
        assert rows == {
            ("j1", "alice", "w1", "w1"): (2, 20, 10, 40.0),
            ("j1", "bob", "w1", "w1"): (1, 10, 5, 20.0),
            ("j1", "alice", "r", "w2"): (1, 7, 3, 13.0),
            ("j2", "alice", "w2", "w2"): (1, 7, 3, 13.0),
        }
        assert {r.provider for r in await pool.usage()} == {"scripted"}
        assert len(await pool.usage("j1")) == 3
        assert [r.job_id for r in await pool.usage("j2")] == ["j2"]
        assert await pool.usage("nope") == []

    run(main())


def test_a_failed_call_books_no_usage():
    async def main():
        pool = LLMAdapterPool({"bad": ScriptedModel(turns=(ScriptedTurn(error="bad_request"),))})
        reply = decode(
            await pool.receive(encode(envelope(llm_request("hi", model="bad"), job_id="j1")))
        )
        assert isinstance(reply.payload, ErrorPayload)
        assert reply.payload.code == "bad_request"
        assert await pool.usage() == []

    run(main())


# -- streaming --------------------------------------------------------------------------------

CHAT = "Tell me about the weather in Paris today."


def test_streamed_deltas_reach_the_orchestrator_in_order_as_llm_delta_events():
    async def main():
        router = FakeRouter()
        pool = LLMAdapterPool({"fast": OfflineModel()}, router=router)
        request = llm_request(CHAT, model="fast", purpose="chat", stream=True)
        response = await ask(pool, request, sender="alice", job_id="job-1")
        assert response.text
        assert router.messages
        for message in router.messages:
            assert (message.sender, message.recipient) == ("llm", "orchestrator")
            assert message.job_id == "job-1"
            assert isinstance(message.payload, LLMDeltas)
            assert message.payload.agent == "alice"
        assert "".join(router.delta_texts()) == response.text
        assert len(router.delta_texts()) == len(response.text.split(" "))

    run(main())


def test_deltas_spread_over_several_events_stay_in_order():
    async def main():
        text = " ".join(f"w{i}" for i in range(40))
        router = FakeRouter()
        pool = LLMAdapterPool(
            {"t": OfflineModel()}, router=router, provider_factory=lambda _spec: Trickle(text)
        )
        request = llm_request(CHAT, model="t", purpose="chat", stream=True)
        response = await ask(pool, request, job_id="job-1")
        assert response.text == text
        assert len(router.messages) > 1  # batched while the router was busy, yet in order
        assert "".join(router.delta_texts()) == text

    run(main())


def test_tool_call_deltas_are_forwarded_too():
    async def main():
        router = FakeRouter()
        pool = LLMAdapterPool({"fast": OfflineModel()}, router=router)
        calculator = ToolSpec(name="calculator", description="Evaluates arithmetic.")
        request = llm_request(
            "What is 17 * 23 + 4?", model="fast", tools=(calculator,), stream=True
        )
        response = await ask(pool, request, job_id="job-1")
        [call] = response.tool_calls
        deltas = [d for m in router.messages for d in m.payload.deltas]
        [tool_delta] = [d for d in deltas if d.tool_name]
        assert (tool_delta.tool_name, tool_delta.tool_call_id) == ("calculator", call.call_id)
        assert "17 * 23 + 4" in tool_delta.arguments

    run(main())


@pytest.mark.parametrize(("stream", "job_id"), [(False, "job-1"), (True, None)])
def test_no_delta_events_without_streaming_or_without_a_job(stream, job_id):
    async def main():
        router = FakeRouter()
        pool = LLMAdapterPool({"fast": OfflineModel()}, router=router)
        request = llm_request(CHAT, model="fast", purpose="chat", stream=stream)
        response = await ask(pool, request, job_id=job_id)
        assert response.text
        assert router.messages == []

    run(main())


def test_a_lost_delta_event_does_not_fail_the_model_call():
    async def main():
        router = FakeRouter(fail=RecipientUnavailable("orchestrator restarting"))
        pool = LLMAdapterPool({"fast": OfflineModel()}, router=router)
        request = llm_request(CHAT, model="fast", purpose="chat", stream=True)
        response = await ask(pool, request, job_id="job-1")
        assert response.text
        assert router.messages

    run(main())


def test_a_pool_without_a_router_still_streams_from_the_provider():
    async def main():
        pool = LLMAdapterPool({"fast": OfflineModel()})
        request = llm_request(CHAT, model="fast", purpose="chat", stream=True)
        assert (await ask(pool, request, job_id="job-1")).text

    run(main())


def test_an_unexpected_router_error_neither_hangs_nor_fails_the_model_call():
    async def main():
        unhandled: list[dict] = []  # the dead drain task's error, kept out of the test output
        asyncio.get_running_loop().set_exception_handler(lambda _loop, c: unhandled.append(c))
        router = FakeRouter(fail=RuntimeError("router blew up"))
        pool = LLMAdapterPool(
            {"t": OfflineModel()}, router=router, provider_factory=lambda _spec: Trickle("a b c d")
        )
        request = llm_request(CHAT, model="t", purpose="chat", stream=True)
        task = asyncio.create_task(ask(pool, request, job_id="job-1"))
        try:
            for _ in range(500):  # nothing else runs: a call still pending by then is hung
                if task.done():
                    break
                await asyncio.sleep(0)
            assert task.done(), "the model call hangs after the router client raised"
            assert (await task).text == "a b c d"
        finally:
            task.cancel()

    run(main())
