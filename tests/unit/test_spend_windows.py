"""Spend windows (Issue 47): limits per tenant or agent over a day, a month, rolling hours or
ever; hard limits refuse before the call, alert thresholds fire once per window. And agents'
call rates, paced per agent.

The ledger's windows on both stores (SQLite, a real PostgreSQL) and without one; the gateway
and the pool with fake providers and a fake wall clock. The job event and the webhook are
tested on a real Ray in ``tests/integration/test_spend_windows_ray.py``.
"""

from __future__ import annotations

import asyncio
import calendar
import itertools
import threading

import pytest
from llm_fakes import FakeProvider
from pydantic import ValidationError
from wiring import build_troupe, llm_request, order, run

from raytroupe.actors.llm import LLMAdapterPool
from raytroupe.actors.llm.alerts import AlertSender
from raytroupe.actors.llm.budget import Ledger, Reservation, WindowAccount
from raytroupe.actors.llm.config import LLMConfig
from raytroupe.actors.llm.gateway import CallContext, RetryPolicy
from raytroupe.actors.llm.rates import AgentRates
from raytroupe.actors.llm.set_limits import SetLimits
from raytroupe.actors.llm.state import PoolState
from raytroupe.actors.llm.windows import SpendWindows
from raytroupe.protocols import (
    AgentMessage,
    AgentSpec,
    Budget,
    BudgetExceeded,
    Conflict,
    OfflineModel,
    SpendLimitNotFound,
    TeamSpec,
    Usage,
    orchestrator_address,
)
from raytroupe.protocols.policy import scoped_name
from raytroupe.protocols.spend import AgentRateLimit, SpendAlert, SpendLimit, window_id

DAY_1 = calendar.timegm((2026, 12, 7, 23, 30, 0))
"""23:30 UTC: half an hour before the next day's window."""
DAY_2 = DAY_1 + 3600


class Wall:
    """A wall clock the test moves."""

    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


# -- what a limit is --------------------------------------------------------------------------


def test_a_limit_needs_a_measure_and_hours_only_on_a_rolling_window():
    with pytest.raises(ValidationError, match="needs tokens, usd or both"):
        SpendLimit(tenant="acme")
    with pytest.raises(ValidationError, match="rolling window"):
        SpendLimit(tenant="acme", usd=1.0, window="rolling")
    with pytest.raises(ValidationError, match="rolling window"):
        SpendLimit(tenant="acme", usd=1.0, window="day", hours=3)
    with pytest.raises(ValidationError):
        SpendLimit(tenant="acme", usd=1.0, alert_at=(0.0,))  # a fraction in (0, 1]
    with pytest.raises(ValidationError):
        SpendLimit(tenant="acme", usd=-1.0)


def test_each_window_names_its_period_in_utc():
    assert window_id(SpendLimit(tenant="t", usd=1, window="day"), DAY_1) == "d2026-12-07"
    assert window_id(SpendLimit(tenant="t", usd=1, window="day"), DAY_2) == "d2026-12-08"
    assert window_id(SpendLimit(tenant="t", usd=1, window="month"), DAY_2) == "m2026-12"
    assert window_id(SpendLimit(tenant="t", usd=1, window="lifetime"), DAY_2) == "life"
    rolling = SpendLimit(tenant="t", usd=1, window="rolling", hours=3)
    assert window_id(rolling, DAY_1) == f"h{int(DAY_1 // 3600)}"


def test_windows_bind_their_tenant_and_an_agent_limit_only_that_agent():
    windows = SpendWindows(
        {
            "acme-day": SpendLimit(tenant="acme", tokens=100),
            "acme-writer": SpendLimit(tenant="acme", agent="writer", tokens=10, window="month"),
            "soft": SpendLimit(tenant="acme", tokens=5, hard=False),
        },
        Wall(DAY_1),
    )
    keys = {w.key: w.limit for _, _, w in windows.accounts("acme", "writer")}
    assert keys == {
        "spend:acme-day@d2026-12-07": Budget(tokens=100),
        "spend:acme-writer@m2026-12": Budget(tokens=10),
        "spend:soft@d2026-12-07": None,  # alerts only: counted, never refused
    }
    assert [w.key for _, _, w in windows.accounts("acme", "reader")] == [
        "spend:acme-day@d2026-12-07",
        "spend:soft@d2026-12-07",
    ]
    assert windows.accounts("other", "writer") == []
    # an inline team's agent runs under its tenant's scope: the limit names it as written
    inline = windows.accounts("acme", scoped_name("acme", "writer"))
    assert [w.key for _, _, w in inline][1] == "spend:acme-writer@m2026-12"
    assert len(windows.accounts("acme", scoped_name("other", "writer"))) == 2  # not acme's


def test_an_each_user_limit_keeps_an_account_per_user_and_skips_calls_without_one():
    windows = SpendWindows(
        {"per-user": SpendLimit(tenant="acme", each_user=True, tokens=10, alert_at=(0.5,))},
        Wall(DAY_1),
    )
    assert windows.accounts("acme", "writer") == []  # a job without a user
    (bob,) = windows.accounts("acme", "writer", "bob@acme.example")
    assert bob[2].key == "spend:per-user/bob@acme.example@d2026-12-07"
    # a user id that looks like a window is another account, never bob's
    (odd,) = windows.accounts("acme", "writer", "bob@acme.example@d2026-12-07")
    assert odd[2].key != bob[2].key
    assert windows.accounts("other", "writer", "bob@acme.example") == []
    ledger = Ledger()
    ledger.settle(ledger.reserve((), 6, 0.0, windows=[bob[2]]), Usage(prompt_tokens=6))
    (alert,) = SpendWindows.crossed(ledger, [bob])
    assert (alert.user, alert.window, alert.spent) == ("bob@acme.example", "d2026-12-07", 6)
    assert SpendWindows.crossed(ledger, [odd]) == []  # its own account spent nothing


# -- the ledger's windows, on each store ------------------------------------------------------


def _ledgers(state_at, keep):
    """Two ledgers sharing one store (two pool replicas), and one without a store."""
    location = state_at("llm")
    shared = [Ledger(store=keep(PoolState(location, replica=f"llm-{n}"))) for n in range(2)]
    return [*shared, Ledger()]


def test_a_day_window_refuses_past_its_limit_and_the_next_day_starts_afresh(state_at, keep):
    zero, one, alone = _ledgers(state_at, keep)
    for ledgers in ((zero, one), (alone, alone)):
        day = WindowAccount("spend:d@d2026-12-07", Budget(tokens=100))
        first = ledgers[0].reserve(("tenant:t",), 60, 0.0, windows=[day])
        ledgers[0].settle(first, Usage(prompt_tokens=50))
        with pytest.raises(BudgetExceeded) as caught:  # 50 spent + 60 > 100, on either replica
            ledgers[1].reserve(("tenant:t",), 60, 0.0, windows=[day])
        assert caught.value.detail["account"] == "spend:d@d2026-12-07"
        assert ledgers[1].held("tenant:t").tokens == 0  # refused: nothing held anywhere
        next_day = WindowAccount("spend:d@d2026-12-08", Budget(tokens=100))
        ledgers[1].reserve(("tenant:t",), 60, 0.0, windows=[next_day])


def test_a_rolling_window_counts_its_earlier_hours_and_forgets_older_ones(state_at, keep):
    zero, one, alone = _ledgers(state_at, keep)
    for ledgers in ((zero, one), (alone, alone)):
        limit = Budget(tokens=100)

        def hour(h, _limit=limit):
            earlier = tuple(f"spend:r@h{e}" for e in range(h - 2, h))  # a 3-hour window
            return WindowAccount(f"spend:r@h{h}", _limit, earlier)

        for h in (10, 11):  # 40 in hour 10, 40 in hour 11
            ledgers[h % 2].settle(
                ledgers[h % 2].reserve(("tenant:t",), 40, 0.0, windows=[hour(h)]),
                Usage(prompt_tokens=40),
            )
        held = ledgers[0].reserve(("tenant:t",), 20, 0.0, windows=[hour(12)])  # 100: fits
        with pytest.raises(BudgetExceeded) as caught:  # 80 spent + 20 held + 1 > 100
            ledgers[1].reserve(("tenant:t",), 1, 0.0, windows=[hour(12)])
        assert "spend:r@h12 token budget: 80 spent + 20 held + 1 needed > 100" in str(caught.value)
        ledgers[0].settle(held, None)  # failed: cost nothing
        # hour 13's window is hours 11-13: hour 10's 40 have left it
        ledgers[1].reserve(("tenant:t",), 60, 0.0, windows=[hour(13)])


def test_a_rolling_limit_holds_however_many_replicas_reserve_at_once(state_at, keep):
    """8 replicas race for a 3-hour window whose earlier hours spent 600 of 1,000 tokens."""
    location = state_at("llm")
    replicas = [keep(PoolState(location, replica=f"llm-{n}")) for n in range(8)]
    past = Reservation(id="past", keys=("spend:r@h9",), tokens=600, usd=0.0)
    replicas[0].hold(past)
    replicas[0].settle(past, tokens=600, usd=0.0)
    limits = {"spend:r@h11": Budget(tokens=1000), "tenant:t": None}
    earlier = {"spend:r@h11": ("spend:r@h9", "spend:r@h10")}
    start = threading.Barrier(len(replicas))
    taken: list[int] = []

    def race(n: int) -> None:
        start.wait()
        for i in range(100):
            call = Reservation(id=f"{n}-{i}", keys=("spend:r@h11", "tenant:t"), tokens=10, usd=0)
            try:
                replicas[n].hold(call, limits, earlier)
            except BudgetExceeded:
                return
            taken.append(n)

    threads = [threading.Thread(target=race, args=(n,)) for n in range(len(replicas))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert len(taken) == 40  # (1,000 - 600) / 10, exactly
    assert replicas[3].account("spend:r@h11")[1].tokens == 400


def test_an_alert_threshold_is_crossed_once_whichever_replica_books_it(state_at, keep):
    zero, one, alone = _ledgers(state_at, keep)
    limit = SpendLimit(tenant="t", tokens=100, alert_at=(0.5, 0.9))
    windows = SpendWindows({"daily": limit}, Wall(DAY_1))
    for ledgers in ((zero, one), (alone, alone)):
        crossed: list[list[SpendAlert]] = []
        for n, used in enumerate((30, 30, 10, 25)):  # 30, 60, 70, 95
            ledger = ledgers[n % 2]
            found = windows.accounts("t", "a")
            ledger.settle(
                ledger.reserve((), used, 0.0, windows=[w for _, _, w in found]),
                Usage(prompt_tokens=used),
            )
            crossed.append(SpendWindows.crossed(ledger, found))
        assert [[a.threshold for a in alerts] for alerts in crossed] == [[], [0.5], [], [0.9]]
        alert = crossed[1][0]
        assert (alert.limit, alert.window, alert.measure) == ("daily", "d2026-12-07", "tokens")
        assert (alert.spent, alert.allowed, alert.hard, alert.agent) == (60, 100, True, None)


# -- through the gateway and the pool ---------------------------------------------------------


def test_accounts_under_a_prefix_are_found_by_the_prefix_not_as_a_pattern(state_at, keep):
    zero, one, alone = _ledgers(state_at, keep)
    for writes, reads in ((zero, one), (alone, alone)):
        for key, tokens in (
            ("spend:a_b/u@life", 3),
            ("spend:aXb/u@life", 5),
            ("spend:a%/v@life", 7),
        ):
            writes.settle(writes.reserve((key,), tokens, 0.0), Usage(prompt_tokens=tokens))
        assert {k: s.tokens for k, s in reads.spent_under("spend:a_b/").items()} == {
            "spend:a_b/u@life": 3
        }
        assert list(reads.spent_under("spend:a%/")) == ["spend:a%/v@life"]
        assert reads.spent_under("spend:a") .keys() == {
            "spend:a_b/u@life", "spend:aXb/u@life", "spend:a%/v@life"
        }  # fmt: skip


def test_the_report_lists_each_limits_window_with_its_spend_and_each_user_apart(state_at, keep):
    zero, one, alone = _ledgers(state_at, keep)
    limits = {
        "acme-day": SpendLimit(tenant="acme", tokens=1000, usd=2.0),
        "acme-users": SpendLimit(
            tenant="acme", each_user=True, tokens=300, window="rolling", hours=2, hard=False
        ),
        "acme-writer": SpendLimit(tenant="acme", agent="writer", tokens=500, window="month"),
        "blue-life": SpendLimit(tenant="blue", usd=5.0, window="lifetime"),
    }
    for writes, reads in ((zero, one), (alone, alone)):
        wall = Wall(DAY_1 - 3600)  # 22:30: the hour before
        windows = SpendWindows(limits, wall)

        def spend(tenant, agent, user, tokens, *, _w=windows, _l=writes):
            accounts = [a for _, _, a in _w.accounts(tenant, agent, user)]
            held = _l.reserve((f"tenant:{tenant}",), tokens, 0.0, windows=accounts)
            _l.settle(held, Usage(prompt_tokens=tokens))

        spend("acme", "writer", "u_1@x", 30)  # the hour before: still in the 2-hour window
        wall.now = DAY_1
        spend("acme", "writer", "u_1@x", 20)
        spend("acme", "reader", "bo", 7)
        spend("acme", "reader", None, 5)  # no user: under no each-user account
        spend("blue", "writer", "u_1@x", 11)
        views = {(v.limit, v.user): v for v in windows.report(reads, "acme")}
        assert sorted(views) == [
            ("acme-day", None), ("acme-users", "bo"), ("acme-users", "u_1@x"),
            ("acme-writer", None),
        ]  # fmt: skip
        day = views["acme-day", None]
        assert (day.tokens, day.tokens_limit, day.usd_limit) == (62, 1000, 2.0)
        assert day.period == "d2026-12-07"
        assert (views["acme-users", "u_1@x"].tokens, views["acme-users", "bo"].tokens) == (50, 7)
        users = views["acme-users", "u_1@x"]
        assert (users.window, users.hours, users.hard, users.period) == (
            "rolling", 2, False, f"h{int(DAY_1 // 3600)}")  # fmt: skip
        assert (views["acme-writer", None].tokens, views["acme-writer", None].agent) == (
            50,
            "writer",
        )
        assert {v.tenant for v in windows.report(reads, None)} == {"acme", "blue"}
        assert [v.limit for v in windows.report(reads, "blue")] == ["blue-life"]
        assert windows.report(reads, "nobody") == []
        wall.now = DAY_1 + 2 * 3600  # two hours on: the 30 and the 20 have left the window
        assert {v.user: v.tokens for v in windows.report(reads, "acme") if v.user} == {}


def _pool(limits: dict[str, SpendLimit], wall: Wall, alerts: list, state=None) -> LLMAdapterPool:
    config = LLMConfig(
        models={"m": OfflineModel()},
        spend_limits=limits,
        retry=RetryPolicy(default_max_tokens=50),
    )
    pool = LLMAdapterPool(
        config=config,
        provider_factory=lambda _spec: FakeProvider("m", prompt_tokens=40, completion_tokens=10),
        state=state,
    )
    pool._windows = pool._gateway._windows = SpendWindows(config.spend_limits, wall)
    pool._gateway._on_alert = lambda context, found: alerts.append((context, found))
    return pool


def test_a_hard_window_refuses_before_the_provider_is_called_and_a_new_day_serves_again():
    async def main():
        wall, alerts = Wall(DAY_1), []
        pool = _pool({"acme-day": SpendLimit(tenant="acme", tokens=120)}, wall, alerts)
        provider = pool._gateway.deployment("m").provider
        request = llm_request("hello there", model="m")
        acme = CallContext(job_id="j1", tenant="acme", agent="writer")
        await pool.complete(request, acme)  # 50 spent
        await pool.complete(request, acme)  # 100 spent
        with pytest.raises(BudgetExceeded) as caught:
            await pool.complete(request, acme)  # 100 + (prompt + 50) > 120
        assert caught.value.detail["account"] == "spend:acme-day@d2026-12-07"
        assert provider.calls == 2  # refused before the call
        await pool.complete(request, CallContext(job_id="j2", tenant="other", agent="writer"))
        wall.now = DAY_2  # a new UTC day: a new window
        await pool.complete(request, acme)
        assert provider.calls == 4
        assert (await pool.spent("spend:acme-day@d2026-12-08")).tokens == 50
        # the default alert (80 %) fired once, on the call that crossed it
        assert [(c.job_id, [a.threshold for a in found]) for c, found in alerts] == [("j1", [0.8])]

    run(main())


def test_a_soft_limit_only_alerts_and_an_agent_limit_binds_only_its_agent():
    async def main():
        wall, alerts = Wall(DAY_1), []
        limits = {
            "soft": SpendLimit(tenant="acme", tokens=60, hard=False, alert_at=(0.5, 1.0)),
            "writer": SpendLimit(tenant="acme", agent="writer", tokens=60, window="month"),
        }
        pool = _pool(limits, wall, alerts)
        request = llm_request("hello there", model="m")
        writer = CallContext(job_id="j", tenant="acme", agent="writer")
        reader = CallContext(job_id="j", tenant="acme", agent="reader")
        await pool.complete(request, writer)  # writer 50 of 60
        with pytest.raises(BudgetExceeded) as caught:
            await pool.complete(request, writer)
        assert caught.value.detail["account"] == "spend:writer@m2026-12"
        for _ in range(3):  # the soft limit never refuses: 200 of its 60
            await pool.complete(request, reader)
        assert (await pool.spent("spend:soft@d2026-12-07")).tokens == 200
        fired = [(a.limit, a.threshold, a.agent) for _, found in alerts for a in found]
        assert fired == [
            ("soft", 0.5, None),
            ("writer", 0.8, "writer"),
            ("soft", 1.0, None),
        ]

    run(main())


def test_a_windows_spend_survives_a_pool_restart(tmp_path):
    async def main():
        wall, alerts = Wall(DAY_1), []
        limits = {"acme-day": SpendLimit(tenant="acme", tokens=120, alert_at=(0.4,))}
        request = llm_request("hello there", model="m")
        acme = CallContext(job_id="j1", tenant="acme", agent="writer")
        first = _pool(limits, wall, alerts, state=tmp_path / "llm.sqlite")
        await first.on_start()
        await first.complete(request, acme)
        await first.complete(request, acme)
        restarted = _pool(limits, wall, alerts, state=tmp_path / "llm.sqlite")
        await restarted.on_start()
        with pytest.raises(BudgetExceeded):
            await restarted.complete(request, acme)
        # the 40 % alert fired before the restart and is not fired again after it
        assert [a.threshold for _, found in alerts for a in found] == [0.4]

    run(main())


# -- agents' call rates -----------------------------------------------------------------------


def test_each_agent_of_a_tenant_is_paced_on_its_own_and_other_tenants_are_not():
    """120 calls a minute: one every 0.5 s per agent, each agent on its own pacer."""

    async def main():
        config = LLMConfig(
            models={"m": OfflineModel()},
            agent_rate_limits={"acme-each": AgentRateLimit(tenant="acme", rpm=120)},
        )
        pool = LLMAdapterPool(config=config, provider_factory=lambda _s: FakeProvider("m"))
        request = llm_request("hello there", model="m")
        loop = asyncio.get_running_loop()
        done: dict[str, list[float]] = {}

        async def calls(tenant: str, agent: str, n: int) -> None:
            for _ in range(n):
                await pool.complete(request, CallContext(job_id="j", tenant=tenant, agent=agent))
                done.setdefault(f"{tenant}/{agent}", []).append(loop.time())

        await asyncio.gather(
            calls("acme", "writer", 3),
            calls("acme", scoped_name("acme", "reader"), 2),  # an inline agent: its own pace
            calls("other", "writer", 3),
        )
        return done, pool._gateway._rates._pacers

    done, pacers = run(main())
    for agent in ("writer", scoped_name("acme", "reader")):
        times = done[f"acme/{agent}"]
        assert all(b - a >= 0.45 for a, b in itertools.pairwise(times)), times
    # one pacer per agent of acme (by the name acme wrote), none for the other tenant
    assert sorted(pacers) == [("acme-each", "reader"), ("acme-each", "writer")]


def test_a_named_agents_rate_is_split_between_the_pools_replicas():
    rates = AgentRates({"w": AgentRateLimit(tenant="acme", agent="writer", rpm=60)}, replicas=3)

    async def main():
        await rates.wait("acme", "reader")  # not limited: no pacer made
        await rates.wait("acme", "writer")
        return rates._pacers

    pacers = run(main())
    assert list(pacers) == [("w", "writer")]
    assert pacers["w", "writer"].time_period == pytest.approx(3.0)  # 60 a minute over 3


def test_an_alert_is_sent_to_the_jobs_shard_as_the_pools_word_with_its_tenant_and_user():
    class Router:
        def __init__(self) -> None:
            self.sent: list[AgentMessage] = []

        async def request(self, message: AgentMessage) -> None:
            self.sent.append(message)

    alert = SpendAlert(
        limit="d", tenant="acme", user="bob", window="d2026-12-07",
        threshold=0.8, measure="usd", spent=8.0, allowed=10.0, hard=True,
    )  # fmt: skip

    async def main():
        router = Router()
        send = AlertSender(router)
        send(CallContext(job_id="job-1f-1", tenant="acme", agent="w", user="bob"), [alert])
        send(CallContext(job_id=None, tenant="acme", agent="w"), [alert])  # no job: not sent
        await asyncio.sleep(0)  # the sending task runs
        return router.sent

    (message,) = run(main())
    assert (message.sender, message.recipient) == ("llm", orchestrator_address("job-1f-1"))
    assert (message.tenant, message.user, message.payload) == ("acme", "bob", alert)


# -- limits per API key and team, and limits set at run time ---------------------------------


def test_a_key_or_team_limit_binds_only_the_calls_of_jobs_of_that_key_or_team():
    windows = SpendWindows(
        {
            "k": SpendLimit(tenant="acme", key="ci-bot", tokens=10),
            "t": SpendLimit(tenant="acme", team="crew", tokens=10),
            "kt": SpendLimit(tenant="acme", key="ci-bot", team="crew", tokens=10),
        },
        Wall(DAY_1),
    )

    def names(**who):
        return sorted(name for name, _, _ in windows.accounts("acme", "writer", **who))

    assert names() == []
    assert names(key="ci-bot") == ["k"]
    assert names(team="crew") == ["t"]
    assert names(key="ci-bot", team="crew") == ["k", "kt", "t"]
    assert names(key="other", team="other") == []
    assert windows.accounts("globex", "writer", key="ci-bot", team="crew") == []


def _set_limits(state):
    windows = SpendWindows({"cfg": SpendLimit(tenant="acme", tokens=100)}, Wall(DAY_1))
    kept = SetLimits({"cfg": SpendLimit(tenant="acme", tokens=100)}, windows)
    if state is not None:
        kept.load(state)
    return kept, windows


def test_a_limit_set_at_run_time_binds_at_once_and_survives_a_restart(state_at, keep):
    state = keep(PoolState(state_at("llm"), replica="llm-0"))
    kept, windows = _set_limits(state)
    info = kept.put("night", SpendLimit(tenant="acme", team="crew", tokens=5), "ops", state)
    assert (info.source, info.set_by) == ("set", "ops")
    assert sorted(n for n, _, _ in windows.accounts("acme", "a", team="crew")) == ["cfg", "night"]
    with pytest.raises(Conflict):  # the operator's own: changed in the configuration only
        kept.put("cfg", SpendLimit(tenant="acme", tokens=1), "ops", state)
    with pytest.raises(Conflict):
        kept.delete("cfg", state)
    with pytest.raises(SpendLimitNotFound):
        kept.delete("nope", state)
    # another replica (a restart, or a peer starting) reads it back from the shared state
    again, again_windows = _set_limits(keep(PoolState(state_at("llm"), replica="llm-1")))
    assert [(i.name, i.source) for i in again.listed()] == [("cfg", "config"), ("night", "set")]
    assert [i.name for i in again.listed("globex")] == []
    assert sorted(n for n, _, _ in again_windows.accounts("acme", "a", team="crew")) == [
        "cfg",
        "night",
    ]
    dropped = kept.delete("night", state)
    assert dropped.limit.tokens == 5
    assert [n for n, _, _ in windows.accounts("acme", "a", team="crew")] == ["cfg"]
    assert [i.name for i in _set_limits(state)[0].listed()] == ["cfg"]


def test_a_pool_holds_a_set_limit_on_its_next_call_and_tells_its_peers():
    told = []

    class Peers:
        async def spend_limits(self, infos):
            told.append([i.name for i in infos])

    async def main():
        pool = _pool({}, Wall(DAY_1), [])
        pool._peers = Peers()
        pool._set_limits = SetLimits({}, pool._windows)
        request = llm_request("hello there", model="m")
        crew = CallContext(job_id="j", tenant="acme", agent="writer", key="bot", team="crew")
        await pool.complete(request, crew)  # nothing set yet
        await pool.put_spend_limit("cap", SpendLimit(tenant="acme", key="bot", tokens=30), "ops")
        with pytest.raises(BudgetExceeded) as caught:  # prompt + 50 reserved > 30
            await pool.complete(request, crew)
        other = CallContext(job_id="j", tenant="acme", agent="writer", key="web", team="crew")
        await pool.complete(request, other)  # another key: not under it
        listed = await pool.spend_limits("acme")
        await pool.delete_spend_limit("cap")
        await pool.complete(request, crew)
        return caught.value, listed

    refused, listed = run(main())
    assert refused.detail["account"] == "spend:cap@d2026-12-07"
    assert [i.name for i in listed] == ["cap"]
    assert told == [["cap"], []]  # the whole set, after each change


def test_a_jobs_key_and_team_reach_its_model_calls_and_a_key_limit_stops_the_job():
    config = LLMConfig(
        models={"default": OfflineModel(), "offline": OfflineModel()},
        spend_limits={
            "bot-cap": SpendLimit(tenant="acme", key="ci-bot", team="crew", tokens=1, alert_at=())
        },
    )
    team = TeamSpec(name="crew", agents=(AgentSpec(name="crew-ada", role="writer"),))

    async def main():
        troupe = await build_troupe(pool=LLMAdapterPool(config=config))
        ended = {}
        for by in ("ci-bot", "web"):
            job_id = await troupe.desk.submit(*order("- say hi.", team, tenant="acme", by=by))
            ended[by] = await troupe.orchestrator.wait(job_id, 30)
        return ended

    ended = run(main(), 60)
    assert ended["web"].status == "succeeded"  # another key's job: not under the limit
    assert ended["ci-bot"].status == "failed"
    assert "spend:bot-cap@" in ended["ci-bot"].error.message
