import pytest
from wiring import llm_request, run

from raytroupe.actors.llm import LLMAdapterPool
from raytroupe.actors.llm.config import LLMConfig
from raytroupe.protocols import ConfigError, OpenAIModel

KEY_ENV = "TROUPE_TEST_UNSET_KEY"


def test_a_deployment_without_its_key_is_reported_not_fatal(monkeypatch):
    monkeypatch.delenv(KEY_ENV, raising=False)
    config = LLMConfig(models={"gpt": OpenAIModel(model="gpt-4o-mini", api_key_env=KEY_ENV)})

    async def main():
        pool = LLMAdapterPool(config=config)
        problems = await pool.unservable()
        assert set(problems) == {"gpt"}
        assert KEY_ENV in problems["gpt"]
        with pytest.raises(ConfigError, match=KEY_ENV):
            await pool.complete(llm_request("hello", model="gpt"))
        # the rest of the pool serves
        assert (await pool.complete(llm_request("hello", model="offline"))).provider == "offline"

    run(main())


def test_the_key_value_never_shows_in_the_configuration(monkeypatch):
    monkeypatch.setenv(KEY_ENV, "sk-test-SECRET-value-123")
    config = LLMConfig(models={"gpt": OpenAIModel(model="gpt-4o-mini", api_key_env=KEY_ENV)})

    async def main():
        pool = LLMAdapterPool(config=config)
        assert await pool.unservable() == {}
        shown = repr(await pool.models()) + config.model_dump_json()
        assert "SECRET" not in shown

    run(main())
