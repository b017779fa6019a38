"""The orchestrator when the router itself fails under it."""

from wiring import InProcessProvisioner, control_plane, order, run

from raytroupe.actors import (
    FrontDesk,
    LLMAdapterPool,
    LocalRouterClient,
    MessageRouter,
    Orchestrator,
)
from raytroupe.protocols import (
    LLM_POOL,
    AgentMessage,
    AgentSpec,
    ErrorCode,
    RecipientUnavailable,
    TeamSpec,
)


class RouterDownForRoles:
    """A router client whose router is unreachable for the first ``failures`` dispatches
    (to agents' roles; the model calls of the pool's role go through)."""

    def __init__(self, inner: LocalRouterClient, failures: int) -> None:
        self.inner = inner
        self.failures = failures
        self.refused: list[AgentMessage] = []

    async def request(self, message: AgentMessage, /) -> AgentMessage:
        dispatch = message.recipient.startswith("role:") and message.recipient != LLM_POOL
        if dispatch and len(self.refused) < self.failures:
            self.refused.append(message)
            raise RecipientUnavailable("router is unavailable: restarting")
        return await self.inner.request(message)

    async def send(self, message: AgentMessage, /) -> str:
        return await self.inner.send(message)


async def troupe_with(failures: int) -> tuple[FrontDesk, Orchestrator, RouterDownForRoles]:
    router = MessageRouter()
    inner = LocalRouterClient(router)
    pool = LLMAdapterPool()
    await router.register("llm-0", pool, ["llm"])
    flaky = RouterDownForRoles(inner, failures)
    provisioner = InProcessProvisioner(router, pool, inner)
    desk, (orchestrator,) = await control_plane(flaky, provisioner, max_attempts=3)
    return desk, orchestrator, flaky


TEAM = TeamSpec(agents=[AgentSpec(name="solo", role="worker")])


def test_an_unreachable_router_is_retried_with_the_next_attempt():
    async def main():
        desk, orchestrator, flaky = await troupe_with(failures=2)
        job_id = await desk.submit(*order("Say hello.", TEAM))
        result = await orchestrator.wait(job_id, 5)
        assert result is not None
        assert result.status == "succeeded", result.error
        (sub,) = result.subtasks
        assert sub.attempt == 3
        assert [m.attempt for m in flaky.refused] == [1, 2]

    run(main())


def test_a_router_down_for_every_attempt_fails_the_job_without_hanging():
    async def main():
        desk, orchestrator, flaky = await troupe_with(failures=10)
        job_id = await desk.submit(*order("Tasks:\n- Say hello.\n- Say goodbye.", TEAM))
        result = await orchestrator.wait(job_id, 5)
        assert result is not None
        assert result.status == "failed"
        assert result.error.code is ErrorCode.JOB_FAILED
        assert {s.error.code for s in result.subtasks} == {ErrorCode.RECIPIENT_UNAVAILABLE}
        assert [(s.id, s.attempt) for s in result.subtasks] == [("s1", 3), ("s2", 3)]
        assert len(flaky.refused) == 6
        events = await orchestrator.events(job_id)
        assert events[-1].type == "job_failed"

    run(main())
