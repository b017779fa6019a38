"""An approval answers one exact call: other arguments need a decision of their own, before
and after the orchestrator restarts from its journal."""

import asyncio

from hypothesis import given, settings
from hypothesis import strategies as st
from test_approvals import PAY
from wiring import (
    GatedPool,
    InProcessProvisioner,
    control_plane,
    in_process_sandbox,
    order,
    run,
    started,
)

from raytroupe.actors import LLMAdapterPool, LocalRouterClient, MessageRouter
from raytroupe.actors.orchestrator.journal import Journal
from raytroupe.actors.tools.idempotency import idempotency_key
from raytroupe.protocols import (
    AgentMessage,
    AgentSpec,
    ApprovalDecision,
    ApprovalRequest,
    MemoryPolicy,
    ScriptedModel,
    ScriptedTurn,
    TeamSpec,
    ToolCall,
)
from tests.support.inline import agent_name

CLERK = AgentSpec(name="clerk", role="w", model="m", tools=("pay",),
                  memory=MemoryPolicy(recall=False, write_results=False))  # fmt: skip
TEAM = TeamSpec(name="pay", planner_model="offline", agents=(CLERK,))
CLERK_ACTOR = agent_name("clerk")  # the inline agent of the driver's tenant, as the sandbox sees it


def pay_call(amount, call_id="c1"):
    return ToolCall(call_id=call_id, tool="pay", arguments={"amount": amount})


def paid_at_step(amount, task_id):
    """The call the clerk makes first (turn 1, call 0: step 1000), with other arguments."""
    return pay_call(amount, "forged").model_copy(update={"task_id": task_id, "step": 1000})


async def life(root, turns, paid, allowed):
    """One life of the system; its state (journal, grants, call records) lives under ``root``."""

    async def pay(arguments, _ctx):
        paid.append(arguments["amount"])
        return {"paid": arguments["amount"]}

    router = MessageRouter()
    client = LocalRouterClient(router)
    pool = GatedPool(await started(LLMAdapterPool({"m": ScriptedModel(turns=turns)})), allowed)
    await router.register("llm-0", pool, ["llm"])
    sandbox = await in_process_sandbox(client, root=root)
    sandbox.register(PAY, pay)
    await router.register("tools-0", sandbox, ["tools"])
    provisioner = InProcessProvisioner(router, pool.pool, client, sandbox=sandbox)
    journal = Journal(root / "journal.sqlite")
    desk, (orchestrator,) = await control_plane(client, provisioner, journal=journal)
    await router.register("orchestrator", orchestrator)
    return desk, orchestrator, sandbox, pool, client


async def asked(orchestrator, job_id, amount):
    """The approval request for paying ``amount`` once it is pending."""
    while True:  # bounded by the test's guard
        for request in await orchestrator.approvals(job_id):
            if request.arguments == {"amount": amount}:
                return request
        await asyncio.sleep(0.01)


def test_an_approval_covers_its_arguments_only_before_and_after_a_restart(tmp_path):
    paid = []

    async def first_life():
        turns = (ScriptedTurn(tool_calls=(pay_call(120),)), ScriptedTurn(text="never played"))
        desk, orchestrator, sandbox, pool, _ = await life(tmp_path, turns, paid, allowed=1)
        job_id = await desk.submit(*order("Pay the invoice.", TEAM))
        approved = await asked(orchestrator, job_id, 120)
        await orchestrator.decide(job_id, approved.approval_id, approved=True)
        await pool.held.wait()  # the tool ran; the model's next turn is held: the process dies
        task_id = approved.task_id
        # the same step of the same subtask, other arguments: another decision is needed
        other = asyncio.ensure_future(
            sandbox.call(paid_at_step(9999, task_id), agent=CLERK_ACTOR, job_id=job_id)
        )
        pending = await asked(orchestrator, job_id, 9999)
        status = await orchestrator.status(job_id)
        await orchestrator.decide(job_id, pending.approval_id, approved=False, reason="no")
        refused = await other
        # the approved call itself, again (a redelivery): its recorded result, no second run
        again = await sandbox.call(paid_at_step(120, task_id), agent=CLERK_ACTOR, job_id=job_id)
        for task in list(orchestrator._tasks):
            task.cancel()
        return job_id, approved, pending, status, refused, again

    async def second_life(job_id, task_id):
        turns = (ScriptedTurn(tool_calls=(pay_call(5000),)), ScriptedTurn(text="done"))
        _, orchestrator, sandbox, _, client = await life(tmp_path, turns, paid, allowed=99)
        # the resumed subtask's model now asks for 5000 at the step that was approved for 120
        pending = await asked(orchestrator, job_id, 5000)
        status = await orchestrator.status(job_id)
        paid_before = list(paid)
        replayed = await sandbox.call(paid_at_step(120, task_id), agent=CLERK_ACTOR, job_id=job_id)
        rejected = await sandbox.call(paid_at_step(9999, task_id), agent=CLERK_ACTOR, job_id=job_id)
        # a request forged under the approved call's id, with other arguments
        approved_id = idempotency_key(job_id, task_id, 1000, "pay", {"amount": 120})
        forged = ApprovalRequest(approval_id=approved_id, task_id=task_id, agent=CLERK_ACTOR,
                                 tool="pay", arguments={"amount": 9999})  # fmt: skip
        answer = await client.request(AgentMessage(
            sender="tools-0", recipient="orchestrator", job_id=job_id, payload=forged
        ))  # fmt: skip
        await orchestrator.decide(job_id, pending.approval_id, approved=True)
        result = await orchestrator.wait(job_id, 10)
        return pending, status, paid_before, replayed, rejected, answer.payload, result

    job_id, approved, pending, status, refused, again = run(first_life())
    assert approved.approval_id == idempotency_key(
        job_id, approved.task_id, 1000, "pay", {"amount": 120}
    )
    assert pending.approval_id != approved.approval_id
    assert status == "awaiting_approval"
    assert not refused.ok
    assert "a human rejected 'pay': no" in refused.error.message
    assert (again.ok, again.data) == (True, {"paid": 120})
    assert paid == [120]

    pending, status, paid_before, replayed, rejected, forged_answer, result = run(
        second_life(job_id, approved.task_id)
    )
    assert pending.approval_id != approved.approval_id
    assert status == "awaiting_approval"
    assert paid_before == [120]  # nothing ran on the strength of the 120 approval
    assert (replayed.ok, replayed.data) == (True, {"paid": 120})  # once, from its record
    assert not rejected.ok  # the rejection is on record too: not asked again, not run
    assert "a human rejected 'pay': no" in rejected.error.message
    assert isinstance(forged_answer, ApprovalDecision)
    assert not forged_answer.approved
    assert "another call" in forged_answer.reason
    assert result.status == "succeeded"
    assert paid == [120, 5000]


_values = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=8)
)
_arguments = st.dictionaries(st.text(min_size=1, max_size=6), _values, min_size=1, max_size=4)


@settings(max_examples=300, deadline=None)
@given(arguments=_arguments, data=st.data())
def test_the_idempotency_key_changes_with_any_argument(arguments, data):
    key = idempotency_key("job", "s1", 1000, "pay", arguments)
    name = data.draw(st.sampled_from(sorted(arguments)))
    value = data.draw(_values.filter(lambda v: _differs(v, arguments[name])))
    changed = {**arguments, name: value}
    dropped = {k: v for k, v in arguments.items() if k != name}
    added = {**arguments, name + "x": arguments[name]}
    assert idempotency_key("job", "s1", 1000, "pay", changed) != key
    assert idempotency_key("job", "s1", 1000, "pay", dropped) != key
    if name + "x" not in arguments:
        assert idempotency_key("job", "s1", 1000, "pay", added) != key
    assert idempotency_key("job", "s1", 1000, "pay", dict(reversed(arguments.items()))) == key
    for other in (("job2", "s1", 1000, "pay"), ("job", "s2", 1000, "pay"),
                  ("job", "s1", 1001, "pay"), ("job", "s1", 1000, "payx")):  # fmt: skip
        assert idempotency_key(*other, arguments) != key


def _differs(a, b):
    """True when ``a`` and ``b`` are different JSON values (1 and 1.0, True and 1 differ)."""
    return type(a) is not type(b) or a != b
