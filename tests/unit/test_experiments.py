"""A/B experiments without Ray: the split, the sample, the test's level and power, the desk."""

import collections
import itertools
import random

import pytest

from raytroupe.actors.evals.experiment_store import ExperimentStore, Outcome
from raytroupe.actors.evals.experiment_verdict import decide, sample
from raytroupe.actors.evals.experiments import STALE_S, ExperimentDesk, arm_for
from raytroupe.actors.evals.stats import permutation_test
from raytroupe.actors.orchestrator.journal import Journal
from raytroupe.actors.skills.registry import SkillRegistry
from raytroupe.actors.telemetry import metrics
from raytroupe.protocols import (
    AgentSpec,
    ConfigError,
    Conflict,
    ExperimentNotFound,
    JobResult,
    SkillNotFound,
    TeamSpec,
)
from raytroupe.protocols.experiments import Arm, ExperimentSpec, required_samples
from raytroupe.protocols.job_context import JobContext
from raytroupe.protocols.jobs import Timings
from raytroupe.protocols.llm import Usage
from raytroupe.protocols.quality import QualityCheck, QualityReport, StandardOutput
from raytroupe.protocols.skill import SkillSpec


def _spec(**fields):
    base = {"name": "ab", "skill": "sk", "arms": [{"version": "1"}, {"version": "2"}]}
    return ExperimentSpec.model_validate(base | fields)


def _outcomes(arm, values, *, cost=0.0):
    return [Outcome(arm, "succeeded" if v else "failed", None, None, cost, 0.1, None, 0)
            for v in values]  # fmt: skip


# -- the design ---------------------------------------------------------------------------


def test_the_sample_size_is_the_stated_formula():
    # 2 * 0.25 * (z(0.975) + z(0.8))^2 / 0.4^2 = 24.5
    assert required_samples(0.05, 0.8, 0.4, 1) == 25
    assert required_samples(0.05, 0.8, 0.2, 1) == 99
    assert required_samples(0.05, 0.8, 0.4, 2) == 30  # Bonferroni: alpha / 2 per challenger
    assert _spec(min_effect=0.4).sample_size() == 25
    assert _spec(samples_per_arm=40).sample_size() == 40


def test_bad_specs_are_refused():
    with pytest.raises(ValueError, match="different version"):
        _spec(arms=[{"version": "1"}, {"version": "1"}])
    with pytest.raises(ValueError, match="at least 2"):
        _spec(arms=[{"version": "1"}])
    with pytest.raises(ValueError, match="greater than 0"):
        _spec(arms=[{"version": "1", "weight": 0}, {"version": "2"}])
    with pytest.raises(ValueError, match="needs 30448 jobs per arm"):
        _spec(min_effect=0.02, alpha=0.001, power=0.95)
    with pytest.raises(ValueError, match="less than or equal to 20000"):
        _spec(samples_per_arm=20_001)
    with pytest.raises(ValueError, match="Extra inputs"):
        _spec(state_url="postgresql://elsewhere")


# -- the split ----------------------------------------------------------------------------


def test_the_split_is_deterministic_and_follows_the_weights():
    arms = (Arm(version="1", weight=3), Arm(version="2", weight=1))
    ids = [f"job-{i:016x}" for i in range(20_000)]
    landed = [arm_for("ab", i, arms).version for i in ids]
    assert landed == [arm_for("ab", i, arms).version for i in ids]  # same id, same arm
    share = collections.Counter(landed)["1"] / len(ids)
    assert share == pytest.approx(0.75, abs=0.015)
    # another experiment splits the same jobs independently of this one
    other = [arm_for("cd", i, arms).version for i in ids]
    both = sum(a == "1" and b == "1" for a, b in zip(landed, other, strict=True)) / len(ids)
    assert both == pytest.approx(0.75 * 0.75, abs=0.015)


def test_the_sample_is_taken_in_assignment_order():
    jobs = [
        Outcome("1", "succeeded", None, None, 0, 0, None, 0),
        Outcome("1", "cancelled", None, None, 0, 0, None, 0),  # left out
        Outcome("1", "failed", 0.4, None, 0, 0, 0.5, 1),
        Outcome("1", None, None, None, 0, 0, None, 0),  # running: holds its place
        Outcome("1", "succeeded", 0.9, None, 0, 0, 1.0, 2),
    ]
    assert sample(jobs, "success", 2) == ([1.0, 0.0], True)
    assert sample(jobs, "success", 3) == ([1.0, 0.0], False)  # waits for the running one
    assert sample(jobs, "quality", 2) == ([0.0, 0.4], True)  # no gate report: 0
    assert sample(jobs, "feedback", 2) == ([0.5, 1.0], True)  # unscored jobs are not in it
    assert sample(jobs, "feedback", 3) == ([0.5, 1.0], False)


# -- the test -------------------------------------------------------------------------------


def test_the_permutation_test_on_clear_and_null_cases():
    assert permutation_test([0.0] * 20, [1.0] * 20) == pytest.approx(1 / 10_001)
    assert permutation_test([1.0, 0.0] * 10, [0.0, 1.0] * 10) == 1.0
    assert permutation_test([], [1.0]) == 1.0
    # the same data, the same answer: a fixed seed
    a, b = [0.2, 0.5, 0.9, 0.4], [0.6, 0.8, 0.7, 0.95]
    assert permutation_test(a, b) == permutation_test(a, b)
    # 4 v 4 has 70 labellings, 2 as extreme two-sided: p ~ 2/70
    assert permutation_test([0, 0, 0, 0.1], [1, 1, 1, 0.9]) == pytest.approx(2 / 70, abs=0.01)


def _simulate(p_control, p_other, *, trials, size, draws=2000, seed=7):
    """Decisions of ``trials`` simulated experiments with Bernoulli arms."""
    rng = random.Random(seed)  # noqa: S311 - a simulation
    spec = _spec(samples_per_arm=size)
    winners = 0
    for _ in range(trials):
        a = [rng.random() < p_control for _ in range(size)]
        b = [rng.random() < p_other for _ in range(size)]
        decision = decide(spec, _outcomes("1", a) + _outcomes("2", b), at=0, draws=draws)
        winners += decision is not None and decision.winner == "2"
    return winners / trials


def test_equal_arms_declare_a_winner_no_more_often_than_alpha():
    """The false-positive rate, by simulation: 1,000 experiments of equal arms at the design's
    horizon (25 jobs an arm). A winner needs p < 0.05 and a gain, so at most alpha / 2 of
    them may name the challenger; 3 standard errors of slack for the simulation itself."""
    rate = _simulate(0.5, 0.5, trials=1000, size=25)
    assert rate <= 0.025 + 3 * (0.025 * 0.975 / 1000) ** 0.5
    lopsided = _simulate(0.85, 0.85, trials=500, size=25, seed=11)
    assert lopsided <= 0.025 + 3 * (0.025 * 0.975 / 500) ** 0.5


def test_a_planted_effect_of_the_design_size_is_found_at_the_stated_power():
    """min_effect 0.4 at power 0.8 gives 25 jobs an arm; 0.5 against 0.9 is found in at
    least 80 % of simulated experiments (the variance bound is conservative: more)."""
    assert _spec(min_effect=0.4).sample_size() == 25
    assert _simulate(0.5, 0.9, trials=300, size=25) >= 0.8


def test_a_decision_names_the_winner_and_the_guard_stops_a_costly_one():
    spec = _spec(samples_per_arm=20, max_cost_increase=0.1)
    cheap = _outcomes("1", [True] * 10 + [False] * 10, cost=0.010)
    dear = _outcomes("2", [True] * 20, cost=0.012)
    decision = decide(spec, cheap + dear, at=5.0)
    assert decision.winner == "2"
    (compared,) = decision.comparisons
    assert (compared.diff, compared.significant, compared.cost_ratio) == (0.5, True, 1.2)
    assert compared.p_value < 0.01
    assert "2 beats 1 on success by +0.500" in decision.reason
    assert decision.guard == (
        "2 costs $0.012000 a job against $0.010000: more than 10% over the control"
    )
    assert decide(spec, cheap + dear[:19], at=5.0) is None  # the horizon is not reached
    assert decide(spec, cheap[:19] + dear, at=5.0) is None


def test_with_three_arms_each_challenger_is_tested_at_half_alpha():
    spec = _spec(arms=[{"version": "1"}, {"version": "2"}, {"version": "3"}], samples_per_arm=12)
    control = _outcomes("1", [True] * 6 + [False] * 6)
    close = _outcomes("3", [True] * 11 + [False])  # p ~ 0.07: a 2-arm test's 0.05 would not take it
    far = _outcomes("2", [True] * 12)
    decision = decide(spec, control + far + close, at=0)
    by_version = {c.version: c for c in decision.comparisons}
    assert by_version["2"].significant
    assert not by_version["3"].significant
    assert decision.winner == "2"
    assert "< 0.0250) over 12 jobs per arm" in decision.reason


# -- the desk ---------------------------------------------------------------------------------


def _registry():
    registry = SkillRegistry()
    for version in ("1", "2"):
        spec = {"name": "sk", "version": version, "description": "d",
                "execution_mode": "direct", "prompt": {"instructions": version}}  # fmt: skip
        registry.apply(SkillSpec.model_validate(spec))
    registry.rollback("sk", "1")
    return registry


def _result(job_id, status="succeeded", *, score=1.0, judge=None, cost=0.001):
    checks = (QualityCheck(name="judge", passed=True, score=judge),) if judge is not None else ()
    quality = QualityReport(passed=status == "succeeded", score=score, checks=checks)
    output = StandardOutput(team="skill.sk", produced_at=2.0, quality=quality, text="x")
    return JobResult(job_id=job_id, task="t", team="skill.sk", status=status,
                     usage=Usage(cost_usd=cost, calls=1),
                     timings=Timings(submitted_at=1.0, finished_at=1.5), output=output)  # fmt: skip


def _clock():
    ticks = itertools.count(1000)
    return lambda: float(next(ticks))


def _unknown(_job_id):
    return False, None


def _assign(desk, skill, tenant, job_id):
    """What the front desk does for an admitted job: choose, record; the version."""
    chosen = desk.choose(skill, tenant, job_id)
    if chosen is None:
        return None
    desk.record(job_id, chosen)
    return chosen.version


def test_the_desk_assigns_measures_decides_and_promotes(tmp_path):
    registry = _registry()
    journal = Journal(tmp_path / "j.sqlite")
    store = ExperimentStore(journal.db)
    desk = ExperimentDesk(store, registry, _unknown, clock=_clock())
    desk.start(_spec(samples_per_arm=8, auto_promote=True, tenants=["acme"]))
    assert _assign(desk, "sk", "other-tenant", "job-x") is None  # not in the experiment
    assert _assign(desk, "unrelated", "acme", "job-x") is None
    versions = {f"job-{i}": _assign(desk, "sk", "acme", f"job-{i}") for i in range(60)}
    assert set(versions.values()) == {"1", "2"}
    with pytest.raises(Conflict, match="already has a running experiment"):
        desk.start(_spec(name="ab2"))
    # a restarted front desk (same database) carries on: same experiment, same figures
    desk = ExperimentDesk(ExperimentStore(journal.db), registry, journal.known, clock=_clock())
    for job_id, version in versions.items():
        ok = version == "2"
        store.outcome(_result(job_id, "succeeded" if ok else "failed", score=float(ok),
                              judge=0.5 if ok else None))  # fmt: skip
    store.outcome(_result("job-0", "failed"))  # a second report of a job changes nothing
    store.feedback("job-1", 0.25)
    store.feedback("job-1", 0.75)
    store.feedback("job-unassigned", 1.0)  # in no experiment: nothing happens
    assert desk.info("ab").status == "running"  # reading decides nothing: the checks do
    desk.check()
    info = desk.info("ab")
    arms = {a.version: a for a in info.arms}
    assert sum(a.assigned for a in info.arms) == 60
    assert arms["2"].success_rate == 1.0
    assert arms["2"].judge == 0.5
    assert arms[versions["job-1"]].feedback == 0.5
    assert arms[versions["job-1"]].feedback_count == 2
    assert info.status == "decided"
    assert info.decision.winner == "2"
    assert info.promoted
    assert registry.get("sk").version == "2"
    assert registry.history("sk")[-1].source == "experiment:ab"
    assert _assign(desk, "sk", "acme", "job-late") is None  # decided: the split is over
    with pytest.raises(Conflict, match="has ended"):
        desk.stop("ab", by="me")


def test_the_guard_keeps_a_costly_winner_from_promotion():
    registry = _registry()
    store = ExperimentStore.in_memory()
    desk = ExperimentDesk(store, registry, _unknown, clock=_clock())
    desk.start(_spec(samples_per_arm=6, auto_promote=True, max_cost_increase=0.5))
    for i in range(40):
        job_id = f"job-{i}"
        version = _assign(desk, "sk", "default", job_id)
        dear = version == "2"
        store.outcome(_result(job_id, "succeeded" if dear else "failed",
                              cost=0.01 if dear else 0.005))  # fmt: skip
    with metrics.capture() as samples:  # what the dashboard shows of each arm
        desk.check()
    shown = {(s.name, s.tags["arm"]): s.value for s in samples}
    assert shown[("troupe_experiment_jobs", "1")] + shown[("troupe_experiment_jobs", "2")] == 40
    assert shown[("troupe_experiment_success_rate", "2")] == 1.0
    assert shown[("troupe_experiment_metric", "1")] == 0.0
    assert shown[("troupe_experiment_cost_usd", "2")] == pytest.approx(0.01)
    assert {s.tags["experiment"] for s in samples} == {"ab"}
    info = desk.info("ab")
    assert info.decision.winner == "2"
    assert not info.promoted
    assert "more than 50% over the control" in info.decision.guard
    assert registry.get("sk").version == "1"


def test_stopping_listing_and_what_is_refused():
    registry = _registry()
    desk = ExperimentDesk(ExperimentStore.in_memory(), registry, _unknown, clock=_clock())
    with pytest.raises(SkillNotFound):
        desk.start(_spec(arms=[{"version": "1"}, {"version": "9"}]))
    with pytest.raises(SkillNotFound):
        desk.start(_spec(skill="nope"))
    desk.start(_spec())
    assert _assign(desk, "sk", "t", "job-1") in {"1", "2"}
    stopped = desk.stop("ab", by="alice")
    assert (stopped.status, stopped.stopped_by, stopped.decision) == ("stopped", "alice", None)
    assert stopped.arms[0].assigned + stopped.arms[1].assigned == 1
    assert _assign(desk, "sk", "t", "job-2") is None
    with pytest.raises(Conflict, match="named 'ab' already"):
        desk.start(_spec())
    desk.start(_spec(name="ab-2"))
    desk.stop_skill("sk", by="skill deleted")
    listed = [(i.spec.name, i.status) for i in desk.every()]
    assert listed == [("ab", "stopped"), ("ab-2", "stopped")]
    with pytest.raises(ExperimentNotFound):
        desk.info("missing")
    unshared = ExperimentDesk(ExperimentStore.in_memory(), registry, _unknown, shared=False)
    with pytest.raises(ConfigError, match="journal's database"):
        unshared.start(_spec(name="ab-3"))


def test_outcomes_the_shards_did_not_write_are_read_from_the_journal(tmp_path):
    """A job whose shard could not write its outcome is read from the journal after STALE_S;
    an assignment whose job never started is dropped; a running job keeps its place."""
    registry = _registry()
    journal = Journal(tmp_path / "j.sqlite")
    now = [1000.0]
    desk = ExperimentDesk(ExperimentStore(journal.db), registry, journal.known,
                          clock=lambda: now[0])  # fmt: skip
    desk.start(_spec(samples_per_arm=5))
    team = TeamSpec(name="skill.sk", agents=[AgentSpec(name="a", role="r")])
    for job_id in ("job-done", "job-running"):
        journal.job(
            job_id,
            context=JobContext(request="t"),
            team=team,
            tenant="default",
            budget=None,
            submitted_at=now[0],
        )
        _assign(desk, "sk", "default", job_id)
    _assign(desk, "sk", "default", "job-never-started")
    journal.finish(_result("job-done"))  # its shard's own write failed: only the journal has it
    desk.check()  # too early: nothing is looked up
    assert sum(a.finished for a in desk.info("ab").arms) == 0
    now[0] += STALE_S + 1
    desk.check()
    arms = desk.info("ab").arms
    assert sum(a.finished for a in arms) == 1
    assert sum(a.assigned for a in arms) == 2  # the job that never started is gone
