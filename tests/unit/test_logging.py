import asyncio

from structlog.testing import capture_logs
from wiring import build_troupe

from raytroupe.protocols import AgentSpec, TeamSpec
from tests.support.inline import agent_name


def test_log_lines_carry_job_and_message_ids():
    team = TeamSpec(
        agents=[AgentSpec(name="logger-a", role="worker", tools=["calculator"])],
    )

    async def main():
        troupe = await build_troupe()
        return await troupe.run("Tasks:\n- Say hello.\n- What is 2 + 3?", team)

    with capture_logs() as logs:
        result = asyncio.run(main())

    assert result.status == "succeeded"
    done = [e for e in logs if e["event"] == "subtask_done"]
    assert len(done) == 2
    for entry in done:
        assert entry["job_id"] == result.job_id
        assert entry["msg_id"]
        assert entry["agent"] == agent_name("logger-a")  # the actor's: logs are the operator's
        assert entry["task_id"] in {"s1", "s2"}
    tool = [e for e in logs if e["event"] == "tool_called"]
    assert tool
    assert tool[0]["job_id"] == result.job_id
    assert tool[0]["tool"] == "calculator"
    finished = [e for e in logs if e["event"] == "job_finished"]
    assert finished == [
        {
            "event": "job_finished",
            "log_level": "info",
            "job_id": result.job_id,
            "status": "succeeded",
            "total_s": finished[0]["total_s"],
        }
    ]
