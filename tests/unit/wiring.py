"""In-process wiring of the plain actor classes, for unit tests without Ray.

``build_troupe`` puts a ``MessageRouter``, an ``LLMAdapterPool`` (registered as ``llm``) and an
``Orchestrator`` in one event loop; an :class:`InProcessProvisioner` constructs ``AgentActor``
objects for a team and registers them with the router, as the Ray provisioner does with actors.
``Echo``, ``Gated``, ``Raising``, ``Tap`` and ``FlakyMailbox`` are mailboxes for router tests.
"""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel

from raytroupe.actors import (
    AgentActor,
    FrontDesk,
    LLMAdapterPool,
    LocalRouterClient,
    Mailbox,
    MessageRouter,
    Orchestrator,
    serve_envelope,
)
from raytroupe.actors.endpoint import RouterClient
from raytroupe.actors.lifecycle import Lifecycle
from raytroupe.actors.memory.config import MemoryConfig
from raytroupe.actors.memory.store import MemoryStore
from raytroupe.actors.orchestrator.journal import Journal
from raytroupe.actors.orchestrator.shards import Admitted, TeamProvisioner
from raytroupe.actors.tools.sandbox import ToolSandbox, ToolsConfig
from raytroupe.protocols import (
    AgentMessage,
    ChatMessage,
    Event,
    JobResult,
    JobsQuery,
    JobSummary,
    LLMRequest,
    ModelSpec,
    Payload,
    RecipientUnavailable,
    TeamSpec,
    TenantPolicy,
    ToolSpec,
    decode,
    job_shard,
    team_role,
)
from raytroupe.protocols.job_order import JobOrder, Submitter

__all__ = [
    "GUARD_S",
    "Echo",
    "FlakyMailbox",
    "Gated",
    "GatedPool",
    "InProcessProvisioner",
    "LocalDesk",
    "LocalShards",
    "Raising",
    "Tap",
    "Troupe",
    "ask",
    "build_troupe",
    "control_plane",
    "envelope",
    "in_process_memory",
    "in_process_sandbox",
    "llm_request",
    "ping",
    "run",
]

T = TypeVar("T")

Wrap = Callable[[str, AgentActor], Mailbox]

GUARD_S = 10.0
"""Bounds a broken (hanging) test; nothing waits for it to pass."""


def run(coro: Coroutine[Any, Any, T], guard_s: float = GUARD_S) -> T:
    """Run ``coro`` in a fresh event loop, failing it after ``guard_s`` seconds."""
    return asyncio.run(asyncio.wait_for(coro, guard_s))


async def ask(router: MessageRouter, message: AgentMessage) -> AgentMessage:
    """Request through ``router`` as an actor would, and decode the reply."""
    return await LocalRouterClient(router).request(message)


def envelope(
    payload: Payload, recipient: str = "llm", *, sender: str = "driver", **fields: object
) -> AgentMessage:
    """An envelope from the driver to ``recipient``."""
    return AgentMessage.model_validate(
        {"sender": sender, "recipient": recipient, "payload": payload, **fields}
    )


def llm_request(
    *turns: ChatMessage | str,
    purpose: str = "work",
    model: str = "default",
    tools: tuple[ToolSpec, ...] = (),
    **fields: object,
) -> LLMRequest:
    """A request whose plain-string turns are user messages."""
    messages = tuple(
        t if isinstance(t, ChatMessage) else ChatMessage(role="user", content=t) for t in turns
    )
    return LLMRequest.model_validate(
        {"model": model, "messages": messages, "tools": tools, "purpose": purpose, **fields}
    )


def ping(recipient: str, **fields: object) -> AgentMessage:
    """An event envelope from the driver to ``recipient``."""
    return AgentMessage.model_validate(
        {"sender": "driver", "recipient": recipient, "payload": Event(name="ping"), **fields}
    )


class Echo:
    """Replies with an event naming itself and the hops it saw."""

    def __init__(self, name: str, *, reply: bool = True) -> None:
        self.name = name
        self.reply = reply
        self.seen: list[AgentMessage] = []
        self.arrived = asyncio.Event()

    async def receive(self, data: bytes) -> bytes | None:
        return await serve_envelope(data, self._handle, me=self.name, accepts=(BaseModel,))

    async def _handle(self, message: AgentMessage, _payload: object) -> AgentMessage | None:
        self.seen.append(message)
        self.arrived.set()
        if not self.reply:
            return None
        return message.reply(Event(name="pong", data={"by": self.name, "hops": message.hops}))


class Gated(Echo):
    """An echo that holds every delivery until ``gate`` opens."""

    def __init__(
        self, name: str, gate: asyncio.Event, on_arrival: Callable[[], None] | None = None
    ) -> None:
        super().__init__(name)
        self.gate = gate
        self.on_arrival = on_arrival or (lambda: None)

    async def _handle(self, message: AgentMessage, _payload: object) -> AgentMessage | None:
        self.seen.append(message)
        self.arrived.set()
        self.on_arrival()
        await self.gate.wait()
        return message.reply(Event(name="pong", data={"by": self.name}))


class Raising:
    def __init__(self, exc: Exception) -> None:
        self.exc = exc

    async def receive(self, _data: bytes) -> bytes | None:
        raise self.exc


class Tap:
    """A mailbox that records every envelope it receives, then hands it on."""

    def __init__(self, inner: Mailbox) -> None:
        self.inner = inner
        self.seen: list[AgentMessage] = []

    async def receive(self, data: bytes, /) -> bytes | None:
        self.seen.append(decode(data))
        return await self.inner.receive(data)

    def payloads(self, kind: type) -> list:
        return [m.payload for m in self.seen if isinstance(m.payload, kind)]


class GatedPool:
    """The LLM pool behind a gate for 'work' calls: lets ``allowed`` through, then holds."""

    def __init__(self, pool: Mailbox, allowed: int) -> None:
        self.pool = pool
        self.allowed = allowed
        self.work: list[str] = []
        self.gate = asyncio.Event()
        self.held = asyncio.Event()

    async def receive(self, data: bytes, /) -> bytes | None:
        message = decode(data)
        if isinstance(message.payload, LLMRequest) and message.payload.purpose == "work":
            self.work.append(message.payload.messages[1].text.splitlines()[0])
            if len(self.work) > self.allowed:
                self.held.set()
                await self.gate.wait()
        return await self.pool.receive(data)


class FlakyMailbox:
    """A mailbox whose first ``failures`` deliveries fail as if the actor had died, and the
    ``restarting`` after them as Ray answers while it restarts the actor."""

    def __init__(self, inner: Mailbox, failures: int = 1, restarting: int = 0) -> None:
        self.inner = inner
        self.failures = failures
        self.restarting = restarting
        self.calls = 0

    async def receive(self, data: bytes, /) -> bytes | None:
        self.calls += 1
        if self.calls <= self.failures:
            raise RecipientUnavailable("actor died (simulated)")
        if self.calls <= self.failures + self.restarting:
            raise RecipientUnavailable("actor is restarting (simulated)", restarting=True)
        return await self.inner.receive(data)


A = TypeVar("A", bound=Lifecycle)


async def started(actor: A) -> A:
    """``actor`` once its ``on_start`` has run (what the Ray glue does at spawn)."""
    await actor.on_start()
    return actor


def started_now(actor: A) -> A:
    """The same, for a test without an event loop of its own (one runs just for the start)."""
    asyncio.run(actor.on_start())
    return actor


async def in_process_sandbox(
    router: LocalRouterClient | None = None, root: Path | None = None
) -> ToolSandbox:
    """A started tool sandbox keeping its state and scratch in ``root`` (default: a fresh
    temporary directory)."""
    root = root or Path(tempfile.mkdtemp(prefix="troupe-unit-"))
    config = ToolsConfig(state_dir=root / "state", scratch_root=root / "scratch")
    return await started(ToolSandbox(config, router=router))


async def in_process_memory(router: LocalRouterClient | None = None) -> MemoryStore:
    """A started memory store with the hashing embedding, in a fresh temporary directory."""
    root = Path(tempfile.mkdtemp(prefix="troupe-memory-"))
    return await started(MemoryStore(MemoryConfig(path=root, embedding="hashing")))


class InProcessProvisioner:
    """A ``TeamProvisioner`` that builds ``AgentActor`` objects in this process.

    ``wrap(name, agent)`` chooses the mailbox registered for an agent (the agent itself by
    default); every agent's registered mailbox is kept in ``mailboxes``.
    """

    def __init__(
        self,
        router: MessageRouter,
        pool: LLMAdapterPool,
        client: LocalRouterClient,
        wrap: Wrap | None = None,
        sandbox: ToolSandbox | None = None,
    ) -> None:
        self.router = router
        self.pool = pool
        self.sandbox = sandbox  # a started one is made on the first provision when not given
        self.client = client
        self.wrap: Wrap = wrap or (lambda _name, agent: agent)
        self.agents: dict[str, AgentActor] = {}
        self.mailboxes: dict[str, Mailbox] = {}
        self.provisioned = 0
        self.retired: list[str] = []

    async def provision(self, team: TeamSpec) -> None:
        if team.models:
            await self.pool.configure(team.models)
        if self.sandbox is None:
            self.sandbox = await in_process_sandbox(self.client)
        for spec in team.agents:
            tools = await self.sandbox.grant(spec.name, spec.tools, team.peers(spec.name))
            agent = self.agents.get(spec.name)
            if agent is None:
                agent = AgentActor(spec, self.client, tools)
                self.agents[spec.name] = await started(agent)
            else:
                await agent.configure(spec, tools)
            if spec.name not in self.mailboxes:
                self.mailboxes[spec.name] = self.wrap(spec.name, agent)
            await self.router.register(
                spec.name, self.mailboxes[spec.name], [team_role(team.name, spec.role)]
            )
        self.provisioned += 1

    async def tool_names(self) -> set[str]:
        if self.sandbox is None:
            self.sandbox = await in_process_sandbox(self.client)
        return {d.name for d in await self.sandbox.find()}

    async def retire(self, agents) -> None:
        for name in agents:
            await self.router.unregister(name)
            self.agents.pop(name, None)
            self.mailboxes.pop(name, None)
            self.retired.append(name)


class LocalShards:
    """The job shards of one process, as the desk and each shard reach them (``Shards``).

    ``calls`` records each call made through it: ``(method, shard)``.
    """

    def __init__(self, count: int = 1) -> None:
        self.count = count
        self.shards: list[Orchestrator] = []
        self.calls: list[tuple[str, int]] = []

    def __len__(self) -> int:
        return self.count

    def of(self, job_id: str, method: str) -> Orchestrator:
        shard = job_shard(job_id, self.count)
        self.calls.append((method, shard))
        return self.shards[shard]

    async def adopt(self, job: Admitted) -> None:
        await self.of(job.id, "adopt").adopt(job)

    async def wait(
        self, job_id: str, timeout: float | None, *, tenant: str | None = None
    ) -> JobResult | None:
        return await self.of(job_id, "wait").wait(job_id, timeout, tenant=tenant)

    async def cancel(self, job_id: str) -> bool:
        return await self.of(job_id, "cancel").cancel(job_id)

    async def running_teams(self) -> set[str]:
        self.calls += [("running_teams", k) for k in range(self.count)]
        return set().union(*[await shard.running_teams() for shard in self.shards])

    async def summaries(self, tenant: str | None, query: JobsQuery) -> list[JobSummary]:
        self.calls += [("summaries", k) for k in range(self.count)]
        found = [line for shard in self.shards for line in await shard.summaries(tenant, query)]
        return sorted(found, key=lambda line: -line.submitted_at)[: query.limit]


class LocalDesk:
    """The front desk of one process, as a shard reaches it (``Desk``); bound once made."""

    def __init__(self) -> None:
        self.desk: FrontDesk | None = None

    def _bound(self) -> FrontDesk:
        assert self.desk is not None, "the desk is made after its shards"
        return self.desk

    async def submit(self, order: JobOrder, submitter: Submitter) -> str:
        return await self._bound().submit(order, submitter)

    async def team(self, name: str) -> TeamSpec:
        return await self._bound().team(name)

    async def policies(self) -> dict[str, TenantPolicy]:
        return await self._bound().policies()

    async def use_inline(self, tenant: str, team: TeamSpec, *, refuse: bool = True) -> None:
        await self._bound().use_inline(tenant, team, refuse=refuse)


async def control_plane(
    router: RouterClient,
    provisioner: TeamProvisioner,
    *,
    shards: int | LocalShards = 1,
    journal: Path | str | Journal | None = None,
    **options: Any,
) -> tuple[FrontDesk, list[Orchestrator]]:
    """A started front desk and ``shards`` started job shards, wired to each other.

    ``options`` go to each shard (``max_attempts``, ``max_running``, ``keep_jobs``) or, for
    ``skills``, to the desk. With a ``journal`` path, desk and shards share one file, as
    they share the journal's database under Ray. ``shards`` may be a ``LocalShards`` to
    fill (to read its ``calls`` afterwards).
    """
    skills = options.pop("skills", None)
    local_shards = shards if isinstance(shards, LocalShards) else LocalShards(shards)
    local_desk = LocalDesk()
    local_shards.shards = [
        Orchestrator(
            router, provisioner, local_desk, local_shards, journal=journal, shard=k, **options
        )
        for k in range(local_shards.count)
    ]
    desk = FrontDesk(router, provisioner, local_shards, journal=journal, skills=skills)
    local_desk.desk = desk
    await desk.on_start()
    for shard in local_shards.shards:
        await shard.on_start()
    return desk, local_shards.shards


@dataclass
class Troupe:
    """Everything ``build_troupe`` wired together."""

    router: MessageRouter
    client: LocalRouterClient
    pool: LLMAdapterPool
    llm: Tap
    provisioner: InProcessProvisioner
    desk: FrontDesk
    orchestrator: Orchestrator
    memory: MemoryStore
    results: list[JobResult] = field(default_factory=list)

    async def run(self, task: str, team: TeamSpec, timeout: float = 10.0) -> JobResult:
        """Submit ``task`` and wait for its result (failing the test if it never comes)."""
        job_id = await self.desk.submit(JobOrder(task=task, team=team))
        result = await self.orchestrator.wait(job_id, timeout)
        assert result is not None, f"job {job_id} did not finish within {timeout} s"
        self.results.append(result)
        return result


async def gated_system(journal: Journal, pool: GatedPool) -> tuple[FrontDesk, Orchestrator]:
    """A desk and one job shard on ``journal``, their agents' model calls through ``pool``."""
    router = MessageRouter()
    client = LocalRouterClient(router)
    await router.register("llm-0", pool, ["llm"])
    provisioner = InProcessProvisioner(
        router, pool.pool, client, sandbox=await in_process_sandbox()
    )
    await router.register("tools-0", provisioner.sandbox, ["tools"])
    desk, (orchestrator,) = await control_plane(client, provisioner, journal=journal)
    return desk, orchestrator


def order(
    task: str = "", team: TeamSpec | str | None = None, **fields: Any
) -> tuple[JobOrder, Submitter]:
    """A job order and who submits it, from ``submit``'s old keywords, for a test's brevity.

    ``tenant``, ``admin``, ``by``, ``request_id``, ``traceparent`` and ``account`` go to the
    submitter (default: an admin's, of tenant ``default``), the rest to the order.
    """
    said = {k: fields.pop(k) for k in list(fields) if k in Submitter.model_fields}
    return JobOrder(task=task, team=team, **fields), Submitter(**said)


async def build_troupe(
    models: Mapping[str, ModelSpec] | None = None,
    *,
    wrap: Wrap | None = None,
    max_attempts: int = 3,
    pool: LLMAdapterPool | None = None,
    tools_root: Path | None = None,
    journal: Path | str | None = None,
) -> Troupe:
    """Router, LLM pool (behind a ``Tap``, as ``llm``), provisioner, desk and one job shard.

    The tool sandbox keeps its state and scratch in ``tools_root`` (default: a fresh
    temporary directory). With a ``journal`` (a file), the shard resumes the jobs it
    holds, as a restarted one does.
    """
    router = await started(MessageRouter())
    client = LocalRouterClient(router)
    pool = pool or await started(LLMAdapterPool(models))
    llm = Tap(pool)
    await router.register("llm-0", llm, ["llm"])
    provisioner = InProcessProvisioner(router, pool, client, wrap)
    provisioner.sandbox = await in_process_sandbox(client, tools_root)
    await router.register("tools-0", provisioner.sandbox, ["tools"])
    memory = await in_process_memory(client)
    await router.register("memory", memory)
    desk, (orchestrator,) = await control_plane(
        client, provisioner, max_attempts=max_attempts, journal=journal
    )
    await router.register("orchestrator", orchestrator)
    return Troupe(router, client, pool, llm, provisioner, desk, orchestrator, memory)
