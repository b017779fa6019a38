"""Evaluation without Ray: scoring each expectation, statistics, suite files, the run desk."""

import asyncio
import json
import random
from pathlib import Path

import pytest
from wiring import run

from raytroupe.actors.evals.desk import EvalDesk, EvalStore, compare_runs
from raytroupe.actors.evals.scoring import score_answer
from raytroupe.actors.evals.stats import mean_ci, paired_test
from raytroupe.actors.evals.suites import parse_suite, read_suite
from raytroupe.actors.orchestrator.journal import Journal
from raytroupe.protocols import (
    Budget,
    ConfigError,
    InvalidInput,
    JobNotFound,
    JobResult,
    LLMResponse,
    Timings,
    Usage,
)
from raytroupe.protocols.evals import EvalCase, EvalSuite

EXAMPLES = Path(__file__).parents[2] / "examples" / "evals"


def _case(*expect, task="q", **fields):
    return EvalCase.model_validate({"id": "c", "task": task, "expect": list(expect), **fields})


async def _no_model(request):
    raise AssertionError(f"no model call expected: {request.purpose}")


def _score(case, answer, ask=_no_model):
    return run(score_answer(case, answer, ask, tenant="t"))


def half_score(answer, case):
    return 0.5 if case.id == "c" else 0.0


def test_each_kind_of_expectation_scores_as_documented():
    exact = _case({"kind": "exact", "value": "Paris"})
    assert _score(exact, "  paris ")[:2] == (1.0, True)
    assert _score(exact, "Lyon")[:2] == (0.0, False)
    contains = _case({"kind": "contains", "values": ["ray", "serve", "actor", "gcs"]})
    score, passed, (detail,) = _score(contains, "Ray Serve runs on actors")
    assert (score, passed) == (0.75, False)
    assert detail.detail == "missing ['gcs']"
    anyof = _case({"kind": "contains", "values": ["x", "serve"], "any": True})
    assert _score(anyof, "Ray Serve")[:2] == (1.0, True)
    assert _score(_case({"kind": "regex", "pattern": r"^\d{3}$"}), "395")[:2] == (1.0, True)
    schema = _case({"kind": "json_schema", "schema": {"type": "object", "required": ["a"]}})
    assert _score(schema, '```json\n{"a": 1}\n```')[:2] == (1.0, True)
    assert _score(schema, '{"b": 1}')[2][0].detail == "at <root>: 'a' is a required property"
    number = _case({"kind": "number", "value": 395, "tolerance": 0.5})
    assert _score(number, "17 * 23 + 4 = 395")[:2] == (0.0, False)  # the first number: 17
    field = _case({"kind": "number", "field": "total", "value": 1250, "relative": 0.01})
    assert _score(field, '{"total": "1,255"}')[:2] == (1.0, True)  # within 1 %
    assert _score(field, "not json")[2][0].detail.startswith("the answer is not JSON")
    custom = _case({"kind": "custom", "scorer": "test_evals:half_score"})
    assert _score(custom, "x")[:2] == (0.5, True)


def test_a_case_score_is_the_weighted_mean_and_passes_only_if_all_do():
    case = _case(
        {"kind": "exact", "value": "a", "weight": 3},
        {"kind": "exact", "value": "b", "weight": 1},
    )
    score, passed, parts = _score(case, "a")
    assert score == 0.75
    assert not passed
    assert [p.passed for p in parts] == [True, False]


def test_a_judge_scores_against_its_rubric():
    seen = []

    async def judge(request):
        seen.append(request)
        return LLMResponse(text='{"score": 0.6, "rationale": "names it"}', model="j",
                           provider="scripted")  # fmt: skip

    case = _case(
        {"kind": "judge", "rubric": "Names the capital.", "threshold": 0.5}, task="Capital?"
    )
    score, passed, (part,) = _score(case, "Paris", judge)
    assert (score, passed, part.detail) == (0.6, True, "names it")
    (request,) = seen
    assert request.purpose == "grade"
    assert "Names the capital." in request.messages[-1].text


def test_suites_from_jsonl_and_yaml_with_their_lines():
    suite = read_suite(EXAMPLES / "sentiment.jsonl")
    assert suite.name == "sentiment"
    assert len(suite.cases) == 6
    invoices = read_suite(EXAMPLES / "invoices.yaml")
    assert (invoices.name, invoices.skill, len(invoices.cases)) == ("invoices", "invoice-fields", 3)
    bad = (
        '{"id": "a", "task": "x", "expect": []}\nnot json\n'
        '{"id": "b", "expect": [{"kind": "exact", "value": 1}]}\n'
    )
    with pytest.raises(ConfigError) as caught:
        parse_suite(bad, "s.jsonl", jsonl=True)
    assert caught.value.detail["problems"] == [
        "s.jsonl:1: expect: Tuple should have at least 1 item after validation, not 0",
        "s.jsonl:2: <line>: not JSON: Expecting value",
        "s.jsonl:3: <root>: case 'b' has neither a task nor an input",
    ]
    yaml_bad = "cases:\n  - id: a\n    task: x\n    expect:\n      - {kind: exactly, value: 1}\n"
    with pytest.raises(ConfigError) as caught:
        parse_suite(yaml_bad, "s.yaml", jsonl=False, name="s")
    (problem,) = caught.value.detail["problems"]
    assert problem.startswith("s.yaml:5: cases.0.expect.0: Input tag 'exactly' found")
    with pytest.raises(ConfigError, match="case ids given twice: a"):
        parse_suite('{"id": "a", "task": "x", "expect": [{"kind": "exact", "value": 1}]}\n' * 2,
                    "d.jsonl", jsonl=True)  # fmt: skip


def test_the_mean_and_its_confidence_interval():
    assert mean_ci([]) == (0.0, 0.0, 0.0)
    assert mean_ci([0.5]) == (0.5, 0.5, 0.5)
    mean, low, high = mean_ci([0.5, 0.7, 0.9, 0.7])  # sd 0.1633, t(3) = 3.182
    assert mean == pytest.approx(0.7)
    half = 3.182 * (0.08 / 3) ** 0.5 / 2
    assert (low, high) == (pytest.approx(0.7 - half), pytest.approx(0.7 + half))
    assert mean_ci([0.0, 1.0, 1.0, 1.0])[1:] == (0.0, 1.0)  # clipped to scores' range
    many = mean_ci([0.5] * 200)
    assert many == (0.5, 0.5, 0.5)


def test_the_paired_test_exactly_and_its_false_positive_rate():
    assert paired_test([0.0, 0.0]) == 1.0
    assert paired_test([1.0] * 5) == pytest.approx(2 / 32)  # all five better: exact
    assert paired_test([1.0] * 6) == pytest.approx(2 / 64)
    assert paired_test([1.0, -1.0] * 4) == 1.0
    # equal arms: a 5 % test says "significant" about 5 % of the time, not more
    rng = random.Random(7)  # noqa: S311 - a simulation
    trials = 400
    false = sum(
        paired_test([rng.choice((-1.0, 0.0, 1.0)) * rng.random() for _ in range(10)]) < 0.05
        for _ in range(trials)
    )
    assert false / trials <= 0.07  # 0.05 plus sampling error of 400 trials
    # a planted improvement on 30 cases is found
    assert paired_test([0.3 + rng.uniform(-0.2, 0.2) for _ in range(30)]) < 0.001


class _Cluster:
    """Jobs that answer at once with scripted answers; counts how many ran at the same time."""

    def __init__(self, answers, cost=0.0, gate=None):
        self.answers = answers
        self.cost = cost
        self.running = 0
        self.most = 0
        self.budgets = []
        self.gate = gate

    async def submit(self, case, left):
        self.budgets.append(left)
        self.running += 1
        self.most = max(self.most, self.running)
        return case.id

    async def wait(self, job_id):
        await asyncio.sleep(0.01)
        if self.gate is not None:
            await self.gate.wait()
        self.running -= 1
        answer = self.answers[job_id]
        if answer is None:
            return _result(job_id, "", status="failed")
        return _result(job_id, answer, cost=self.cost)


def _result(job_id, answer, status="succeeded", cost=0.0):
    return JobResult(job_id=job_id, task="t", team="x", status=status, answer=answer,
                     usage=Usage(prompt_tokens=10, completion_tokens=5, cost_usd=cost, calls=1),
                     timings=Timings(submitted_at=1.0, finished_at=2.0))  # fmt: skip


def _suite(n):
    cases = [{"id": f"c{i:02d}", "task": "x", "expect": [{"kind": "exact", "value": "yes"}]}
             for i in range(n)]  # fmt: skip
    return EvalSuite.model_validate({"name": "s", "cases": cases})


def _desk(store=None):
    return EvalDesk(store, lambda _run, _tenant: _no_model)


def test_a_run_scores_every_case_with_bounded_concurrency(tmp_path):
    suite = _suite(12)
    answers = {f"c{i:02d}": "yes" if i % 4 else "no" for i in range(12)}
    answers["c11"] = None  # its job fails

    async def main():
        cluster = _Cluster(answers)
        desk = _desk(EvalStore(Journal(tmp_path / "j.sqlite").db))
        run_id = desk.start(suite, "skill:s@1", cluster.submit, cluster.wait, tenant="acme",
                            concurrency=3)  # fmt: skip
        done = await desk.wait(run_id, None)
        return cluster, done

    cluster, done = run(main())
    assert cluster.most == 3
    assert done.status == "finished"
    assert done.finished_at is not None  # read live, as its desk still holds it
    assert done.finished_at >= done.started_at
    statuses = {c.case_id: c.status for c in done.cases}
    assert [k for k, v in statuses.items() if v == "failed"] == ["c00", "c04", "c08"]
    assert statuses["c11"] == "error"
    assert done.score == pytest.approx(8 / 12)
    assert done.pass_rate == pytest.approx(8 / 12)
    assert done.ci_low < done.score < done.ci_high
    # read back from the store after a restart, with every case
    again = _desk(EvalStore(Journal(tmp_path / "j.sqlite").db))
    stored = again.run(done.id)
    assert (stored.score, len(stored.cases), stored.status) == (done.score, 12, "finished")
    assert stored.finished_at == done.finished_at
    assert [r.id for r in again.runs("acme")] == [done.id]
    assert again.runs("globex") == []
    with pytest.raises(JobNotFound):
        again.run(done.id, tenant="globex")


def test_a_run_stops_starting_cases_once_its_budget_is_spent():
    suite = _suite(10)

    async def main():
        cluster = _Cluster(dict.fromkeys((c.id for c in suite.cases), "yes"), cost=0.01)
        desk = _desk()
        run_id = desk.start(suite, "skill:s@1", cluster.submit, cluster.wait, tenant="t",
                            concurrency=1, budget=Budget(usd=0.03))  # fmt: skip
        return cluster, await desk.wait(run_id, None)

    cluster, done = run(main())
    assert done.status == "stopped"
    assert done.stopped_because == "the run's budget is spent"
    assert [c.status for c in done.cases].count("passed") == 3
    assert [c.status for c in done.cases].count("skipped") == 7
    assert cluster.budgets[0] == Budget(usd=0.03, tokens=None)
    assert cluster.budgets[2].usd == pytest.approx(0.01)  # what was left when it started
    assert done.cost_usd == pytest.approx(0.03)


def test_a_run_cut_short_by_a_restart_reads_back_as_stopped(tmp_path):
    suite = _suite(4)

    async def main():
        gate = asyncio.Event()
        cluster = _Cluster(dict.fromkeys((c.id for c in suite.cases), "yes"), gate=gate)
        desk = _desk(EvalStore(Journal(tmp_path / "j.sqlite").db))
        run_id = desk.start(suite, "team:t", cluster.submit, cluster.wait, tenant="t")
        await asyncio.sleep(0.05)
        return run_id  # the loop ends: the run never finishes

    run_id = run(main())
    stored = _desk(EvalStore(Journal(tmp_path / "j.sqlite").db)).run(run_id)
    assert stored.status == "stopped"
    assert stored.stopped_because == "the orchestrator restarted"


def test_two_runs_compare_case_by_case():
    suite = _suite(20)
    worse = {c.id: "no" if int(c.id[1:]) < 12 else "yes" for c in suite.cases}
    better = {c.id: "no" if int(c.id[1:]) < 2 else "yes" for c in suite.cases}

    async def main():
        desk = _desk()
        runs = []
        for answers in (worse, better, better):
            cluster = _Cluster(answers)
            run_id = desk.start(suite, "skill:s@1", cluster.submit, cluster.wait, tenant="t")
            runs.append(await desk.wait(run_id, None))
        return runs

    a, b, c = run(main())
    comparison = compare_runs(a, b)
    assert (comparison.better, comparison.worse, comparison.same) == (10, 0, 10)
    assert comparison.mean_diff == 0.5
    assert comparison.p_value == pytest.approx(2 / 1024, abs=1e-6)
    assert comparison.significant
    assert len(comparison.diffs) == 10
    same = compare_runs(b, c)
    assert (same.p_value, same.significant) == (1.0, False)
    other = a.model_copy(update={"suite": "other"})
    with pytest.raises(InvalidInput, match="different suites"):
        compare_runs(other, b)


def test_concurrency_out_of_range_is_refused():
    async def main():
        _desk().start(_suite(1), "t", None, None, tenant="t", concurrency=0)

    with pytest.raises(InvalidInput, match="concurrency"):
        run(main())


def test_the_example_suites_parse_and_reference_example_skills():
    skills = {p.stem for p in (EXAMPLES.parent / "skills").iterdir()}
    for path in EXAMPLES.iterdir():
        suite = read_suite(path)
        assert suite.skill is None or suite.skill in skills
        assert json.loads(suite.model_dump_json())["cases"]


def test_optimiser_variants_become_named_versions_of_the_skill():
    from raytroupe.actors.evals.optimise import candidates, optimise_request, parse_variants  # noqa: PLC0415
    from raytroupe.actors.llm.offline import OfflineProvider  # noqa: PLC0415
    from raytroupe.protocols.evals import CaseResult, EvalRun, ExpectationScore  # noqa: PLC0415
    from raytroupe.protocols.skill import SkillSpec  # noqa: PLC0415

    skill = SkillSpec(name="s", version="1.2.0", description="d",
                      prompt={"instructions": "Answer.", "constraints": ["Be brief."]})  # fmt: skip
    with pytest.raises(ValueError, match="no 'variants' list"):
        parse_variants('{"other": 1}', 3)
    with pytest.raises(ValueError, match="no variant with instructions"):
        parse_variants('{"variants": [{"instructions": " "}]}', 3)
    found = parse_variants(
        '{"variants": [{"instructions": "A."}, {"instructions": "B.", "constraints": ["x"]},'
        ' {"instructions": "C."}]}',
        2,
    )
    specs = candidates(skill, found, "3f2a")
    assert [s.version for s in specs] == ["1.2.0.o3f2a1", "1.2.0.o3f2a2"]
    assert [s.prompt.constraints for s in specs] == [("Be brief.",), ("x",)]
    miss = CaseResult(case_id="c1", status="failed", score=0.0, answer="no",
                      expectations=(ExpectationScore(kind="exact", score=0.0, passed=False,
                                                     detail="got 'no'"),))  # fmt: skip
    run_ = EvalRun(id="eval-1", suite="s", target="skill:s@1", status="finished",
                   started_at=1.0, total=1, cases=(miss,))  # fmt: skip
    request = optimise_request(skill, run_, ("Say yes.",), 2, "default")
    assert "case c1: answered 'no'; got 'no'" in request.messages[-1].text
    assert "Lessons:\n- Say yes." in request.messages[-1].text
    offline = run(OfflineProvider().complete(request)).text
    assert parse_variants(offline, 2) == [
        {"instructions": "Answer. Avoid this: got 'no'.", "rationale": "got 'no'"}
    ]
