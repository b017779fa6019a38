"""Replicas of the LLM pool in one process: one ledger, one configuration, shared cooldowns.

Each replica is a real :class:`LLMAdapterPool` with ``replica=n`` over one SQLite state file;
:class:`LocalPeers` reaches the others as :class:`actors.ray_handles.RayPoolPeers` does under
Ray (by calling their methods). The race between replicas in separate processes, on
PostgreSQL too, is in ``test_state_contract.py``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from llm_fakes import FakeProvider
from wiring import envelope, llm_request, run

from raytroupe.actors.llm.config import LLMConfig
from raytroupe.actors.llm.gateway import CallContext, RetryPolicy
from raytroupe.actors.llm.pool import LLMAdapterPool
from raytroupe.protocols import (
    AgentMessage,
    Budget,
    BudgetExceeded,
    CancelJob,
    Cancelled,
    ConfigError,
    LLMRequest,
    LLMResponse,
    ModelSpec,
    OfflineModel,
    OpenAICompatibleModel,
    Overloaded,
    RouteSpec,
    ScriptedModel,
    decode,
    encode,
)


class LocalPeers:
    """The other replicas of ``pools`` (filled in after they are made), for replica ``me``."""

    def __init__(self, pools: list[LLMAdapterPool], me: int) -> None:
        self.pools, self.me = pools, me
        self.tasks: list[asyncio.Task[Any]] = []

    def _others(self) -> list[LLMAdapterPool]:
        return [p for n, p in enumerate(self.pools) if n != self.me]

    async def configure(
        self, models: Mapping[str, ModelSpec], *, replace: bool, operator: bool
    ) -> None:
        for pool in self._others():
            await pool.configure(models, replace=replace, operator=operator, local=True)

    async def remove(self, alias: str) -> None:
        for pool in self._others():
            await pool.remove(alias, local=True)

    async def cancel(self, job_id: str) -> int:
        return sum([await pool.cancel_job(job_id) for pool in self._others()])

    def cooled(self, deployment: str, wait_s: float) -> None:
        for pool in self._others():
            self.tasks.append(asyncio.ensure_future(pool.cooled(deployment, wait_s)))

    async def first(self, message: AgentMessage) -> AgentMessage:
        reply = await self.pools[0].receive(encode(message))
        assert reply is not None
        return decode(reply)

    async def complete_first(self, request: LLMRequest, context: CallContext) -> LLMResponse:
        return await self.pools[0].complete(request, context)


class Saved:
    """One restart store for every replica (``GcsRestartStore("llm")`` under Ray)."""

    def __init__(self) -> None:
        self.value: Any = None

    def save(self, value: Any) -> None:
        self.value = value

    def load(self) -> Any:
        return self.value


async def replicas(
    count: int, tmp_path: Path, config: LLMConfig, factory: Any = None, saved: Saved | None = None
) -> list[LLMAdapterPool]:
    pools: list[LLMAdapterPool] = []
    config = config.model_copy(update={"replicas": count})
    for n in range(count):
        pool = LLMAdapterPool(
            config=config,
            provider_factory=factory,
            state=tmp_path / "llm.sqlite",
            restart_store=saved,
            replica=n,
            peers=LocalPeers(pools, n),
        )
        await pool.on_start()
        pools.append(pool)
    return pools


def test_replicas_share_one_budget(tmp_path):
    config = LLMConfig(
        models={"m": OfflineModel()},
        tenant_budgets={"acme": Budget(tokens=2000)},
        retry=RetryPolicy(default_max_tokens=100),
    )

    def factory(_spec):
        return FakeProvider("m", prompt_tokens=1, completion_tokens=100)  # within its hold

    async def main():
        pools = await replicas(3, tmp_path, config, factory)
        request = llm_request("hi", model="m")
        outcomes = await asyncio.gather(
            *(
                pools[i % 3].complete(request, CallContext(job_id="j", tenant="acme", agent="a"))
                for i in range(30)
            ),
            return_exceptions=True,
        )
        done = [o for o in outcomes if not isinstance(o, BaseException)]
        refused = [o for o in outcomes if isinstance(o, BudgetExceeded)]
        assert len(done) + len(refused) == 30
        assert refused  # 30 calls of ~105 tokens held each do not fit 2,000
        spent = [await pool.spent("tenant:acme") for pool in pools]
        assert spent[0] == spent[1] == spent[2]  # one ledger, whichever replica is asked
        assert spent[0].tokens == 101 * len(done) <= 2000
        # usage adds up over the replicas, whichever is asked
        (row,) = await pools[2].usage("j")
        assert row.calls == len(done)
        assert [len(await p.usage_here("j")) for p in pools] == [1, 1, 1]

    run(main())


def test_a_configuration_reaches_every_replica_and_a_restarted_one_reads_it_back(tmp_path):
    saved = Saved()

    async def main():
        pools = await replicas(2, tmp_path, LLMConfig(), saved=saved)
        await pools[1].configure({"extra": OfflineModel(latency_s=0.0)}, operator=True)
        assert ["extra" in await pool.models() for pool in pools] == [True, True]
        # what one replica refuses, none takes
        with pytest.raises(ConfigError, match="already serve a different model"):
            await pools[0].configure({"extra": OfflineModel(latency_s=1.0)})
        assert (await pools[1].models())["extra"] == OfflineModel(latency_s=0.0)
        restarted = LLMAdapterPool(
            config=LLMConfig(replicas=2), restart_store=saved, replica=1,
            state=tmp_path / "llm.sqlite",
        )  # fmt: skip
        await restarted.on_start()
        assert "extra" in await restarted.models()
        await pools[0].remove("extra")
        assert ["extra" in await pool.models() for pool in pools] == [False, False]

    run(main())


def test_a_cooldown_seen_by_one_replica_is_honoured_by_all(tmp_path):
    def factory(_spec):
        return FakeProvider("m", [Overloaded("busy", retry_after_s=30.0)])

    config = LLMConfig(
        models={"m": OfflineModel()}, retry=RetryPolicy(max_attempts=1, max_wait_s=0.0)
    )

    async def main():
        pools = await replicas(3, tmp_path, config, factory)
        with pytest.raises(Overloaded):
            await pools[0].complete(llm_request("hi", model="m"))
        await asyncio.gather(*pools[0]._peers.tasks)  # the peers were told
        for pool in pools:
            state = pool._gateway.deployment("m")
            assert state is not None
            assert 25.0 < state.cooling() <= 30.0
        # and they do not call it: each refuses at once, with the wait
        with pytest.raises(Overloaded, match="cools down"):
            await pools[2].complete(llm_request("hi", model="m"))
        assert not await pools[1].cooled("unknown", 5.0)
        assert not await pools[1].cooled("m", float("inf"))  # nonsense from a peer: ignored

    run(main())


def test_each_replica_takes_its_part_of_a_deployments_limits(tmp_path):
    spec = OpenAICompatibleModel(
        base_url="http://127.0.0.1:9/v1", model="x", rpm=60, tpm=6000, max_concurrency=4
    )
    config = LLMConfig(models={"q": spec})

    async def main():
        pools = await replicas(3, tmp_path, config, lambda _s: FakeProvider("q"))
        states = [pool._gateway.deployment("q") for pool in pools]
        assert all(s is not None for s in states)
        # 60 rpm: one request every 3 s on each of 3 replicas, 20 a minute each
        assert [s._rpm.time_period for s in states] == [3.0, 3.0, 3.0]  # type: ignore[union-attr]
        assert sum(s._tpm.max_rate * 10 for s in states) == pytest.approx(6000)  # type: ignore[union-attr]
        assert [s._slots._value for s in states] == [2, 1, 1]  # type: ignore[union-attr]
        # fewer slots than replicas: refused, and nothing changed
        narrow = spec.model_copy(update={"max_concurrency": 2})
        with pytest.raises(ConfigError, match="fewer than the pool's 3 replicas"):
            await pools[0].configure({"narrow": narrow})
        assert "narrow" not in await pools[0].models()

    run(main())


def test_a_cancel_stops_the_jobs_calls_on_every_replica(tmp_path):
    gate = asyncio.Event()

    async def main():
        pools = await replicas(
            2, tmp_path, LLMConfig(models={"slow": OfflineModel()}),
            lambda _s: FakeProvider("slow", gate=gate),
        )  # fmt: skip
        calls = [
            asyncio.create_task(
                pool.receive(encode(envelope(llm_request("hi", model="slow"), job_id="j1")))
            )
            for pool in pools
        ]
        await asyncio.sleep(0.05)
        stop = await pools[0].receive(encode(envelope(CancelJob(), job_id="j1")))
        assert stop is not None
        assert decode(stop).payload == Cancelled(stopped=2)
        for call in calls:
            reply = await asyncio.wait_for(call, 5)
            assert reply is not None
            assert decode(reply).payload.code.value == "cancelled"
        # a call of the job still on its way (through another router shard) is refused by
        # either replica, not served; another job's call is
        gate.set()

        def call(job_id):
            return encode(envelope(llm_request("hi", model="slow"), job_id=job_id))

        for pool in pools:
            late = await pool.receive(call("j1"))
            assert late is not None
            assert decode(late).payload.code.value == "cancelled"
        other = await pools[1].receive(call("j2"))
        assert other is not None
        assert isinstance(decode(other).payload, LLMResponse)

    run(main())


def test_a_scripted_model_plays_its_turns_once_in_order_whichever_replica_is_asked(tmp_path):
    script = ScriptedModel(turns=tuple({"text": t} for t in ("one", "two", "three", "four")))

    async def main():
        pools = await replicas(3, tmp_path, LLMConfig())
        await pools[2].configure(
            {"script": script, "via": RouteSpec(deployments=("script",))}, operator=True
        )
        answers = [
            (await pools[1].complete(llm_request("hi", model="script"))).text,
            (await pools[0].complete(llm_request("hi", model="script"))).text,
        ]
        reply = await pools[2].receive(encode(envelope(llm_request("hi", model="via"))))
        assert reply is not None
        answers.append(decode(reply).payload.text)
        answers.append((await pools[1].complete(llm_request("hi", model="via"))).text)
        assert answers == ["one", "two", "three", "four"]  # llm-0 alone played them
        await pools[1].remove("script")  # used up: no replica complains

    run(main())
