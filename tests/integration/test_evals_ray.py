"""Evaluation on the session's Ray: suites with known scores, comparison, feedback, reflection.

The offline model answers the example sentiment suite right on 5 of its 6 cases: it picks
the label sharing a word with the review, and "Terrible. Awful. I want my money back."
shares none (a real model gets it; the suite shows what the offline stand-in cannot do).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import ray

from raytroupe import runtime
from raytroupe.actors.evals.suites import read_suite
from raytroupe.protocols import InvalidInput, JobFailed, LessonNotFound, ScriptedTurn, TeamSpec
from raytroupe.protocols.evals import EvalSuite
from raytroupe.protocols.skill import SkillSpec
from tests.support.http_api import ADMIN_KEY, OTHER_KEY, USER_KEY, finished
from tests.support.wire_server import Reply, WireServer

# system tier: a deeper scenario than the quick tier's core (docs/testing.md)
pytestmark = pytest.mark.system

EXAMPLES = Path(__file__).parents[2] / "examples"
SENTIMENT = EXAMPLES / "evals" / "sentiment.jsonl"


@pytest.fixture(scope="module")
def skills(rt):
    for name in ("sentiment.yaml", "invoice-fields.yaml"):
        rt.put_skill(EXAMPLES / "skills" / name)


def test_a_suite_runs_as_jobs_with_the_scores_it_should_have(rt, skills):
    seen = []
    run = rt.evaluate(SENTIMENT, skill="sentiment", concurrency=3, on_progress=seen.append)
    assert run.status == "finished"
    assert (run.suite, run.target, run.total) == ("sentiment", "skill:sentiment@1", 6)
    assert run.score == pytest.approx(5 / 6, abs=1e-6)
    assert run.pass_rate == pytest.approx(5 / 6, abs=1e-6)
    failed = [c for c in run.cases if c.status != "passed"]
    assert [(c.case_id, c.status) for c in failed] == [("money-back", "failed")]
    assert failed[0].expectations[0].detail == "got 'positive'"
    assert all(c.job_id and c.trace_id and c.latency_s > 0 for c in run.cases)
    assert run.ci_low < run.score <= run.ci_high
    assert seen  # progress was reported while it ran
    assert rt.eval_run(run.id).cases == run.cases  # stored, every case
    assert run.id in [r.id for r in rt.evals()]


def test_two_versions_compare_case_by_case(rt, skills):
    base = rt.evaluate(SENTIMENT, skill="sentiment@1", concurrency=2)
    # version 2 answers from a script, right on every case (concurrency 1 keeps the order)
    labels = ("negative", "positive", "negative", "positive", "positive", "negative")
    answers = [f'{{"sentiment": "{label}", "confidence": 0.9}}' for label in labels]
    models = {"sk-eval-v2": runtime.ScriptedModel(turns=[ScriptedTurn(text=a) for a in answers])}
    ray.get(rt.actor("llm/0").configure.remote(models))
    spec = rt.skill("sentiment", "1")
    rt.put_skill(spec.model_copy(update={"version": "2-eval", "llm": spec.llm.model_copy(
        update={"alias": "sk-eval-v2"})}))  # fmt: skip
    better = rt.evaluate(SENTIMENT, skill="sentiment@2-eval", concurrency=1)
    rt.rollback_skill("sentiment", "1")
    assert better.score == 1.0
    comparison = rt.compare_evals(base.id, better.id)
    assert (comparison.better, comparison.worse, comparison.same) == (1, 0, 5)
    assert comparison.diffs == (("money-back", 0.0, 1.0),)
    assert comparison.p_value == 1.0  # one case moved: no evidence either way
    assert not comparison.significant


def test_a_budget_stops_a_run(rt, skills):
    # a call reserves its prompt and answer's room (~1,200 tokens here) and spends ~65:
    # two cases fit in 1,300 tokens, the third's reservation does not
    run = rt.evaluate(SENTIMENT, skill="sentiment", concurrency=1,
                      budget=runtime.Budget(tokens=1300))  # fmt: skip
    assert run.status == "stopped"
    assert run.stopped_because == "the run's budget is spent"
    statuses = [c.status for c in run.cases]
    assert statuses.count("skipped") >= 1
    assert statuses.count("passed") + statuses.count("failed") >= 1
    refused = [c for c in run.cases if c.status == "error"]
    assert all(c.code == "budget_exceeded" for c in refused)
    assert sum(c.tokens for c in run.cases) <= 1300


def test_evals_over_http_for_a_tenant(api, skills):
    suite = read_suite(EXAMPLES / "evals" / "invoices.yaml").model_dump(mode="json", by_alias=True)
    with api.client(USER_KEY) as user:
        started = user.post("/v1/evals", json={"suite": suite, "concurrency": 2})
        assert started.status_code == 202, started.text
        run = user.get(started.json()["url"], params={"wait": 60}).json()
        assert run["status"] == "finished"
        assert (run["target"], run["total"], run["pass_rate"]) == ("skill:invoice-fields@1", 3, 1.0)
        assert run["score"] == pytest.approx((1 + 1 + 0.8) / 3, abs=1e-6)  # the judge's 0.8
        judged = next(c for c in run["cases"] if c["case_id"] == "judged")
        assert judged["expectations"][0]["kind"] == "judge"
        assert judged["expectations"][0]["score"] == pytest.approx(0.8)
        listed = [r["id"] for r in user.get("/v1/evals").json()]
        assert run["id"] in listed
        compared = user.get("/v1/evals/compare", params={"base": run["id"], "other": run["id"]})
        assert compared.json()["p_value"] == 1.0
        # a tenant may not name a scorer: it would run code with a model's answer
        evil = {**suite, "cases": [{"id": "x", "task": "hi", "expect": [
            {"kind": "custom", "scorer": "os:system"}]}]}  # fmt: skip
        refused = user.post("/v1/evals", json={"suite": evil})
        assert refused.status_code == 403
        assert "custom scorers are the operator's" in refused.json()["detail"]
    with api.client(OTHER_KEY) as other:  # another tenant's run is not there for it
        assert other.get(f"/v1/evals/{run['id']}").status_code == 404
        assert run["id"] not in [r["id"] for r in other.get("/v1/evals").json()]
    with api.client(ADMIN_KEY) as admin:
        assert admin.get(f"/v1/evals/{run['id']}").status_code == 200


def test_people_give_feedback_on_finished_jobs(rt, api, skills):
    job = rt.submit("A negative review: it broke.", skill="sentiment")
    job.result(timeout=60)
    given = job.feedback(0.25, "too sure of itself")
    assert (given.score, given.comment, given.by) == (0.25, "too sure of itself", "driver")
    job.feedback(1.0)
    assert [f.score for f in job.feedbacks()] == [0.25, 1.0]
    with pytest.raises(InvalidInput):
        job.feedback(1.5)
    ray.get(rt.actor("llm/0").configure.remote({"sk-slow": runtime.OfflineModel(latency_s=5)}))
    spec = rt.skill("sentiment", "1")
    slow_llm = spec.llm.model_copy(update={"alias": "sk-slow"})
    rt.put_skill(spec.model_copy(update={"name": "sk-slow-sentiment", "llm": slow_llm}))
    running = rt.submit("Slow: a positive note.", skill="sk-slow-sentiment")
    with pytest.raises(runtime.Conflict, match="has not finished"):
        running.feedback(0.5)
    running.cancel()
    with api.client(USER_KEY) as user, api.client(OTHER_KEY) as other:
        job_id = user.post("/v1/jobs", json={"task": "Negative: late.", "skill": "sentiment"})
        job_id = job_id.json()["id"]
        assert finished(user, job_id)["result"] is not None
        posted = user.post(f"/v1/jobs/{job_id}/feedback", json={"score": 0.9, "comment": "ok"})
        assert posted.status_code == 201, posted.text
        assert posted.json()["by"] == "acme-user"
        assert other.post(f"/v1/jobs/{job_id}/feedback", json={"score": 0.0}).status_code == 404
        assert [f["score"] for f in user.get(f"/v1/jobs/{job_id}/feedback").json()] == [0.9]
        assert user.post(f"/v1/jobs/{job_id}/feedback", json={"score": 2}).status_code == 422


def test_a_failed_job_leaves_a_lesson_the_next_job_sees_in_its_prompt(rt, api):
    """Reflection: the reflector (offline) writes a lesson; the model behind the skill (a
    real OpenAI-compatible wire server) receives it in the next job's prompt."""
    with WireServer() as wire:
        model = runtime.OpenAICompatibleModel(base_url=wire.base_url_openai, model="wire-m")
        ray.get(rt.actor("llm/0").configure.remote({"sk-reflect-m": model}))
        rt.put_skill(SkillSpec.model_validate({
            "name": "sk-reflect", "version": "1", "description": "Totals of invoices.",
            "execution_mode": "direct", "llm": {"alias": "sk-reflect-m"},
            "prompt": {"instructions": "Give the invoice's total as a number."},
            "quality_gate": {"regex": [{"pattern": r"\d", "message": "no number"}],
                             "max_retries": 0},
            "reflection": {"when": "failure", "model": "offline", "recall": 3},
        }))  # fmt: skip
        wire.script(Reply(text="I could not say."), Reply(text="The total is 12."))
        with pytest.raises(JobFailed):
            rt.submit("Invoice 7: total 12 EUR.", skill="sk-reflect").result(timeout=60)
        (lesson,) = rt.lessons("sk-reflect")
        assert lesson.text == (
            "A request like 'Invoice 7: total 12 EUR.' ended failed: no number. "
            "Next time, check for that before answering."
        )
        assert set(lesson.tags) == {"lesson", "skill:sk-reflect"}
        later = rt.submit("Invoice 9: total 30 EUR.", skill="sk-reflect").result(timeout=60)
        assert later.answer == "The total is 12."
        prompt = wire.requests[-1].body["messages"]
        assert prompt[1] == {
            "role": "system",
            "content": f"Lessons from earlier jobs of this skill:\n- {lesson.text}",
        }
    # lessons are the tenant's: another tenant sees none, and its key cannot delete them
    with api.client(OTHER_KEY) as other:
        assert other.get("/v1/skills/sk-reflect/lessons").json() == []
        gone = other.delete(f"/v1/skills/sk-reflect/lessons/{lesson.id}")
        assert gone.status_code == 404
    with api.client(ADMIN_KEY) as admin:  # acme's admin: acme's lessons, not "default"'s
        assert admin.get("/v1/skills/sk-reflect/lessons").json() == []
    assert rt.delete_lesson("sk-reflect", lesson.id).text == lesson.text  # what it was
    assert rt.lessons("sk-reflect") == []
    with pytest.raises(LessonNotFound):
        rt.as_tenant("default").delete_lesson("sk-reflect", lesson.id)
    with pytest.warns(DeprecationWarning, match="will raise LessonNotFound"):
        assert rt.delete_lesson("sk-reflect", lesson.id) is False


def _notes_suite() -> EvalSuite:
    """Eight requests of three notes each; the right answer is in the beta note."""
    cases = [
        {"id": f"n{k}", "expect": [{"kind": "contains", "values": [f"{k}22"]}],
         "task": f"Alpha note: code {k}11. Beta note: code {k}22. Gamma note: code {k}33."}
        for k in range(1, 9)
    ]  # fmt: skip
    return EvalSuite.model_validate({"name": "notes", "cases": cases})


def test_an_optimiser_finds_a_planted_better_prompt_and_a_person_promotes_it(rt):
    """The offline skill answers with the two notes sharing most words with its prompt: the
    current prompt names alpha and gamma (0 of 8 right); the optimiser (scripted) proposes
    one prompt naming beta (8 of 8) and one naming gamma (0 of 8)."""
    planted = {"variants": [
        {"instructions": "Read the beta note and give its code.", "rationale": "beta"},
        {"instructions": "Read the gamma note.", "rationale": "gamma"},
    ]}  # fmt: skip
    turns = [ScriptedTurn(text=json.dumps(planted))]
    ray.get(rt.actor("llm/0").configure.remote({"sk-opt-m": runtime.ScriptedModel(turns=turns)}))
    rt.put_skill(SkillSpec.model_validate({
        "name": "sk-notes", "version": "1", "description": "Codes from notes.",
        "execution_mode": "direct",
        "prompt": {"instructions": "Read the alpha and gamma notes."},
    }))  # fmt: skip
    report = rt.optimise_skill("sk-notes", _notes_suite(), variants=2, model="sk-opt-m")
    assert (report.version, report.baseline_score) == ("1", 0.0)
    better, worse = report.candidates
    assert (better.score, better.beats, better.rationale) == (1.0, True, "beta")
    assert better.p_value == pytest.approx(2 / 256, abs=1e-6)
    assert (worse.score, worse.beats) == (0.0, False)
    assert report.best == better.version
    assert not report.promoted
    assert rt.skill("sk-notes").version == "1"  # nobody promoted it: still the old prompt
    assert better.version in rt.skill_history("sk-notes")[-2].version
    rt.promote_skill("sk-notes", report.best)
    answer = rt.submit("Alpha note: code 911. Beta note: code 922.", skill="sk-notes").result(60)
    assert "922" in answer.answer
    assert [e.action for e in rt.skill_history("sk-notes")][-1] == "promoted"


def test_a_team_skills_lessons_reach_its_planner(rt):
    """A team skill recalls lessons too: the team's planner (a real OpenAI-compatible server
    on 127.0.0.1) gets them in a system message, and writes the agents' instructions."""
    plan = json.dumps({"subtasks": [{"id": "s1", "role": "writer", "instructions": "Say it."}]})
    with WireServer() as wire:
        model = runtime.OpenAICompatibleModel(base_url=wire.base_url_openai, model="wire-p")
        ray.get(rt.actor("llm/0").configure.remote({"sk-team-plan": model}))
        rt.put_team(TeamSpec.model_validate({
            "name": "sk-lessons-team", "planning": "model", "planner_model": "sk-team-plan",
            "agents": [{"name": "sk-lessons-writer", "role": "writer"}],
        }))  # fmt: skip
        rt.put_skill(SkillSpec.model_validate({
            "name": "sk-team-lessons", "version": "1", "description": "A brief by a team.",
            "execution_mode": "team:sk-lessons-team",
            "prompt": {"instructions": "Answer with the team's findings."},
            "reflection": {"when": "always", "model": "offline", "recall": 3},
        }))  # fmt: skip
        wire.script(Reply(text=plan), Reply(text="First brief."),
                    Reply(text=plan), Reply(text="Second brief."))  # fmt: skip
        first = rt.submit("Brief me on Ray actors.", skill="sk-team-lessons").result(timeout=60)
        assert first.answer == "First brief."
        (lesson,) = rt.lessons("sk-team-lessons")
        assert not any("Lessons from" in str(r.body["messages"]) for r in wire.requests)
        second = rt.submit("Brief me on Ray Serve.", skill="sk-team-lessons").result(timeout=60)
        assert second.answer == "Second brief."
        planned, aggregated = wire.requests[-2:]
        told = {
            "role": "system",
            "content": f"Lessons from earlier jobs of this skill:\n- {lesson.text}",
        }
        for request in (planned, aggregated):
            assert told in request.body["messages"]
            assert request.body["messages"][0]["role"] == "system"  # after the planner's own
    assert rt.delete_lesson("sk-team-lessons", lesson.id)
