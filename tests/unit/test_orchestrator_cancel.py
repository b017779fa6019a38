"""Cancelling a job, and per-subtask deadlines, without Ray."""

import asyncio

from wiring import build_troupe, order, run

from raytroupe.protocols import AgentSpec, ErrorCode, LLMRequest, OfflineModel, TeamSpec
from tests.support.inline import agent_name

SLOW = {"slow": OfflineModel(latency_s=30.0)}


def slow_team(**fields):
    agent = AgentSpec(name="sloth", role="w", model="slow")
    return TeamSpec(**{"name": "slow", "planner_model": "offline", "agents": (agent,), **fields})


def test_cancel_stops_running_subtasks_at_their_agent():
    async def main():
        troupe = await build_troupe(SLOW)
        job_id = await troupe.desk.submit(*order("- one.\n- two.", slow_team()))
        started = asyncio.Event()

        async def watch():
            seen = 0
            while True:
                events = await troupe.orchestrator.events(job_id, seen, timeout=None)
                seen = events[-1].seq
                if any(e.type == "subtask_started" for e in events):
                    started.set()
                    return

        await asyncio.wait_for(watch(), 10)
        assert await troupe.orchestrator.cancel(job_id) is True
        result = await troupe.orchestrator.wait(job_id, 10)
        again = await troupe.orchestrator.cancel(job_id)
        agent = troupe.provisioner.agents[agent_name("sloth")]
        return result, again, agent, started, troupe

    result, again, agent, started, troupe = run(main())
    assert started.is_set()
    assert result.status == "cancelled"
    assert result.error.code is ErrorCode.CANCELLED
    assert again is False
    assert agent._by_job == {}
    work = [r for r in troupe.llm.payloads(LLMRequest) if r.purpose == "work"]
    assert len(work) <= 2  # the calls in flight were abandoned, none started afterwards


def test_a_job_whose_subtasks_stop_before_its_runner_is_cancelled_is_cancelled_not_failed():
    """The agents may stop the subtasks and the job finish before the cancel reaches it.

    Under load this happened over HTTP: the job ended ``failed`` (its subtasks did not
    succeed) although the user had cancelled it.
    """

    async def main():
        troupe = await build_troupe(SLOW)
        send = troupe.client.send

        async def slow_send(message):  # the agents act on the cancel before cancel() goes on
            status = await send(message)
            await asyncio.sleep(0.2)
            return status

        job_id = await troupe.desk.submit(*order("- one.\n- two.", slow_team()))
        for _ in range(1000):
            events = await troupe.orchestrator.events(job_id)
            if any(e.type == "subtask_started" for e in events):
                break
            await asyncio.sleep(0.01)
        troupe.client.send = slow_send
        assert await troupe.orchestrator.cancel(job_id) is True
        return await troupe.orchestrator.wait(job_id, 10)

    result = run(main())
    assert result.status == "cancelled"
    assert result.error.code is ErrorCode.CANCELLED


def test_a_subtask_deadline_fails_it_instead_of_waiting_on_a_slow_model():
    async def main():
        troupe = await build_troupe(SLOW)
        team = slow_team(subtask_timeout_s=0.2)
        job_id = await troupe.desk.submit(*order("Say something.", team))
        return await troupe.orchestrator.wait(job_id, 20)

    result = run(main())
    assert result.status == "failed"
    (sub,) = result.subtasks
    assert sub.error.code is ErrorCode.DEADLINE_EXCEEDED
    assert sub.attempt == 3  # each attempt had its own deadline
