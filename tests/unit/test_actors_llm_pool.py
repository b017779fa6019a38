import asyncio

import pytest
from wiring import envelope, llm_request

from raytroupe.actors.llm import DEFAULT_MODELS, LLMAdapterPool, OfflineProvider, ScriptedProvider
from raytroupe.protocols import (
    CancelJob,
    Cancelled,
    ConfigError,
    ErrorCode,
    ErrorPayload,
    Event,
    LLMResponse,
    OfflineModel,
    ScriptedModel,
    ScriptedTurn,
    ScriptError,
    ToolCall,
    decode,
    encode,
)

CALL = ToolCall(call_id="c1", tool="calculator", arguments={"expression": "1 + 1"})


def script(*texts: str) -> ScriptedModel:
    return ScriptedModel(turns=tuple(ScriptedTurn(text=t) for t in texts))


def test_scripted_plays_turns_in_order():
    async def main():
        provider = ScriptedProvider(
            ScriptedModel(
                turns=(
                    ScriptedTurn(tool_calls=(CALL,)),
                    ScriptedTurn(text="two words"),
                    ScriptedTurn(text="cut", finish_reason="length"),
                )
            )
        )
        assert provider.remaining == 3
        first = await provider.complete(llm_request("hello there", model="s"))
        second = await provider.complete(llm_request("again"))
        third = await provider.complete(llm_request("more"))
        assert (first.tool_calls, first.finish_reason, first.text) == ((CALL,), "tool_calls", "")
        assert (second.text, second.finish_reason) == ("two words", "stop")
        assert third.finish_reason == "length"
        assert (first.provider, first.model) == ("scripted", "s")
        assert (second.usage.prompt_tokens, second.usage.completion_tokens) == (1, 2)
        assert second.usage.calls == 1
        assert provider.remaining == 0
        await provider.close()  # used up: nothing to complain about

    asyncio.run(main())


def test_scripted_raises_when_exhausted():
    async def main():
        provider = ScriptedProvider(script("only"))
        await provider.complete(llm_request("x", model="m"))
        with pytest.raises(ScriptError, match="no turns left"):
            await provider.complete(llm_request("x", model="m"))

    asyncio.run(main())


def test_scripted_close_raises_when_turns_remain():
    async def main():
        provider = ScriptedProvider(script("a", "b"))
        await provider.complete(llm_request("x"))
        with pytest.raises(ScriptError) as caught:
            await provider.close()
        assert caught.value.detail == {"remaining": 1}

    asyncio.run(main())


def test_pool_serves_default_aliases_offline():
    async def main():
        pool = LLMAdapterPool()
        assert await pool.models() == dict(DEFAULT_MODELS)
        assert set(DEFAULT_MODELS) == {"default", "offline"}
        for alias in ("default", "offline"):
            response = await pool.complete(llm_request("hi", model=alias))
            assert (response.provider, response.model) == ("offline", alias)

    asyncio.run(main())


def test_pool_takes_models_on_top_of_the_defaults():
    async def main():
        pool = LLMAdapterPool({"s": script("hey"), "default": OfflineModel(latency_s=0.0)})
        assert set(await pool.models()) == {"default", "offline", "s"}
        assert (await pool.complete(llm_request("x", model="s"))).text == "hey"

    asyncio.run(main())


def test_unknown_alias_is_a_config_error():
    async def main():
        with pytest.raises(ConfigError, match="unknown model alias 'gpt-nope'") as caught:
            await LLMAdapterPool().complete(llm_request("x", model="gpt-nope"))
        assert caught.value.detail == {"model": "gpt-nope"}

    asyncio.run(main())


def test_configure_conflict_is_a_config_error_unless_replaced():
    async def main():
        pool = LLMAdapterPool({"s": script("old")})
        with pytest.raises(ConfigError) as caught:
            await pool.configure({"s": script("new"), "fresh": script("f")})
        assert caught.value.detail == {"aliases": ["s"]}
        assert set(await pool.models()) == {"default", "offline", "s"}  # nothing bound
        await pool.complete(llm_request("x", model="s"))  # use up the old script
        await pool.configure({"s": script("new")}, replace=True)
        assert (await pool.complete(llm_request("x", model="s"))).text == "new"

    asyncio.run(main())


def test_replacing_a_scripted_model_with_turns_left_reports_them():
    async def main():
        pool = LLMAdapterPool({"s": script("unused")})
        with pytest.raises(ScriptError):
            await pool.configure({"s": script("new")}, replace=True)
        assert (await pool.complete(llm_request("x", model="s"))).text == "new"

    asyncio.run(main())


def test_configure_with_an_equal_spec_keeps_the_scripts_position():
    async def main():
        pool = LLMAdapterPool()
        await pool.configure({"s": script("one", "two")})
        assert (await pool.complete(llm_request("x", model="s"))).text == "one"
        await pool.configure({"s": script("one", "two")})
        await pool.configure({"s": script("one", "two")}, replace=True)
        assert (await pool.complete(llm_request("x", model="s"))).text == "two"

    asyncio.run(main())


def test_remove_closes_the_provider():
    async def main():
        pool = LLMAdapterPool({"used": script("a"), "unused": script("b", "c")})
        await pool.complete(llm_request("x", model="used"))
        await pool.remove("used")
        with pytest.raises(ScriptError, match="2 scripted turn"):
            await pool.remove("unused")
        await pool.remove("never-there")
        assert set(await pool.models()) == {"default", "offline"}
        with pytest.raises(ConfigError):
            await pool.complete(llm_request("x", model="unused"))

    asyncio.run(main())


def test_provider_factory_builds_every_provider():
    built = []

    def factory(spec):
        built.append(spec)
        return OfflineProvider()

    async def main():
        pool = LLMAdapterPool({"s": script("never played")}, provider_factory=factory)
        response = await pool.complete(llm_request("x", model="s"))
        assert response.provider == "offline"

    asyncio.run(main())
    assert built == [*DEFAULT_MODELS.values(), script("never played")]


def test_receive_answers_an_llm_request_envelope():
    async def main():
        pool = LLMAdapterPool({"s": script("scripted answer")})
        request = envelope(llm_request("x", model="s"), sender="ada", job_id="j1")
        reply = decode(await pool.receive(encode(request)))
        assert isinstance(reply.payload, LLMResponse)
        assert reply.payload.text == "scripted answer"
        assert (reply.sender, reply.recipient) == ("llm", "ada")
        assert (reply.correlation_id, reply.job_id) == (request.id, "j1")

    asyncio.run(main())


def test_receive_turns_failures_into_error_replies():
    async def main():
        pool = LLMAdapterPool({"s": script("one")})
        wrong = decode(await pool.receive(encode(envelope(Event(name="hi")))))
        assert isinstance(wrong.payload, ErrorPayload)
        assert wrong.payload.code is ErrorCode.INVALID_INPUT
        assert "event" in wrong.payload.message
        unknown = decode(await pool.receive(encode(envelope(llm_request("x", model="nope")))))
        assert unknown.payload.code is ErrorCode.CONFIG
        await pool.complete(llm_request("x", model="s"))
        spent = decode(await pool.receive(encode(envelope(llm_request("x", model="s")))))
        assert spent.payload.code is ErrorCode.SCRIPT

    asyncio.run(main())


def test_replace_binds_every_alias_even_when_an_old_script_had_turns_left():
    async def main():
        pool = LLMAdapterPool({"a": script("unused")})
        with pytest.raises(ScriptError):
            await pool.configure({"a": script("new"), "b": script("b")}, replace=True)
        assert set(await pool.models()) >= {"a", "b"}

    asyncio.run(main())


class MemoryKeeper:
    """A RestartStore in a dict (Ray's KV store plays this part in production)."""

    def __init__(self):
        self.value = None

    def save(self, value):
        self.value = value

    def load(self):
        return self.value


def test_a_pool_started_again_serves_the_aliases_configured_since_and_not_removed_ones():
    async def main():
        keeper = MemoryKeeper()
        first = LLMAdapterPool(restart_store=keeper)
        await first.configure({"team-a": OfflineModel(), "team-b": OfflineModel()})
        await first.remove("team-b")
        again = LLMAdapterPool(restart_store=keeper)  # what a Ray restart does: __init__ again
        await again.on_start()  # and on_start
        return await again.models()

    models = asyncio.run(main())
    assert "team-a" in models
    assert "team-b" not in models
    assert set(DEFAULT_MODELS) <= set(models)


def test_cancel_job_stops_that_jobs_model_calls_and_no_other():
    async def main():
        pool = LLMAdapterPool({"slow": OfflineModel(latency_s=60.0)})

        def call(job_id):
            data = encode(envelope(llm_request("hi", model="slow"), "llm", job_id=job_id))
            return asyncio.create_task(pool.receive(data))

        first, other = call("job-1"), call("job-2")
        await asyncio.sleep(0.05)  # both are waiting on the model
        stop = envelope(CancelJob(), "llm", job_id="job-1")
        stopped = decode(await pool.receive(encode(stop)))
        reply = decode(await asyncio.wait_for(first, 5))
        still_running = not other.done()
        other.cancel()
        return stopped.payload, reply.payload, still_running

    stopped, reply, still_running = asyncio.run(main())
    assert stopped == Cancelled(stopped=1)
    assert reply.code is ErrorCode.CANCELLED
    assert still_running
