"""The tool sandbox actor: registry, allow-lists, validation, isolation, idempotency, MCP, A2A.

Its tools: the built-ins, the function tools of ``ToolsConfig.functions`` (imported when the
sandbox starts; one that cannot load is left out, and granting it says why), MCP servers', and
one ``a2a_<name>`` per remote agent of ``ToolsConfig.a2a_agents`` (under ``network``).

A call goes: known tool? → granted to the calling agent? → arguments valid (after safe
coercion)? → already done (a side-effecting tool: by idempotency key, at most once; any other:
at this step of its subtask's run, so that a subtask run again sees what it saw)? → run, with
the tool's timeout and retries → output checked against its schema and size-capped. Every
outcome is one ``ToolResult`` ``{ok, data, error, metadata}``; nothing here raises at the
caller.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import structlog

from raytroupe.actors.endpoint import RouterClient, TakesBatches, serve_envelope
from raytroupe.actors.outbound import Outbound
from raytroupe.actors.telemetry import metrics
from raytroupe.actors.tools.approval import await_approval
from raytroupe.actors.tools.builtins import BuiltinSettings, Runner, ToolContext, builtin_tools
from raytroupe.actors.tools.config import ToolsConfig
from raytroupe.actors.tools.delegation import DELEGATE, HANDOFF, Delegation
from raytroupe.actors.tools.functions import load_function_tool
from raytroupe.actors.tools.grants import Grants
from raytroupe.actors.tools.idempotency import (
    AtMostOnce,
    IdempotencyStore,
    effect_key,
    step_key,
)
from raytroupe.actors.tools.isolation import Isolation
from raytroupe.actors.tools.memory_tools import KNOWLEDGE_SEARCH, NOTE, READ_NOTES, MemoryTools
from raytroupe.actors.tools.scratch import scratch_dir
from raytroupe.actors.tools.shipped import ShippedTools
from raytroupe.actors.tools.validation import check_schema, validate_arguments
from raytroupe.protocols import (
    AgentMessage,
    ConfigError,
    ErrorPayload,
    Handoff,
    MCPServerSpec,
    ToolCall,
    ToolDef,
    ToolError,
    ToolNotAllowed,
    ToolResult,
    ToolSpec,
    TroupeError,
)
from raytroupe.protocols.llm import ToolArguments
from raytroupe.protocols.safe_schema import safe_validator

__all__ = ["DELEGATE", "HANDOFF", "ToolSandbox", "ToolsConfig"]

if TYPE_CHECKING:
    from raytroupe.actors.tools.a2a_source import A2AToolSource
    from raytroupe.actors.tools.mcp_source import MCPToolSource

log = structlog.get_logger("raytroupe.tools")


class ToolSandbox(TakesBatches):
    """Runs tool calls. A plain class; Ray makes ``tools/<n>`` actors of it.

    Args:
        isolation: how untrusted code is run (tests may pass their own).
        mcp_factory: builds an MCP tool source for a server spec.
        own_addresses: the cluster's node addresses, which ``http_get`` never reaches.
    """

    def __init__(
        self,
        config: ToolsConfig | None = None,
        *,
        name: str = "tools",
        isolation: Isolation | None = None,
        mcp_factory: Callable[[MCPServerSpec], MCPToolSource] | None = None,
        router: RouterClient | None = None,
        own_addresses: Sequence[str] = (),
    ) -> None:
        self._config = config = config or ToolsConfig()
        self._name = name
        self._router = router
        settings = BuiltinSettings(
            isolation=isolation or Isolation(allow_unisolated=config.allow_unisolated),
            limits=config.limits,
            enable_shell=config.enable_shell,
            http_allow_domains=config.http_allow_domains,
            http_max_bytes=config.http_max_bytes,
            http_timeout_s=config.http_timeout_s,
            file_max_bytes=config.file_max_bytes,
            outbound=Outbound(config.network, own_addresses=own_addresses),
        )
        self._tools: dict[str, tuple[ToolDef, Runner]] = {}
        for definition, run in builtin_tools(settings).values():
            self.register(definition, run)
        if router is not None:
            delegation = Delegation(router, name, self._peers)
            self.register(DELEGATE, delegation.delegate)
            self.register(HANDOFF, delegation.handoff)
            memory = MemoryTools(router, name)
            self.register(NOTE, memory.note)
            self.register(READ_NOTES, memory.read_notes)
            self.register(KNOWLEDGE_SEARCH, memory.knowledge_search)
        self._executor: ThreadPoolExecutor | None = None
        self._unloaded: dict[str, str] = {}
        if mcp_factory is None and config.mcp_servers:
            # mcp (and what it brings: httpx2, starlette, ...) only where a server is configured
            from raytroupe.actors.tools.mcp_source import MCPToolSource  # noqa: PLC0415

            mcp_factory = MCPToolSource
        self._sources = [mcp_factory(spec) for spec in config.mcp_servers] if mcp_factory else []
        self._agents: list[A2AToolSource] = []
        if config.a2a_agents:
            # a2a (and its protobuf types) only where an agent is configured
            from raytroupe.actors.tools.a2a_source import A2AToolSource  # noqa: PLC0415

            self._agents = [
                A2AToolSource(
                    spec,
                    outbound=settings.outbound,
                    max_body_bytes=config.http_max_bytes,
                    max_output_bytes=config.max_output_bytes,
                )
                for spec in config.a2a_agents
            ]

    def __repr__(self) -> str:
        """What the Ray dashboard shows of it (taken once, when Ray creates the actor)."""
        parts = [", ".join(sorted(self._tools))]  # the built-ins: the rest load in on_start
        if self._config.functions:
            parts.append(f"functions {', '.join(sorted(self._config.functions))}")
        if self._agents:
            parts.append(f"A2A {', '.join(a.name for a in self._config.a2a_agents)}")
        if self._sources:
            parts.append(f"MCP {', '.join(s.name for s in self._config.mcp_servers)}")
        return f"ToolSandbox({self._name}: {'; '.join(parts)})"

    # -- lifecycle --------------------------------------------------------------------------

    async def on_start(self) -> None:
        """Import the function tools, open the state files, start the MCP servers and A2A agents."""
        config = self._config
        # threads start on first use: shipped functions may come with any job
        self._executor = executor = ThreadPoolExecutor(
            config.function_threads, thread_name_prefix="tool-function"
        )
        if config.functions:
            for tool, spec in config.functions.items():
                try:
                    self.register(*load_function_tool(tool, spec, executor))
                except ConfigError as exc:  # the other tools still serve; granting it says why
                    log.exception("function_tool_not_loaded", tool=tool, error=exc.message)
                    self._unloaded[tool] = exc.message
        if config.state_url is None:
            config.state_dir.mkdir(parents=True, exist_ok=True)
        self._store = IdempotencyStore(config.state_url or config.state_dir / "tools.sqlite")
        self._once = AtMostOnce(self._store)
        self._grants = Grants(config.state_url or config.state_dir / "grants.sqlite")
        self._shipped = ShippedTools(
            config.state_url or config.state_dir / "shipped.sqlite", executor
        )
        for source in self._sources:
            await source.start()
            for definition in await source.tools():
                self.register(definition, _mcp_runner(source, definition))
        for agent in self._agents:  # an agent whose card cannot be read yet still has its tool
            await agent.start()
            for definition in await agent.tools():
                self.register(definition, _a2a_runner(agent))

    async def on_stop(self) -> None:
        """Stop MCP servers and function workers, and close the state files."""
        await self.close()

    # -- registry -------------------------------------------------------------------------

    def register(self, definition: ToolDef, run: Runner) -> None:
        """Add (or replace) a tool.

        Raises:
            ConfigError: its parameter schema is not valid JSON Schema.
        """
        check_schema(definition.parameters, tool=definition.name)
        if definition.name in self._config.approval_required:
            definition = definition.model_copy(update={"requires_approval": True})
        self._tools[definition.name] = (definition, run)

    async def find(self, tag: str | None = None, keyword: str | None = None) -> list[ToolDef]:
        """Tools with ``tag`` and/or whose name or description mentions ``keyword``."""
        word = (keyword or "").lower()
        return [
            d
            for d, _ in self._tools.values()
            if (tag is None or tag in d.tags)
            and (not word or word in d.name.lower() or word in d.description.lower())
        ]

    async def put_functions(self, functions: Sequence[tuple[str, str, bytes]]) -> list[str]:
        """Keep a driver's shipped function tools: ``(name, digest, pickled bytes)`` each.

        Returns their names. Granting one to an agent then takes the team's digest for it
        (:meth:`grant`); see :mod:`.shipped`.

        Raises:
            ConfigError: a name is a tool the sandbox has already, the bytes are not the
                digest's, or the function cannot be loaded here.
        """
        for name, digest, payload in functions:
            if name in self._tools:
                raise ConfigError(
                    f"function tool {name!r} takes the name of a tool the sandbox has: rename it",
                    tool=name,
                )
            self._shipped.put(name, digest, payload)
        return [name for name, _, _ in functions]

    async def grant(
        self,
        agent: str,
        tools: Iterable[str],
        peers: Iterable[str] = (),
        functions: Mapping[str, str] | None = None,
    ) -> list[ToolSpec]:
        """Allow ``agent`` exactly ``tools`` (replacing its earlier grant); return their specs.

        ``peers`` are the agents it may delegate or hand off to (its team's, as
        ``TeamSpec.peers`` says); nobody else, whatever its model names. ``functions`` (the
        team's ``TeamSpec.functions``) says which shipped function each of its names is.

        Raises:
            ConfigError: a tool does not exist, or a shipped function was not shipped here.
        """
        names = list(dict.fromkeys(tools))
        functions = functions or {}
        unknown = [n for n in names if n not in self._tools and n not in functions]
        if unknown:
            why = "".join(f"; {self._unloaded[n]}" for n in unknown if n in self._unloaded)
            raise ConfigError(f"unknown tool(s) {unknown}; known: {sorted(self._tools)}{why}")
        specs, granted = [], []
        for name in names:
            if name in functions:
                if name in self._tools:
                    raise ConfigError(f"function tool {name!r} takes a sandbox tool's name")
                found = self._shipped.get(functions[name])
                if found is None:
                    raise ConfigError(
                        f"function tool {name!r} ({functions[name]}) was not shipped: a "
                        "driver ships a team's functions when it submits or registers it",
                        tool=name,
                    )
                specs.append(found[0].spec())
                granted.append(f"{name}@{functions[name]}")
            else:
                specs.append(self._tools[name][0].spec())
                granted.append(name)
        self._grants.set(agent, granted, sorted(set(peers) - {agent}))
        return specs

    # -- calls ----------------------------------------------------------------------------

    async def receive(self, data: bytes) -> bytes | None:
        """Envelope entry point (called by the router)."""
        return await serve_envelope(data, self._handle, me=self._name, accepts=(ToolCall,))

    async def _handle(self, message: AgentMessage, call: ToolCall) -> AgentMessage:
        result = await self.call(
            call, agent=message.sender, job_id=message.job_id, envelope=message
        )
        if call.tool == HANDOFF.name and result.ok and isinstance(result.data, dict):
            # the agent's loop ends with the other agent's answer: a payload of its own
            handed = Handoff(
                call_id=call.call_id,
                to_agent=str(result.data.get("agent", "")),
                output=str(result.data.get("output", "")),
            )
            return message.reply(handed, sender=self._name)
        return message.reply(result, sender=self._name)

    async def call(
        self,
        call: ToolCall,
        *,
        agent: str,
        job_id: str | None,
        envelope: AgentMessage | None = None,
    ) -> ToolResult:
        """Run one call for ``agent``; every failure is an ``ok=False`` result.

        ``envelope`` is the one the call came in; without it, a call cannot send work on to
        other agents.
        """
        start = time.perf_counter()
        try:
            definition, run = self._resolve(call.tool, agent)
            arguments = validate_arguments(call.arguments, definition.parameters, tool=call.tool)
            context = ToolContext(
                job_id,
                call.task_id,
                agent,
                scratch_dir(self._config.scratch_root, job_id),
                envelope,
            )
            if definition.requires_approval:
                await await_approval(
                    self._router, self._name, call, arguments, agent=agent, job_id=job_id
                )
            if definition.side_effects:
                key = effect_key(job_id, call.task_id, call.tool, arguments)
                result = await self._once.run(
                    key,
                    definition.name,
                    lambda: self._run(definition, run, arguments, context),
                    lease_s=definition.timeout_s * (definition.retries + 1),
                )
            else:
                result = await self._once.kept(
                    step_key(job_id, call.task_id, call.step, agent, call.tool, arguments),
                    lambda: self._run(definition, run, arguments, context),
                )
        except TroupeError as exc:
            result = _failure(exc)
        metadata = {**result.metadata, "duration_s": time.perf_counter() - start}
        log.info("tool_called", tool=call.tool, agent=agent, job_id=job_id, ok=result.ok)
        metrics.tool_call(
            call.tool if call.tool in self._tools else "unknown",  # a model may invent names
            ok=result.ok,
            seconds=metadata["duration_s"],
            code=None if result.error is None else result.error.code,
        )
        return result.model_copy(
            update={"call_id": call.call_id, "tool": call.tool, "metadata": metadata}
        )

    def _peers(self, agent: str) -> frozenset[str]:
        return self._grants.peers(agent)  # opened in on_start, after the runners were made

    def _resolve(self, tool: str, agent: str) -> tuple[ToolDef, Runner]:
        granted = self._grants.get(agent)
        shipped = next((g for g in granted if g.startswith(f"{tool}@")), None)
        if shipped is not None:  # a team's own function, by the digest its team named
            found = self._shipped.get(shipped.partition("@")[2])
            if found is None:
                raise ToolError(f"tool {tool!r} is not available", tool=tool)
            return found
        if tool not in granted:
            raise ToolNotAllowed(
                f"tool {tool!r} is not allowed for agent {agent!r}; allowed: "
                f"{sorted(g.partition('@')[0] for g in granted)}",  # names, not digests
                tool=tool,
                agent=agent,
            )
        if tool not in self._tools:
            raise ToolError(f"tool {tool!r} is not available", tool=tool)
        return self._tools[tool]

    async def _run(
        self, definition: ToolDef, run: Runner, arguments: ToolArguments, ctx: ToolContext
    ) -> ToolResult:
        attempt, timed_out = 0, False
        while True:
            attempt += 1
            try:
                data = await asyncio.wait_for(run(arguments, ctx), definition.timeout_s)
            except TimeoutError:
                timed_out = True  # a function may go on in its thread: its outcome is unknown
                error: TroupeError = ToolError(
                    f"{definition.name} timed out after {definition.timeout_s} s"
                )
            except TroupeError as exc:  # typed already (a ToolError, or a routing error)
                error = exc
            except Exception as exc:
                log.exception("tool_crashed", tool=definition.name)
                error = ToolError(f"{definition.name} failed: {type(exc).__name__}: {exc}")
            else:
                return self._checked(definition, data, attempt)
            if attempt > definition.retries or not error.retryable:
                failure = _failure(error, attempt=attempt)
                if timed_out:
                    failure = failure.model_copy(
                        update={"metadata": {**failure.metadata, "timed_out": True}}
                    )
                return failure

    def _checked(self, definition: ToolDef, data: object, attempt: int) -> ToolResult:
        if isinstance(data, ToolResult):  # an MCP or A2A source answers with a whole result
            return data.model_copy(update={"metadata": {**data.metadata, "attempt": attempt}})
        if definition.output_schema is not None:
            errors = list(safe_validator(definition.output_schema).iter_errors(data))
            if errors:
                return _failure(ToolError(f"output does not match its schema: {errors[0].message}"))
        text = json.dumps(data, default=str)
        metadata: dict[str, Any] = {"attempt": attempt, "truncated": False}
        if len(text.encode()) > self._config.max_output_bytes:
            data = text.encode()[: self._config.max_output_bytes].decode("utf-8", "ignore")
            metadata["truncated"] = True
        return ToolResult(call_id="", tool=definition.name, ok=True, data=data, metadata=metadata)

    async def close(self) -> None:
        """Stop MCP servers and function workers, and close the state files."""
        for source in self._sources:
            await source.close()
        for agent in self._agents:
            await agent.close()
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
        self._store.close()
        self._grants.close()
        self._shipped.close()


def _mcp_runner(source: MCPToolSource, definition: ToolDef) -> Runner:
    async def run(arguments: ToolArguments, _: ToolContext) -> object:
        return await source.call(definition.name, arguments, timeout_s=definition.timeout_s)

    return run


def _a2a_runner(agent: A2AToolSource) -> Runner:
    async def run(arguments: ToolArguments, _: ToolContext) -> object:
        return await agent.call(arguments)  # its own timeout, which cancels the remote task

    return run


def _failure(exc: TroupeError, *, attempt: int | None = None) -> ToolResult:
    metadata = {} if attempt is None else {"attempt": attempt}
    return ToolResult(
        call_id="", tool="", ok=False, error=ErrorPayload.from_exception(exc), metadata=metadata
    )
