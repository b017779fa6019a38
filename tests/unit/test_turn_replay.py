"""Turn-level durability: a model call is made and billed once per place of a subtask's run.

The pool keeps each answered call with its cost (``raytroupe.actors.llm.replay``); a subtask
run again from its first turn (its agent died) is given the answers of the calls it had made,
and the tools' results of the steps it had reached, and makes only the calls it had not. A
counting provider stands in for the model server: it counts the calls that reached it.
"""

from __future__ import annotations

import asyncio

import pytest
from wiring import envelope, in_process_memory, in_process_sandbox, llm_request, run

from raytroupe.actors import AgentActor, LLMAdapterPool, LocalRouterClient, MessageRouter
from raytroupe.actors.llm.state import PoolState
from raytroupe.protocols import (
    AgentSpec,
    BadRequest,
    LLMRequest,
    LLMResponse,
    MemoryPolicy,
    MemoryWrite,
    OfflineModel,
    TaskRequest,
    TaskResult,
    ToolCall,
    Usage,
    decode,
    encode,
)


class Counting:
    """A model that answers from a list, counting the calls that reached it.

    ``hold_at``: the call (1-based) that waits, uncounted, until the caller gives up (an
    agent killed before its next call reached the server).
    """

    name = "counting"

    def __init__(self, answers: list[LLMResponse], hold_at: int | None = None) -> None:
        self.answers, self.hold_at = answers, hold_at
        self.made: list[LLMRequest] = []
        self.held = asyncio.Event()
        self.fail = 0
        """Calls still to fail (after the gate)."""
        self.gate: asyncio.Event | None = None
        """When set: every call waits for it, counted (the server has it)."""
        self.asked = 0
        self.reached = asyncio.Event()

    async def complete(self, request: LLMRequest, *, on_delta=None) -> LLMResponse:  # noqa: ARG002
        if self.hold_at is not None and len(self.made) + 1 == self.hold_at:
            self.hold_at = None
            self.held.set()
            await asyncio.Event().wait()  # until cancelled
        self.asked += 1
        self.reached.set()
        if self.gate is not None:
            await self.gate.wait()
        if self.fail:
            self.fail -= 1
            raise BadRequest("refused")
        self.made.append(request)
        return self.answers[(len(self.made) - 1) % len(self.answers)]

    async def close(self) -> None:
        pass


def answer(text: str = "", *calls: ToolCall, tokens: int = 10) -> LLMResponse:
    usage = Usage(prompt_tokens=tokens, completion_tokens=1, calls=1)
    return LLMResponse(text=text, tool_calls=calls, model="m", provider="counting", usage=usage)


def calc(expression: str, call_id: str) -> ToolCall:
    return ToolCall(call_id=call_id, tool="calculator", arguments={"expression": expression})


async def pool_on(model: Counting, state=None, replica: int = 0) -> LLMAdapterPool:
    from raytroupe.actors.llm.config import LLMConfig  # noqa: PLC0415

    pool = LLMAdapterPool(
        {"m": OfflineModel()},
        provider_factory=lambda _spec: model,
        state=state,
        config=LLMConfig(replicas=2),
        replica=replica,
    )
    await pool.on_start()
    return pool


async def wired(model: Counting, state):
    """A router with a pool of ``model`` (its ledger at ``state``) and a sandbox registered."""
    router = MessageRouter()
    pool = await pool_on(model, state)
    await router.register("llm-0", pool, ["llm"])
    sandbox = await in_process_sandbox()
    await router.register("tools-0", sandbox, ["tools"])
    return router, LocalRouterClient(router), pool, sandbox


async def ask(pool: LLMAdapterPool, request: LLMRequest, job_id="j1", tenant="acme"):
    message = envelope(request, "llm", sender="ada", job_id=job_id, tenant=tenant)
    return decode(await pool.receive(encode(message))).payload


def placed(text: str, place: str | None = "s1/1/c0") -> LLMRequest:
    return llm_request(text, model="m", replay=place)


# -- the pool


@pytest.mark.parametrize("kept", ["memory", "sqlite"])
def test_a_call_asked_again_at_its_place_is_answered_from_the_record_and_billed_once(
    kept, tmp_path
):
    model = Counting([answer("first"), answer("second")])
    state = None if kept == "memory" else tmp_path / "llm.sqlite"

    async def main():
        pool = await pool_on(model, state)
        made = await ask(pool, placed("What is 2 + 2?"))
        again = await ask(pool, placed("What is 2 + 2?"))
        spent = await pool.spent("job:j1")
        usage = await pool.usage("j1")
        return made, again, spent, usage

    made, again, spent, usage = run(main())
    assert len(model.made) == 1
    assert (made.text, made.replayed) == ("first", False)
    assert (again.text, again.replayed) == ("first", True)
    assert again.usage == made.usage  # the subtask counts the call once, as it was made
    assert spent.tokens == 11  # billed once
    assert [row.calls for row in usage] == [1]


def test_another_replica_and_a_restarted_pool_answer_from_the_same_record(tmp_path):
    model = Counting([answer("first"), answer("second")])
    state = tmp_path / "llm.sqlite"

    async def main():
        first = await pool_on(model, state, replica=0)
        made = await ask(first, placed("hi"))
        other = await ask(await pool_on(model, PoolState(state), replica=1), placed("hi"))
        await first.on_stop()
        restarted = await ask(await pool_on(model, state, replica=0), placed("hi"))
        return made, other, restarted

    made, other, restarted = run(main())
    assert len(model.made) == 1
    assert other.replayed
    assert restarted.replayed
    assert other.text == restarted.text == made.text == "first"


def test_a_call_at_another_place_or_of_another_job_or_tenant_is_made():
    """A place names a call only within its job: no job or tenant gets another's answer."""
    model = Counting([answer(f"answer {n}") for n in range(1, 8)])

    async def main():
        pool = await pool_on(model)
        answers = [
            await ask(pool, placed("hi")),
            await ask(pool, placed("hi", "s1/2/c1")),  # the next call of the run
            await ask(pool, placed("hi", "s2/1/c0")),  # another subtask's
            await ask(pool, placed("hi"), job_id="j2"),  # another job's
            await ask(pool, placed("hi"), tenant="mallory"),  # another tenant's
            await ask(pool, placed("hi", None)),  # a call that is not kept
            await ask(pool, placed("hi", None)),
        ]
        streamed = placed("hi").model_copy(update={"stream": True})
        return answers, await ask(pool, streamed)  # how it is delivered is not what it asks

    answers, delivered = run(main())
    assert len(model.made) == 7
    assert not any(a.replayed for a in answers)
    assert (delivered.text, delivered.replayed) == ("answer 1", True)


def test_a_failed_call_is_not_kept_and_is_made_again():
    model = Counting([answer("made")])

    async def main():
        pool = await pool_on(model)
        model.fail = 1
        refused = await ask(pool, placed("hi"))
        return refused, await ask(pool, placed("hi")), await pool.spent("job:j1")

    refused, made, spent = run(main())
    assert refused.code.value == "bad_request"
    assert (made.text, made.replayed) == ("made", False)
    assert spent.tokens == 11


def test_the_same_call_asked_again_while_it_is_made_waits_for_it_here_or_on_another_replica(
    tmp_path,
):
    """An agent whose reply was lost (its router died while the call went on) asks again:
    on the replica making it, or on another, the call is made once and both get its answer."""
    model = Counting([answer("once"), answer("twice")])
    state = tmp_path / "llm.sqlite"

    async def main():
        first = await pool_on(model, state, replica=0)
        second = await pool_on(model, PoolState(state), replica=1)
        model.gate = asyncio.Event()
        making = asyncio.ensure_future(ask(first, placed("hi")))
        await model.reached.wait()
        here = asyncio.ensure_future(ask(first, placed("hi")))
        there = asyncio.ensure_future(ask(second, placed("hi")))
        await asyncio.sleep(0.3)  # both wait: neither reached the model
        waiting = model.asked
        model.gate.set()
        return waiting, await making, await here, await there, await first.spent("job:j1")

    waiting, made, here, there, spent = run(main())
    assert waiting == 1
    assert len(model.made) == 1
    assert (made.text, made.replayed) == ("once", False)
    assert (here.text, here.replayed) == ("once", True)
    assert (there.text, there.replayed) == ("once", True)
    assert spent.tokens == 11


def test_a_call_waited_for_that_fails_is_made_by_the_one_that_waited(tmp_path):
    model = Counting([answer("made")])

    async def main():
        pool = await pool_on(model, tmp_path / "llm.sqlite")
        model.gate, model.fail = asyncio.Event(), 1  # the first call fails at the gate
        failing = asyncio.ensure_future(ask(pool, placed("hi")))
        await model.reached.wait()
        waiting = asyncio.ensure_future(ask(pool, placed("hi")))
        await asyncio.sleep(0.1)
        model.gate.set()  # then the one that waited makes the call
        return await failing, await waiting

    refused, made = run(main())
    assert refused.code.value == "bad_request"
    assert (made.text, made.replayed) == ("made", False)
    assert model.asked == 2


# -- an agent run again after it died


def test_a_subtask_run_again_after_its_agent_died_makes_only_the_calls_it_had_not(tmp_path):
    """Killed after turn 2 of 4 (its third call had not reached the model), the subtask run
    again by a new agent replays turns 1 and 2 from the record: the model sees 4 calls in all,
    the ledger and the usage report count 4, and the result counts each turn once."""
    model = Counting(
        [
            answer("", calc("17 * 23", "c1"), tokens=10),
            answer("", calc("391 + 4", "c2"), tokens=20),
            answer("", calc("395 * 2", "c3"), tokens=30),
            answer("It is 790.", tokens=40),
        ],
        hold_at=3,
    )
    recalling = MemoryPolicy(recall=True, write_results=False, min_score=0.0)
    spec = AgentSpec(name="ada", role="worker", tools=("calculator",), model="m", memory=recalling)
    request = TaskRequest(task_id="s1", instructions="Compute (17 * 23 + 4) * 2")

    async def main():
        router, client, pool, sandbox = await wired(model, tmp_path / "llm.sqlite")
        memory = await in_process_memory()
        await router.register("memory", memory, ["memory"])
        tools = await sandbox.grant(spec.name, spec.tools)

        def dispatch():
            message = envelope(request, "role:worker", sender="orchestrator", job_id="job-1")
            return asyncio.ensure_future(client.request(message))

        first = AgentActor(spec, client, tools)
        await router.register(spec.name, first, [spec.role])
        cut = dispatch()
        await asyncio.wait_for(model.held.wait(), 10)
        await first.on_stop()  # the agent dies between its second and third call
        with pytest.raises(asyncio.CancelledError):
            await cut
        await router.unregister(spec.name)

        # meanwhile the tenant's memory gained what the subtask will now recall beside its
        # conversation: a recall is an aid, not part of the run, and the run replays
        await memory.write("default", MemoryWrite(text="17 * 23 is 391, checked by hand."))
        again = AgentActor(spec, client, tools)  # Ray's restart: a new one, nothing kept
        await router.register(spec.name, again, [spec.role])
        reply = await dispatch()
        return reply.payload, await pool.spent("job:job-1"), await pool.usage("job-1")

    result, spent, usage = run(main(), guard_s=30)
    assert isinstance(result, TaskResult), result
    assert (result.status, result.output) == ("succeeded", "It is 790.")
    assert len(model.made) == 4  # 2 before the death, 2 after: none twice
    assert result.turns == 4
    assert result.usage.calls == 4
    assert result.usage.prompt_tokens == 100
    assert spent.tokens == 104  # (10 + 1) + (20 + 1) + (30 + 1) + (40 + 1)
    assert sum(row.calls for row in usage) == 4
    replayed = [s.attributes.get("replayed", False) for s in result.spans if s.kind == "model_call"]
    assert replayed == [True, True, False, False]
    # what the model was shown after the restart is the conversation it had, and the memory
    assert model.made[2].messages[-1].content == "395"  # 391 + 4, replayed from the sandbox
    assert "checked by hand" in model.made[2].messages[1].content
    assert "checked by hand" not in model.made[1].messages[1].text


class ByTurn(Counting):
    """Answers by the turn of the conversation it is asked (the tool results it holds)."""

    async def complete(self, request: LLMRequest, *, on_delta=None) -> LLMResponse:
        await super().complete(request, on_delta=on_delta)
        return self.answers[sum(1 for m in request.messages if m.role == "tool")]


@pytest.mark.parametrize(
    ("teammate", "made"),
    [({"name": "bea"}, 3), ({"name": "bea", "instructions": "Check every step twice."}, 5)],
    ids=["same-spec", "other-instructions"],
)
def test_a_teammate_given_the_subtask_again_replays_it_only_if_asked_as_its_agent_was(
    tmp_path, teammate, made
):
    """The agent that ran it died with the word that it took it: the job gives the subtask
    to a teammate of the same role. Its own name is not part of a call's place, so a teammate
    with the same spec reaches the same places, replays the two calls made and makes the
    third (3 in all); one told otherwise is asked another conversation: 2 + 3 calls."""
    model = ByTurn(
        [
            answer("", calc("17 * 23", "c1"), tokens=10),
            answer("", calc("391 + 4", "c2"), tokens=20),
            answer("It is 395.", tokens=30),
        ],
        hold_at=3,
    )
    spec = AgentSpec(name="ada", role="worker", tools=("calculator",), model="m")
    other = spec.model_copy(update=teammate)
    request = TaskRequest(task_id="s1", instructions="Compute 17 * 23 + 4")

    async def main():
        router, client, _pool, sandbox = await wired(model, tmp_path / "llm.sqlite")

        def dispatch(to: str):
            message = envelope(request, to, sender="orchestrator", job_id="job-1")
            return asyncio.ensure_future(client.request(message))

        first = AgentActor(spec, client, await sandbox.grant(spec.name, spec.tools))
        await router.register(spec.name, first, [spec.role])
        cut = dispatch(spec.name)
        await asyncio.wait_for(model.held.wait(), 10)
        await first.on_stop()
        with pytest.raises(asyncio.CancelledError):
            await cut
        await router.unregister(spec.name)
        second = AgentActor(other, client, await sandbox.grant(other.name, other.tools))
        await router.register(other.name, second, [other.role])
        reply = await dispatch(other.name)
        return reply.payload

    result = run(main(), guard_s=30)
    assert isinstance(result, TaskResult), result
    assert (result.status, result.output, result.agent) == ("succeeded", "It is 395.", "bea")
    assert len(model.made) == made


def test_each_candidate_of_a_redundant_subtask_is_a_run_of_its_own(tmp_path):
    """Candidates of one subtask (redundancy 3 over two agents of one spec) are asked the same
    conversation, and each is made: none is given another's answer, even from its own agent."""
    model = ByTurn([answer("It is 395.", tokens=30)])
    spec = AgentSpec(name="ada", role="worker", model="m")
    specs = [spec, spec.model_copy(update={"name": "bea"})]
    request = TaskRequest(task_id="s1", instructions="Compute 17 * 23 + 4")

    async def main():
        router, client, _pool, _sandbox = await wired(model, tmp_path / "llm.sqlite")
        for agent in specs:
            await router.register(agent.name, AgentActor(agent, client, ()), [agent.role])
        asked = [
            envelope(request.model_copy(update={"candidate": n}), specs[n % 2].name,
                     sender="orchestrator", job_id="job-1")
            for n in range(3)
        ]  # fmt: skip
        return await asyncio.gather(*(client.request(m) for m in asked))

    replies = run(main(), guard_s=30)
    assert [r.payload.status for r in replies] == ["succeeded"] * 3
    assert len(model.made) == 3
