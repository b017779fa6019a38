"""Chaos harness: jobs from the driver API while actors of the troupe are killed at random.

:func:`run_chaos` submits ``ChaosPlan.jobs`` jobs (a few at a time, from driver threads) and,
meanwhile, kills actors of the ``troupe`` namespace with ``ray.kill(handle, no_restart=False)``
so Ray restarts them: agents, the router, tool sandboxes, the memory store, the LLM pool, the
orchestrator. The kill schedule (intervals, kinds, targets) comes from a seeded RNG; the run
is bounded (every job has a wall-clock limit, kills stop when the jobs are done or
``max_kills`` is reached, each actor is killed at most ``max_kills_per_actor`` times so Ray's
``max_restarts`` is never exhausted). Only actors of our own namespace are ever killed.

Two kinds of job:

- ``arithmetic``: a shared team whose agents use the calculator (through a tool sandbox) and
  recall memories; the answer must hold each item's value.
- ``side_effect``: a one-agent team of its own whose scripted model calls ``journal_append``
  (side-effecting: at most one run per idempotency key), which appends a line per real run
  to a ledger file; a second run of one key is a double run.

:class:`ChaosResult` has every job's outcome, the kills, the router's accounting, the dead
letters of the run's jobs and the ledger, and :meth:`ChaosResult.violations` lists every
invariant that did not hold.
"""

from __future__ import annotations

import dataclasses
import functools
import random
import statistics
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal

import ray
from ray.exceptions import GetTimeoutError, RayActorError

from raytroupe import runtime
from raytroupe.actors.ray_handles import NAMESPACE
from raytroupe.actors.router import RouterStats
from raytroupe.protocols import ErrorCode, ToolCall
from tests.support.figures import record
from tests.support.inline import agent_name, idle_agents_kept
from tests.support.ledger import TOOL_NAME, runs_by_token

__all__ = [
    "KINDS",
    "ChaosPlan",
    "ChaosResult",
    "JobOutcome",
    "Kill",
    "RouterAccount",
    "run_chaos",
    "wait_healthy",
]

Kind = Literal["agent", "router", "sandbox", "memory", "llm", "orchestrator"]
KINDS: Final[tuple[Kind, ...]] = ("agent", "router", "sandbox", "memory", "llm", "orchestrator")
SYSTEM_ACTORS: Final = {
    "router": ("router/0",),
    "memory": ("memory",),
    "llm": ("llm/0",),
    "orchestrator": ("desk", "orchestrator/0"),
}
Status = Literal["completed", "failed_typed", "wrong_answer", "hung", "untyped_error"]


@dataclass(frozen=True)
class ChaosPlan:
    """What to run and how hard to shake it."""

    jobs: int
    seed: int
    prefix: str = "chaos"
    """Team, agent and alias names start with it (one per run, so runs do not meet)."""
    kill_interval_s: tuple[float, float] = (1.0, 2.0)
    kinds: tuple[Kind, ...] = KINDS
    must_kill: tuple[Kind, ...] = ()
    """Kinds killed first (in a seeded order), so a short run surely hits each of them."""
    max_kills: int = 50
    max_kills_per_actor: int = 3
    concurrency: int = 4
    side_effect_every: int = 4
    """Every n-th job is a ``side_effect`` job (0: none)."""
    job_timeout_s: float = 60.0
    latency_s: float = 0.3
    """Simulated model latency of the arithmetic team, so kills find work in flight."""
    agents: int = 2
    sandboxes: int = 2
    health_timeout_s: float = 90.0


@dataclass(frozen=True)
class JobOutcome:
    """One job: how it ended, its error code if it failed, submit-to-end latency."""

    index: int
    kind: Literal["arithmetic", "side_effect"]
    job_id: str | None
    status: Status
    code: str | None
    latency_s: float
    detail: str = ""
    token: str | None = None
    needed_calls: int = 0
    """Model calls the agents' final runs of a completed job's subtasks counted (replays too)."""
    billed_calls: int = 0
    """Model calls the pool billed the job's agents (its usage rows)."""
    replayed_calls: int = 0
    """Model calls answered from the pool's record (a subtask run again after a kill)."""


@dataclass(frozen=True)
class Kill:
    """One kill: when (seconds into the run), which kind, which actor."""

    at_s: float
    kind: Kind
    target: str


@dataclass(frozen=True)
class RouterAccount:
    """The router's counters at the start and, once quiet, at the end of the run.

    A killed router restarts with fresh counters: ``final`` then covers its last
    incarnation only, and ``run_delta`` is None.
    """

    baseline: RouterStats
    final: RouterStats
    router_killed: bool

    @property
    def balanced(self) -> bool:
        """Every envelope the (last) router took was delivered, dead-lettered or a duplicate."""
        s = self.final
        return s.routed == s.delivered + s.dead_lettered + s.duplicates and not s.in_flight

    @property
    def run_delta(self) -> dict[str, int] | None:
        """The run's own envelopes, when one router incarnation saw the whole run."""
        if self.router_killed:
            return None
        b, f = self.baseline, self.final
        return {
            "routed": f.routed - b.routed,
            "delivered": f.delivered - b.delivered,
            "dead_lettered": f.dead_lettered - b.dead_lettered,
            "duplicates": f.duplicates - b.duplicates,
        }


@dataclass
class ChaosResult:
    """Everything a chaos run observed."""

    plan: ChaosPlan
    outcomes: list[JobOutcome]
    kills: list[Kill]
    router: RouterAccount
    dead_letters: dict[str, int]
    """Dead letters of the run's jobs (seen by the last router incarnation), by reason."""
    untyped_dead_letters: int
    tool_runs: dict[str, int]
    """Real runs of ``journal_append`` per token (one token per side-effect job)."""
    duration_s: float
    recovered_s: float
    """From the end of the jobs until every actor answered again."""
    notes: list[str] = field(default_factory=list)

    def count(self, status: Status) -> int:
        """Jobs that ended with ``status``."""
        return sum(1 for o in self.outcomes if o.status == status)

    @property
    def kills_by_kind(self) -> dict[str, int]:
        """Kills performed, per kind (every kind of the plan listed, zeros included)."""
        counts = Counter(k.kind for k in self.kills)
        return {kind: counts.get(kind, 0) for kind in self.plan.kinds}

    @property
    def double_runs(self) -> int:
        """Idempotency keys whose side-effecting tool ran more than once."""
        return sum(1 for n in self.tool_runs.values() if n > 1)

    @property
    def repeated_calls(self) -> int:
        """Model calls billed beyond what the completed jobs' subtasks needed: made twice."""
        return sum(max(0, o.billed_calls - o.needed_calls) for o in self.outcomes)

    @property
    def failure_codes(self) -> dict[str, int]:
        """Error codes of the jobs that failed typed."""
        return dict(Counter(o.code or "?" for o in self.outcomes if o.status == "failed_typed"))

    def latency(self, quantile: float) -> float:
        """Submit-to-end latency of finished jobs (completed or failed typed), by quantile."""
        done = sorted(o.latency_s for o in self.outcomes if o.status != "hung")
        if not done:
            return float("nan")
        if len(done) == 1:
            return done[0]
        cuts = statistics.quantiles(done, n=100, method="inclusive")
        return cuts[min(98, max(0, round(quantile * 100) - 1))]

    def violations(self) -> list[str]:
        """Invariants that did not hold (empty when all did)."""
        problems = [
            f"job {o.index} ({o.kind}, {o.job_id}): {o.status} {o.code or ''} {o.detail}"
            for o in self.outcomes
            if o.status in ("hung", "wrong_answer", "untyped_error")
        ]
        if len(self.outcomes) != self.plan.jobs:
            problems.append(f"{len(self.outcomes)} outcomes for {self.plan.jobs} jobs")
        if not self.router.balanced:
            problems.append(f"router accounting does not balance: {self.router.final}")
        if self.untyped_dead_letters:
            problems.append(f"{self.untyped_dead_letters} dead letters without a typed reason")
        problems += [
            f"{TOOL_NAME} ran {n} times for {t}" for t, n in self.tool_runs.items() if n > 1
        ]
        return problems

    def record(self, suite: str = "chaos", note: str = "") -> None:
        """Write the run's figures with :func:`tests.support.figures.record`."""
        p = self.plan
        tag = f"{note}; " if note else ""
        tag += f"seed {p.seed}, {p.jobs} jobs, kills every {p.kill_interval_s} s"
        record(suite, "jobs run", len(self.outcomes), "jobs", tag)
        for status in ("completed", "failed_typed", "hung", "wrong_answer", "untyped_error"):
            record(suite, f"jobs {status}", self.count(status), "jobs", tag)
        for code, n in sorted(self.failure_codes.items()):
            record(suite, f"jobs failed with {code}", n, "jobs", tag)
        record(suite, "kills", len(self.kills), "kills", tag)
        for kind, n in self.kills_by_kind.items():
            record(suite, f"kills of {kind}", n, "kills", tag)
        final, delta = self.router.final, self.router.run_delta
        scope = "whole run" if delta is not None else "last router incarnation"
        for name, value in (delta or {}).items():
            record(suite, f"envelopes {name} (run)", value, "envelopes", tag)
        for name in ("routed", "delivered", "dead_lettered", "duplicates"):
            value = getattr(final, name)
            record(suite, f"envelopes {name} ({scope})", value, "envelopes", tag)
        record(suite, "router accounting balanced", int(self.router.balanced), "bool", tag)
        for reason, n in sorted(self.dead_letters.items()):
            record(suite, f"dead letters {reason}", n, "envelopes", f"{tag}; {scope}")
        record(suite, "side-effecting tool keys", len(self.tool_runs), "keys", tag)
        record(suite, "tool double runs", self.double_runs, "keys", tag)
        completed = [o for o in self.outcomes if o.status == "completed"]
        record(suite, "model calls needed (completed jobs)",
               sum(o.needed_calls for o in completed), "calls", tag)  # fmt: skip
        record(suite, "model calls replayed from the record",
               sum(o.replayed_calls for o in completed), "calls", tag)  # fmt: skip
        record(suite, "model calls repeated (billed - needed)", self.repeated_calls, "calls", tag)
        record(suite, "job latency p50", round(self.latency(0.5), 3), "s", tag)
        record(suite, "job latency p99", round(self.latency(0.99), 3), "s", tag)
        record(suite, "run duration", round(self.duration_s, 2), "s", tag)
        record(suite, "recovery after run", round(self.recovered_s, 2), "s", tag)


# -- the jobs -------------------------------------------------------------------------------


def _arithmetic_team(plan: ChaosPlan) -> runtime.Team:
    alias = f"{plan.prefix}-model"
    return runtime.Team(
        name=plan.prefix,
        planner_model="default",
        models={alias: runtime.OfflineModel(latency_s=plan.latency_s)},
        agents=[
            runtime.AgentSpec(name=f"{plan.prefix}-{i}", role="analyst", model=alias,
                              tools=["calculator"],
                              instructions="Use the calculator for arithmetic.")
            for i in range(plan.agents)
        ],
    )  # fmt: skip


def _arithmetic_task(index: int) -> tuple[str, list[str]]:
    a, b = 11 + index % 7, 3 + index % 5
    items = [(f"{a} * {b} + {index}", a * b + index), (f"{index + 5} + {b} * 2", index + 5 + b * 2)]
    task = "\n".join(f"- How many requests are {expr} requests?" for expr, _ in items)
    return task, [f"{expr} = {value}" for expr, value in items]


def _side_effect_team(plan: ChaosPlan, index: int, ledger: Path, token: str) -> runtime.Team:
    name = f"{plan.prefix}-fx-{index}"
    call = ToolCall(call_id=f"append-{token}", tool=TOOL_NAME,
                    arguments={"ledger": str(ledger), "token": token})  # fmt: skip
    # a retried subtask plays the next turns: the call again (replayed: same key) or the text
    turns = [
        runtime.ScriptedTurn(tool_calls=(call,)),
        runtime.ScriptedTurn(text=f"recorded {token}"),
    ]
    return runtime.Team(
        name=name,
        planner_model="default",
        models={name: runtime.ScriptedModel(turns=tuple(turns * 4))},
        agents=[
            runtime.AgentSpec(name=name, role="scribe", model=name, tools=[TOOL_NAME],
                              max_repeated_tool_calls=8, stagnation_turns=None)
        ],
    )  # fmt: skip


def _poll(call: Callable[[], Any], deadline: float) -> Any:
    """``call()`` again and again until it stops raising an actor-unavailable error."""
    pause = 0.05
    while True:
        try:
            return call()
        except (RayActorError, GetTimeoutError, runtime.TroupeError) as exc:
            unavailable = not isinstance(exc, runtime.TroupeError) or (
                exc.code in (ErrorCode.RECIPIENT_UNAVAILABLE, ErrorCode.DELIVERY)
            )
            if not unavailable or time.monotonic() + pause > deadline:
                raise
        time.sleep(pause)  # bounded back-off while an actor restarts (polling, deadline above)
        pause = min(pause * 2, 0.5)


def _run_job(  # noqa: PLR0917 - one call site, a pool.submit
    rt: runtime.Runtime,
    plan: ChaosPlan,
    index: int,
    team: runtime.Team,
    ledger: Path,
    submitted: list[str],
) -> JobOutcome:
    side_effect = plan.side_effect_every > 0 and index % plan.side_effect_every == 1
    start = time.monotonic()
    deadline = start + plan.job_timeout_s
    token = f"{plan.prefix}-{plan.seed}-{index}" if side_effect else None
    if token is not None:
        task, expected = f"Record entry {token}.", [f"recorded {token}"]
        team = _side_effect_team(plan, index, ledger, token)
        submitted.append(agent_name(team.agents[0].name))
    else:
        task, expected = _arithmetic_task(index)
    kind: Literal["arithmetic", "side_effect"] = "side_effect" if side_effect else "arithmetic"

    def outcome(status: Status, job_id: str | None, code: str | None, detail: str) -> JobOutcome:
        latency = time.monotonic() - start
        return JobOutcome(index, kind, job_id, status, code, latency, detail[:300], token)

    job_id = None
    try:
        job = _poll(lambda: rt.submit(task, team=team), deadline)
        job_id = job.job_id
        result = job.result(timeout=max(1.0, deadline - time.monotonic()))
    except runtime.JobTimeout as exc:
        return outcome("hung", job_id, exc.code.value, str(exc))
    except runtime.JobFailed as exc:
        failed = exc.detail.get("result")
        error = getattr(failed, "error", None)
        code = error.code.value if error is not None else exc.code.value
        causes = sorted(
            {s.error.code.value for s in getattr(failed, "subtasks", ()) if s.error is not None}
        )  # why the subtasks failed: the code that says which kill it was
        return outcome("failed_typed", job_id, "/".join([code, *causes]), str(exc))
    except runtime.TroupeError as exc:
        return outcome("failed_typed", job_id, exc.code.value, str(exc))
    except Exception as exc:  # noqa: BLE001 - an untyped error is a finding, not a crash
        return outcome("untyped_error", job_id, type(exc).__name__, repr(exc))
    missing = [e for e in expected if e not in result.answer]
    if missing:
        return outcome("wrong_answer", job_id, None, f"missing {missing} in {result.answer!r}")
    agents = {a.name for a in team.agents}
    rows = _poll(lambda: rt.usage(result.job_id), time.monotonic() + plan.job_timeout_s)
    models = [s for s in result.trace if s.kind == "model_call"]
    return dataclasses.replace(
        outcome("completed", job_id, None, ""),
        needed_calls=sum(s.usage.calls for s in result.subtasks),
        billed_calls=sum(r.calls for r in rows if r.agent in agents),
        replayed_calls=sum(bool(s.attributes.get("replayed")) for s in models),
    )


# -- the kills ------------------------------------------------------------------------------


class _Killer:
    """Kills actors on a seeded schedule until stopped, or ``max_kills`` are done."""

    def __init__(self, plan: ChaosPlan, agents: Callable[[], Sequence[str]]) -> None:
        self._plan = plan
        self._rng = random.Random(plan.seed)  # noqa: S311 - a reproducible schedule
        self._agents = agents
        self._stop = threading.Event()
        self._per_actor: Counter[str] = Counter()
        self.kills: list[Kill] = []
        self.errors: list[str] = []
        first = list(plan.must_kill)
        self._rng.shuffle(first)
        self._first = first
        self._started = time.monotonic()
        self._thread = threading.Thread(target=self._loop, name="chaos-killer", daemon=True)

    def start(self) -> None:
        self._started = time.monotonic()
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def _targets(self, kind: Kind) -> list[str]:
        if kind == "agent":
            names = [f"agent/{a}" for a in self._agents()]
        elif kind == "sandbox":
            names = [f"tools/{n}" for n in range(self._plan.sandboxes)]
        elif kind in ("router", "orchestrator"):  # every shard
            named = ray.util.list_named_actors(all_namespaces=True)
            names = sorted(
                a["name"]
                for a in named
                if a["namespace"] == NAMESPACE and a["name"].startswith(f"{kind}/")
            ) + (["desk"] if kind == "orchestrator" else [])  # the desk admits the jobs
        else:
            names = list(SYSTEM_ACTORS[kind])
        return [n for n in names if self._per_actor[n] < self._plan.max_kills_per_actor]

    def _loop(self) -> None:
        low, high = self._plan.kill_interval_s
        while len(self.kills) < self._plan.max_kills:
            if self._stop.wait(self._rng.uniform(low, high)):  # the schedule, not a sync
                return
            kind = self._first.pop(0) if self._first else self._rng.choice(self._plan.kinds)
            targets = self._targets(kind)
            if not targets:
                continue
            target = self._rng.choice(sorted(targets))
            try:
                handle = ray.get_actor(target, namespace=NAMESPACE)  # ours: namespace troupe
                ray.kill(handle, no_restart=False)
            except Exception as exc:  # noqa: BLE001 - not spawned yet or gone: no kill
                self.errors.append(f"{target}: {exc!r}")
                continue
            self._per_actor[target] += 1
            self.kills.append(Kill(time.monotonic() - self._started, kind, target))


# -- health ---------------------------------------------------------------------------------


def wait_healthy(
    rt: runtime.Runtime, agents: Sequence[str], sandboxes: int, timeout_s: float = 90.0
) -> float:
    """Wait until every system actor and ``agents`` answer and the router knows them all.

    Returns the seconds it took. Raises ``AssertionError`` naming what is missing at the end.
    """
    start = time.monotonic()
    deadline = start + timeout_s

    def get(name: str, method: str, *args: Any) -> Any:
        handle = ray.get_actor(name, namespace=NAMESPACE)
        return ray.get(getattr(handle, method).remote(*args), timeout=10)

    probes: list[tuple[str, str, tuple[Any, ...]]] = [
        ("router/0", "stats", ()),
        ("desk", "policies", ()),
        ("orchestrator/0", "jobs", ()),
        ("llm/0", "unservable", ()),
        ("memory", "count", ("default",)),
        *((f"tools/{n}", "find", ()) for n in range(sandboxes)),
        *((f"agent/{a}", "registration", ()) for a in agents),
    ]
    for name, method, args in probes:
        _poll(functools.partial(get, name, method, *args), deadline)
    expected = {"llm-0", "orchestrator", "memory", *(f"tools-{n}" for n in range(sandboxes))}
    expected |= set(agents)
    while True:
        registered = set(_poll(rt.router_stats, deadline).registered)
        missing = expected - registered
        if not missing:
            return time.monotonic() - start
        if time.monotonic() > deadline:
            raise AssertionError(f"the router does not know {sorted(missing)}")
        time.sleep(0.1)  # polling the router's registry, bounded by the deadline


def _quiet_router(rt: runtime.Runtime, timeout_s: float) -> RouterStats:
    """The router's stats once nothing is in flight and the counters balance (or time is up)."""
    deadline = time.monotonic() + timeout_s
    while True:
        stats: RouterStats = _poll(rt.router_stats, deadline)
        quiet = not stats.in_flight
        if quiet and stats.routed == stats.delivered + stats.dead_lettered + stats.duplicates:
            return stats
        if time.monotonic() > deadline:
            return stats
        time.sleep(0.1)  # polling until in-flight envelopes settle, bounded by the deadline


# -- the run --------------------------------------------------------------------------------


def run_chaos(rt: runtime.Runtime, plan: ChaosPlan, scratch: Path) -> ChaosResult:
    """Run ``plan`` against the troupe behind ``rt``; return what happened (see module doc).

    The agents are looked up by name after the run: the session's idle stop must not come
    first (it did, once, in a 40-job run).
    """
    with idle_agents_kept(rt):
        return _run_chaos(rt, plan, scratch)


def _run_chaos(rt: runtime.Runtime, plan: ChaosPlan, scratch: Path) -> ChaosResult:
    ledger = scratch / f"{plan.prefix}-ledger.txt"
    team = _arithmetic_team(plan)
    shared = [agent_name(a.name) for a in team.agents]  # the driver's inline agents' names
    side_agents: list[str] = []
    start = time.monotonic()
    # the team's agents exist before the first kill, so an agent kill has a target
    warm = rt.submit(_arithmetic_task(1000)[0], team=team).result(timeout=plan.job_timeout_s)
    assert warm.status == "succeeded", warm.error
    baseline = rt.router_stats()

    killer = _Killer(plan, lambda: shared + list(side_agents))
    killer.start()
    try:
        with ThreadPoolExecutor(max_workers=plan.concurrency, thread_name_prefix="chaos") as pool:
            futures = [
                pool.submit(_run_job, rt, plan, i, team, ledger, side_agents)
                for i in range(plan.jobs)
            ]
            outcomes = [f.result() for f in futures]
    finally:
        killer.stop()
    jobs_done = time.monotonic()
    recovered = wait_healthy(rt, shared + side_agents, plan.sandboxes, plan.health_timeout_s)
    final = _quiet_router(rt, timeout_s=30.0)
    router_killed = any(k.kind == "router" for k in killer.kills)
    job_ids = {o.job_id for o in outcomes if o.job_id}
    letters = [
        d
        for d in rt.dead_letters(limit=10_000)
        if d.message is not None and d.message.job_id in job_ids
    ]
    reasons = Counter(d.reason.value for d in letters if isinstance(d.reason, ErrorCode))
    untyped = sum(1 for d in letters if not isinstance(d.reason, ErrorCode) or not d.detail)
    tokens = {o.token for o in outcomes if o.token}
    runs = runs_by_token(ledger)
    result = ChaosResult(
        plan=plan,
        outcomes=outcomes,
        kills=killer.kills,
        router=RouterAccount(baseline, final, router_killed),
        dead_letters=dict(reasons),
        untyped_dead_letters=untyped,
        tool_runs={t: runs.get(t, 0) for t in sorted(tokens)},
        duration_s=jobs_done - start,
        recovered_s=recovered,
        notes=killer.errors,
    )
    _retire(rt, side_agents)
    return result


def _retire(rt: runtime.Runtime, agents: Sequence[str]) -> None:
    """Stop the one-job agents of side-effect jobs (ours, by name) and forget them."""
    shards = rt.client.handles.routers.handles
    for name in agents:
        ray.get([shard.unregister.remote(name) for shard in shards], timeout=30)
        try:
            ray.kill(ray.get_actor(f"agent/{name}", namespace=NAMESPACE), no_restart=True)
        except ValueError:
            continue
