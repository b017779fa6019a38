"""A human's approval of one tool call, asked of the orchestrator shard that runs the job."""

from __future__ import annotations

from typing import assert_never

from raytroupe.actors.endpoint import RouterClient, expected
from raytroupe.actors.tools.idempotency import idempotency_key
from raytroupe.protocols import (
    AgentMessage,
    ApprovalDecision,
    ApprovalRequest,
    ErrorPayload,
    ToolCall,
    ToolError,
    orchestrator_address,
)
from raytroupe.protocols.llm import ToolArguments

__all__ = ["await_approval"]


async def await_approval(
    router: RouterClient | None,
    sender: str,
    call: ToolCall,
    arguments: ToolArguments,
    *,
    agent: str,
    job_id: str | None,
) -> None:
    """Wait for a human to approve this exact call (through the orchestrator).

    Raises:
        ToolError: rejected, or nobody can be asked.
    """
    if router is None or job_id is None:
        raise ToolError(f"{call.tool!r} needs a human's approval, and no job can ask for it")
    approval_id = idempotency_key(job_id, call.task_id, call.step, call.tool, arguments)
    request = ApprovalRequest(approval_id=approval_id, task_id=call.task_id, agent=agent,
                              tool=call.tool, arguments=arguments)  # fmt: skip
    reply = await router.request(
        AgentMessage(  # to the orchestrator shard that runs the job
            sender=sender,
            recipient=orchestrator_address(job_id),
            job_id=job_id,
            payload=request,
        )
    )
    match expected(reply, ApprovalDecision, unexpected=ToolError):
        case ApprovalDecision() as decision if decision.approval_id == approval_id:
            pass
        case ApprovalDecision():
            raise ToolError(f"no approval for {call.tool!r}: the answer is for another call")
        case ErrorPayload() as error:
            raise ToolError(f"no approval for {call.tool!r}: {error.message}")
        case unexpected:
            assert_never(unexpected)
    if not decision.approved:
        raise ToolError(
            f"a human rejected {call.tool!r}" + (f": {decision.reason}" if decision.reason else ""),
            approval_id=approval_id,
        )
