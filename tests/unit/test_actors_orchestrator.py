import asyncio
import json
from pathlib import Path

import pytest
from wiring import FlakyMailbox, Tap, build_troupe, control_plane, order, run

from raytroupe.actors import LocalRouterClient, MessageRouter
from raytroupe.actors.orchestrator import dispatch
from raytroupe.protocols import (
    AgentSpec,
    ConfigError,
    ErrorCode,
    JobNotFound,
    LLMRequest,
    PlannedSubtask,
    ScriptedModel,
    ScriptedTurn,
    TaskRequest,
    TeamSpec,
)
from raytroupe.protocols.job_context import JobContext
from raytroupe.runtime import Team
from tests.support.inline import written

EXAMPLE_TEAM = Path(__file__).parents[2] / "examples" / "teams" / "research.yaml"

TASK = (
    "Answer from these notes. The Eiffel Tower stands in Paris. Ray began at Berkeley.\n"
    "- Where does the Eiffel Tower stand?\n"
    "- Where did Ray begin?\n"
    "- Who wrote the notes?\n"
    "- What is in Paris?"
)


def researchers(**fields) -> TeamSpec:
    agents = (AgentSpec(name="ada", role="researcher"), AgentSpec(name="grace", role="researcher"))
    return TeamSpec(**{"name": "research", "agents": agents, **fields})


def scripted(*texts: str) -> ScriptedModel:
    return ScriptedModel(turns=tuple(ScriptedTurn(text=t) for t in texts))


def plan_json(*subtasks: dict) -> str:
    return json.dumps({"subtasks": list(subtasks)})


def test_a_four_item_task_runs_on_two_agents_and_succeeds():
    async def main():
        troupe = await build_troupe()
        result = await troupe.run(TASK, researchers())
        assert result.status == "succeeded", result.error
        assert result.error is None
        assert (result.team, result.task) == ("research", TASK)
        assert [s.id for s in result.subtasks] == ["s1", "s2", "s3", "s4"]
        assert all(s.status == "succeeded" and s.attempt == 1 for s in result.subtasks)
        assert {s.agent for s in result.subtasks} == {"ada", "grace"}
        assert result.subtasks[0].output == "The Eiffel Tower stands in Paris."
        for subtask in result.subtasks:
            assert subtask.output
        # the four questions sized by their text, their answers assembled: no planner, no
        # aggregation call
        assert result.answer == "\n".join(f"- {s.output}" for s in result.subtasks)
        assert result.usage.calls == 4
        assert result.timings.total_s >= 0
        events = await troupe.orchestrator.events(result.job_id)
        assert [e.seq for e in events] == list(range(1, len(events) + 1))
        kinds = [e.type for e in events]
        assert kinds[:2] == ["job_submitted", "plan_ready"]
        assert kinds[-2:] == ["job_aggregating", "job_succeeded"]
        assert sorted(kinds[2:-2]) == ["subtask_finished"] * 4 + ["subtask_started"] * 4
        for sid in ("s1", "s2", "s3", "s4"):
            mine = [e.type for e in events if e.subtask_id == sid]
            assert mine == ["subtask_started", "subtask_finished"]
        assert [e for e in events if e.terminal] == events[-1:]
        assert await troupe.orchestrator.status(result.job_id) == "succeeded"
        assert await troupe.orchestrator.jobs() == {result.job_id: "succeeded"}
        last = await troupe.orchestrator.events(result.job_id, after=len(events) - 1)
        assert last == events[-1:]

    run(main())


@pytest.mark.parametrize("planning", ["auto", "model"])
def test_the_example_team_sends_arithmetic_to_the_calculator_agent(planning):
    async def main():
        troupe = await build_troupe()
        task = "Tasks:\n- Compute 17 * 23 + 4\n- Describe the tower"
        team = Team.from_yaml(EXAMPLE_TEAM).spec().model_copy(update={"planning": planning})
        result = await troupe.run(task, team)
        assert result.status == "succeeded", result.error
        maths, words = result.subtasks
        assert (maths.role, maths.agent, maths.output) == ("analyst", "alan", "17 * 23 + 4 = 395")
        assert (maths.turns, maths.tool_calls) == (2, 1)
        assert words.role == "researcher"
        assert "395" in result.answer
        # the analyst's two turns, the researcher's one; planned by the model: plan, aggregate
        assert result.usage.calls == (3 if planning == "auto" else 5)

    run(main())


def test_a_plan_with_an_unknown_role_fails_the_job_with_plan():
    """In a team of two roles 'ghost' means neither for certain; asking again fails (the
    script has one answer), so the job fails: no fallback covers a failing model."""

    async def main():
        troupe = await build_troupe()
        answer = plan_json({"id": "s1", "role": "ghost", "instructions": "haunt"})
        team = researchers(
            planning="model", planner_model="planner", models={"planner": scripted(answer)}
        )
        team = team.model_copy(
            update={"agents": (*team.agents, AgentSpec(name="alan", role="analyst"))}
        )
        result = await troupe.run("anything", team)
        assert result.status == "failed"
        assert result.error.code is ErrorCode.PLAN
        assert "ghost" in result.error.message
        assert result.subtasks == ()
        events = await troupe.orchestrator.events(result.job_id)
        assert [e.type for e in events] == ["job_submitted", "job_failed"]
        assert events[-1].data["error"] == result.error.message

    run(main())


@pytest.mark.parametrize("answer", ["Sure! Here is my plan.", '{"subtasks": []}'])
def test_a_planner_answer_that_is_not_a_plan_fails_with_plan(answer):
    async def main():
        troupe = await build_troupe()
        team = researchers(
            planning="model", planner_model="planner", models={"planner": scripted(answer)}
        )
        result = await troupe.run("anything", team)
        assert (result.status, result.error.code) == ("failed", ErrorCode.PLAN)

    run(main())


def test_a_failing_subtask_fails_the_job_and_keeps_its_error():
    async def main():
        troupe = await build_troupe()
        team = TeamSpec(agents=(AgentSpec(name="ada", role="researcher", model="missing"),))
        result = await troupe.run("Find the answer.", team)
        assert result.status == "failed"
        assert result.error.code is ErrorCode.JOB_FAILED
        assert "s1 (config)" in result.error.message
        [subtask] = result.subtasks
        assert (subtask.status, subtask.agent, subtask.stop_reason) == ("failed", "ada", "error")
        assert subtask.error.code is ErrorCode.CONFIG
        assert result.answer == ""
        kinds = [e.type for e in await troupe.orchestrator.events(result.job_id)]
        assert "job_aggregating" not in kinds
        assert kinds[-1] == "job_failed"

    run(main())


def dependent_team(planner: ScriptedModel, writer_model: str = "w") -> TeamSpec:
    return TeamSpec(
        agents=(
            AgentSpec(name="rita", role="researcher", model="r"),
            AgentSpec(name="wendy", role="writer", model=writer_model),
        ),
        planning="model",
        planner_model="planner",
        models={"planner": planner, "r": scripted("fact: 42"), "w": scripted("report on 42")},
    )


DEPENDENT_PLAN = plan_json(
    {"id": "s1", "role": "researcher", "instructions": "Find the fact"},
    {"id": "s2", "role": "writer", "instructions": "Write it up", "depends_on": ["s1"]},
)


def test_a_dependent_subtask_runs_after_its_dependency_with_its_output():
    async def main():
        taps: dict[str, Tap] = {}

        def wrap(name, agent):
            taps[written(name)] = Tap(agent)  # by the name the team wrote
            return taps[written(name)]

        troupe = await build_troupe(wrap=wrap)
        team = dependent_team(scripted(DEPENDENT_PLAN, "final answer"))
        result = await troupe.run("Research and write", team)
        assert result.status == "succeeded", result.error
        assert result.answer == "final answer"
        first, second = result.subtasks
        assert (first.output, second.output) == ("fact: 42", "report on 42")
        assert second.depends_on == ("s1",)
        assert first.finished_at <= second.started_at
        [request] = taps["wendy"].payloads(TaskRequest)
        assert request.inputs == {"s1": "fact: 42"}
        assert request.job == JobContext(request="Research and write")
        writer_prompt = [r for r in troupe.llm.payloads(LLMRequest) if r.model == "w"]
        assert "[s1] fact: 42" in writer_prompt[0].messages[1].content
        events = await troupe.orchestrator.events(result.job_id)
        seq = {(e.type, e.subtask_id): e.seq for e in events}
        assert seq[("subtask_finished", "s1")] < seq[("subtask_started", "s2")]
        await troupe.pool.remove("planner")  # every scripted turn was played
        await troupe.pool.remove("r")
        await troupe.pool.remove("w")

    run(main())


def test_a_failed_dependency_skips_the_dependent():
    async def main():
        troupe = await build_troupe()
        planner = scripted(DEPENDENT_PLAN)
        team = dependent_team(planner).model_copy(
            update={
                "agents": (
                    AgentSpec(name="rita", role="researcher", model="missing"),
                    AgentSpec(name="wendy", role="writer", model="w"),
                )
            }
        )
        result = await troupe.run("Research and write", team)
        assert (result.status, result.error.code) == ("failed", ErrorCode.JOB_FAILED)
        first, second = result.subtasks
        assert first.status == "failed"
        assert (second.status, second.agent, second.output) == ("skipped", None, "")
        assert "s2 (skipped)" in result.error.message
        events = await troupe.orchestrator.events(result.job_id)
        s2 = [e for e in events if e.subtask_id == "s2"]
        assert [(e.type, e.data) for e in s2] == [("subtask_finished", {"status": "skipped"})]

    run(main())


def test_a_retryable_delivery_error_is_retried_with_the_next_attempt():
    async def main():
        flaky: dict[str, FlakyMailbox] = {}

        def wrap(name, agent):
            flaky[written(name)] = FlakyMailbox(agent, failures=1)
            return flaky[written(name)]

        troupe = await build_troupe(wrap=wrap)
        team = TeamSpec(agents=(AgentSpec(name="ada", role="researcher"),))
        result = await troupe.run("Find the answer.", team)
        assert result.status == "succeeded", result.error
        [subtask] = result.subtasks
        assert (subtask.attempt, subtask.agent) == (2, "ada")
        assert flaky["ada"].calls == 2
        events = await troupe.orchestrator.events(result.job_id)
        started = [e.data["attempt"] for e in events if e.type == "subtask_started"]
        assert started == [1, 2]
        finished = [e.data for e in events if e.type == "subtask_finished"]
        assert finished == [{"status": "succeeded", "agent": "ada", "attempt": 2}]
        letters = await troupe.router.dead_letters()
        assert [d.reason for d in letters] == [ErrorCode.RECIPIENT_UNAVAILABLE]

    run(main())


def test_retries_stop_at_max_attempts():
    async def main():
        troupe = await build_troupe(
            wrap=lambda _name, agent: FlakyMailbox(agent, failures=99), max_attempts=2
        )
        team = TeamSpec(agents=(AgentSpec(name="ada", role="researcher"),))
        result = await troupe.run("Find the answer.", team)
        [subtask] = result.subtasks
        # two to the role, and one more to the agent that died with it (the router named it)
        assert (subtask.status, subtask.attempt) == ("failed", 3)
        assert subtask.error.code is ErrorCode.RECIPIENT_UNAVAILABLE
        assert result.error.code is ErrorCode.JOB_FAILED

    run(main())


def test_a_subtask_waits_for_the_agent_that_died_with_it_while_ray_restarts_it():
    async def main():
        flaky: dict[str, FlakyMailbox] = {}

        def wrap(name, agent):  # whichever agent takes it dies, and restarts for a while
            flaky[written(name)] = FlakyMailbox(agent, failures=1, restarting=3)
            return flaky[written(name)]

        troupe = await build_troupe(wrap=wrap, max_attempts=2)
        team = TeamSpec(agents=(AgentSpec(name="ada", role="researcher"),
                                AgentSpec(name="bob", role="researcher")))  # fmt: skip
        result = await troupe.run("Find the answer.", team)
        assert result.status == "succeeded", result.error
        [subtask] = result.subtasks
        took = flaky[subtask.agent]
        # the role, then that agent again while it restarted (not counted), then it answered
        assert (took.calls, subtask.attempt) == (5, 5)
        other = {"ada": "bob", "bob": "ada"}[subtask.agent]
        assert flaky[other].calls == 0  # its teammate would have started the subtask over

    run(main())


def test_the_wait_for_a_restarting_agent_is_bounded(monkeypatch):
    monkeypatch.setattr(dispatch, "RESTART_WAIT_S", 0.25)  # one pause of 0.1 s, then no more

    async def main():
        ada: list[FlakyMailbox] = []
        troupe = await build_troupe(
            wrap=lambda _name, agent: ada.append(FlakyMailbox(agent, 1, 99)) or ada[-1],
            max_attempts=2,
        )
        team = TeamSpec(agents=(AgentSpec(name="ada", role="researcher"),))
        result = await troupe.run("Find the answer.", team)
        [subtask] = result.subtasks
        # role (died), ada (restarting), one wait, ada again, the role's last attempt
        assert (subtask.status, subtask.attempt, ada[0].calls) == ("failed", 4, 4)
        assert subtask.error.code is ErrorCode.RECIPIENT_UNAVAILABLE
        assert subtask.error.detail["restarting"] is True

    run(main())


class GateProvisioner:
    """Holds every job in planning until ``gate`` opens."""

    def __init__(self) -> None:
        self.gate = asyncio.Event()
        self.entered = asyncio.Event()

    async def provision(self, _team):
        self.entered.set()
        await self.gate.wait()


def test_wait_with_a_short_timeout_on_a_blocked_job_returns_none():
    async def main():
        router = MessageRouter()
        provisioner = GateProvisioner()
        desk, (orchestrator,) = await control_plane(LocalRouterClient(router), provisioner)
        job_id = await desk.submit(*order("Find the answer.", researchers()))
        await provisioner.entered.wait()
        assert await orchestrator.status(job_id) == "planning"
        assert await orchestrator.wait(job_id, timeout=0.01) is None
        assert await orchestrator.events(job_id, after=1, timeout=0.01) == []
        provisioner.gate.set()  # no agent registered: the one subtask fails, but the job ends
        result = await orchestrator.wait(job_id)
        assert result is not None
        assert (result.status, result.error.code) == ("failed", ErrorCode.JOB_FAILED)
        [subtask] = result.subtasks
        assert subtask.error.code is ErrorCode.UNKNOWN_RECIPIENT

    run(main())


def test_a_provisioning_failure_fails_the_job():
    class Broken:
        async def provision(self, _team):
            raise ConfigError("no capacity for this team")

    async def main():
        desk, (orchestrator,) = await control_plane(LocalRouterClient(MessageRouter()), Broken())
        job_id = await desk.submit(*order("x", researchers()))
        result = await orchestrator.wait(job_id)
        assert (result.status, result.error.code) == ("failed", ErrorCode.CONFIG)
        assert result.error.message == "no capacity for this team"

    run(main())


def test_unknown_job_ids_raise_job_not_found():
    async def main():
        _, (orchestrator,) = await control_plane(
            LocalRouterClient(MessageRouter()), GateProvisioner()
        )
        for call in (
            orchestrator.status("job-nope"),
            orchestrator.wait("job-nope", timeout=0.01),
            orchestrator.events("job-nope"),
        ):
            with pytest.raises(JobNotFound) as caught:
                await call
            assert caught.value.detail == {"job_id": "job-nope"}

    run(main())


def test_jobs_are_provisioned_each_time_and_agents_reused():
    async def main():
        troupe = await build_troupe()
        first = await troupe.run("Find the answer.", researchers())
        agents = dict(troupe.provisioner.agents)
        second = await troupe.run("Find it again.", researchers())
        assert (first.status, second.status) == ("succeeded", "succeeded")
        assert troupe.provisioner.provisioned == 2
        assert troupe.provisioner.agents == agents
        assert list(await troupe.orchestrator.jobs()) == [first.job_id, second.job_id]

    run(main())


def test_wait_with_zero_timeout_returns_a_finished_jobs_result():
    async def main():
        troupe = await build_troupe()
        result = await troupe.run("Find the answer.", researchers())
        assert await troupe.orchestrator.wait(result.job_id, timeout=0) == result

    run(main())


def test_events_with_the_default_timeout_do_not_block():
    async def main():
        troupe = await build_troupe()
        result = await troupe.run("Find the answer.", researchers())
        seen = len(await troupe.orchestrator.events(result.job_id))
        later = await asyncio.wait_for(troupe.orchestrator.events(result.job_id, after=seen), 1.0)
        assert later == []

    run(main())


def test_a_wide_fan_out_finishing_together_records_each_subtask_once_then_the_join():
    async def main():
        wide = [
            PlannedSubtask(id=f"s{i}", role="researcher", instructions=f"Note {i} holds fact {i}.")
            for i in range(40)
        ]
        join = PlannedSubtask(
            id="join", role="researcher", instructions="Join them",
            depends_on=tuple(s.id for s in wide),
        )  # fmt: skip
        team = researchers(plan=(*wide, join), max_parallel=64, max_subtasks=64)
        troupe = await build_troupe()
        result = await troupe.run("Fan out", team)
        events = await troupe.orchestrator.events(result.job_id)
        return result, events

    result, events = run(main())
    assert result.status == "succeeded", result.error
    assert [s.id for s in result.subtasks] == [*(f"s{i}" for i in range(40)), "join"]
    finished = [e.subtask_id for e in events if e.type == "subtask_finished"]
    assert sorted(finished) == sorted(s.id for s in result.subtasks)  # each exactly once
    assert finished[-1] == "join"
    *wide, join = result.subtasks
    assert max(s.finished_at for s in wide) <= join.started_at
