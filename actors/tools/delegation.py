"""Agents as tools: ``delegate`` asks a peer and uses its answer, ``handoff`` passes it the subtask.

Work sent on keeps the caller's context: the request is derived from the envelope the tool
call came in, so it runs for the same tenant (its memories, its spend), job (a cancel reaches
it), trace, deadline and budget, one routing further along (so a loop of delegations ends at
the router's hop limit). Only the caller's peers can be asked: its teammates and the team's
``delegates`` (kept with its grant), whatever name its model gives.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import assert_never

from raytroupe.actors.endpoint import RouterClient, expected
from raytroupe.actors.tools.builtins import ToolContext
from raytroupe.protocols import (
    ErrorCode,
    ErrorPayload,
    TaskRequest,
    TaskResult,
    ToolCall,
    ToolDef,
    ToolError,
    ToolNotAllowed,
    scoped_name,
    unscoped,
)
from raytroupe.protocols.llm import ToolArguments

__all__ = ["DELEGATE", "HANDOFF", "Delegation"]

DELEGATE = ToolDef(
    name="delegate",
    description="Ask another agent, by name, to do a piece of work; returns its answer.",
    parameters={
        "type": "object",
        "properties": {
            "agent": {"type": "string", "minLength": 1},
            "instructions": {"type": "string", "minLength": 1},
        },
        "required": ["agent", "instructions"],
        "additionalProperties": False,
    },
    timeout_s=300.0,
    tags=("agents",),
)
"""Manager-as-tools: a manager agent granted this tool can call other agents like tools."""

HANDOFF = ToolDef(
    name="handoff",
    description="Pass this task, with its context, to another agent, who finishes it; its "
    "answer becomes yours.",
    parameters={
        "type": "object",
        "properties": {
            "agent": {"type": "string", "minLength": 1},
            "instructions": {"type": "string", "minLength": 1},
            "context": {"type": "string"},
        },
        "required": ["agent", "instructions"],
        "additionalProperties": False,
    },
    timeout_s=600.0,
    tags=("agents",),
)
"""Handoff: the agent stops, and the receiving agent's answer is the subtask's answer."""


class Delegation:
    """The runners of ``delegate`` and ``handoff`` for one sandbox.

    Args:
        router: how the sandbox reaches agents.
        sender: the sandbox's address (the requests' sender).
        peers: whom an agent may ask (from its grant).
    """

    def __init__(
        self, router: RouterClient, sender: str, peers: Callable[[str], frozenset[str]]
    ) -> None:
        self._router = router
        self._sender = sender
        self._peers = peers

    async def handoff(self, arguments: ToolArguments, ctx: ToolContext) -> object:
        """Handoff: pass the subtask, with what the model says of it so far, to another agent."""
        brief = (
            f"{arguments['instructions']}\n\nContext handed over by "
            f"{unscoped(ctx.agent, ctx.envelope.tenant if ctx.envelope else '')}:\n"
            f"{arguments.get('context', '')}"
        ).strip()
        return await self.delegate({"agent": arguments["agent"], "instructions": brief}, ctx)

    async def delegate(self, arguments: ToolArguments, ctx: ToolContext) -> object:
        """Manager-as-tools: ask another agent to do a piece of work; its answer is the data.

        The request is derived from the call's envelope: the caller's tenant, job, trace and
        deadline, its hop count (which the router raises at each delivery, so a loop of
        delegations ends at the hop limit) and its job's budget. A cancel of the job reaches
        the work, which runs under the job's id. Only the caller's peers can be asked.

        Raises:
            ToolNotAllowed: the target is not one of the caller's peers.
            ToolError: the target could not do it; or a routing error (hop limit, deadline,
                unknown agent), typed as the router raised it.
            ToolInfrastructureError: the target's tools' host failed it (so the caller's
                subtask fails too, rather than its model hearing of it).
        """
        cause, call = ctx.envelope, ctx.envelope.payload if ctx.envelope else None
        if cause is None or not isinstance(call, ToolCall):
            raise ToolError("delegation needs the envelope of the call")
        target = self._peer(ctx.agent, str(arguments["agent"]), cause.tenant)
        request = TaskRequest(
            task_id=f"{ctx.task_id or 'task'}/{call.step or 0}.{call.call_id}"[:256],
            instructions=str(arguments["instructions"]),
            inputs={"from": unscoped(ctx.agent, cause.tenant)},
            budget=call.budget,
        )
        reply = await self._router.request(
            cause.derive(sender=self._sender, recipient=target, payload=request)
        )
        shown = unscoped(target, cause.tenant)
        match expected(reply, TaskResult, unexpected=ToolError):
            case TaskResult(status="succeeded") as done:
                return {"agent": shown, "output": done.output}
            case TaskResult(error=ErrorPayload(code=ErrorCode.TOOL_INFRASTRUCTURE) as error):
                raise error.model_copy(  # its tools' host failed: the caller's subtask fails too
                    update={"message": f"{shown} could not do it: {error.message}"}
                ).to_exception()
            case TaskResult() as done:
                why = done.error.message if done.error else done.stop_reason
                raise ToolError(f"{shown} could not do it: {why}", agent=shown)
            case ErrorPayload() as error:
                raise error.model_copy(
                    update={"message": f"cannot reach {shown}: {error.message}"}
                ).to_exception()
            case unexpected:
                assert_never(unexpected)

    def _peer(self, caller: str, named: str, tenant: str) -> str:
        """The agent ``named`` stands for, if ``caller`` may ask it.

        A model names its teammates as the team file does; a tenant's agents run under names
        scoped to the tenant, so ``named`` is tried as it is and in the tenant's scope.

        Raises:
            ToolError: ``named`` is the caller itself.
            ToolNotAllowed: ``named`` is not one of the caller's peers.
        """
        peers = self._peers(caller)
        for candidate in (named, scoped_name(tenant, named)):
            if candidate == caller:
                raise ToolError("an agent cannot delegate to itself", agent=named)
            if candidate in peers:
                return candidate
        allowed = ", ".join(unscoped(p, tenant) for p in sorted(peers)) or "nobody"
        raise ToolNotAllowed(
            f"{unscoped(caller, tenant)} may not delegate to {named!r}; it may ask: {allowed}",
            tool="delegate",
            agent=caller,
            target=named,
        )
