"""Skills on the session's Ray: each execution mode, the gate, routing, the watched directory.

The session orchestrator loads and watches ``skills_dir`` (see ``tests/conftest.py``). Skill
and team names here start with ``sk-`` so that no other test's registrations meet them, and
routing tests run as tenants whose policy lists exactly the skills they route among.
"""

from __future__ import annotations

import shutil
import textwrap
import time
from pathlib import Path

import pytest
import ray

from raytroupe import runtime
from raytroupe.protocols import (
    ConfigError,
    Conflict,
    InvalidInput,
    JobFailed,
    ScriptedTurn,
    SkillNotFound,
)
from raytroupe.protocols.skill import SkillSpec

EXAMPLES = Path(__file__).parents[2] / "examples"
WAIT_S = 30.0


def _skill(name, version="1", **fields):
    data = {
        "name": name,
        "version": version,
        "description": f"{name} for tests",
        "execution_mode": "direct",
        "prompt": {"instructions": "Answer from the text."},
        **fields,
    }
    return SkillSpec.model_validate(data)


def _models(rt, **models):
    """Serve ``models`` in the pool, as the operator configures aliases."""
    ray.get(rt.actor("llm/0").configure.remote(models))


def _until(check, what, timeout=WAIT_S):
    """Poll ``check`` (bounded) until it returns something truthy; return it."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.1)
    raise AssertionError(f"not within {timeout} s: {what}")


@pytest.fixture(scope="module")
def examples(rt):
    """The example skills registered (and the research team their team skill runs)."""
    rt.put_team(runtime.Team.from_yaml(EXAMPLES / "teams" / "research.yaml").spec())
    for path in sorted((EXAMPLES / "skills").iterdir()):
        rt.put_skill(path)
    return sorted((EXAMPLES / "skills").iterdir())


def test_a_direct_skill_answers_in_the_standard_shape_with_typed_data(rt, examples):
    text = "A negative review: the delivery was late and the box was broken."
    result = rt.submit(text, skill="sentiment").result(timeout=60)
    assert result.status == "succeeded"
    assert result.subtasks == ()  # one model call, no agent
    out = result.output
    assert (out.skill, out.version, out.team) == ("sentiment", "1", "skill.sentiment")
    assert out.data["sentiment"] == "negative"
    assert 0.0 <= out.data["confidence"] <= 1.0
    assert out.quality.passed
    assert [c.name for c in out.quality.checks] == ["schema"]
    assert out.usage.calls == 1
    assert out.trace_id == result.trace[0].trace_id
    assert any(s.kind == "quality_gate" for s in result.trace)


def test_a_react_skill_runs_on_its_own_agent_with_its_tools(rt, examples):
    result = rt.submit("What is 17 * 23 + 4?", skill="arithmetic@1").result(timeout=60)
    assert result.status == "succeeded"
    (sub,) = result.subtasks
    assert sub.agent == "skill.arithmetic.1"
    assert sub.tool_calls == 1
    assert "395" in result.answer
    assert result.output.quality.passed


def test_a_team_skill_runs_the_team_and_gates_its_answer(rt, examples):
    task = (
        "Find out what the report says.\n\n"
        "Report: Ray schedules actors on nodes with free resources."
    )
    result = rt.submit(task, skill="research-brief").result(timeout=60)
    assert result.status == "succeeded"
    assert result.team == "research"
    assert result.subtasks  # the team's plan ran
    assert result.output.skill == "research-brief"
    assert result.output.quality.checks[-1].name == "count"


def test_structured_input_is_checked_against_the_input_schema(rt, examples):
    with pytest.raises(InvalidInput) as caught:
        rt.submit("", skill="invoice-fields", input={"currency": "euro"})
    assert caught.value.detail["fields"] == ["<root>", "currency"]
    bill = {"text": "Invoice INV-7 for 1,200.50 USD is due June 30, 2025.", "currency": "USD"}
    result = rt.submit("Extract the fields.", skill="invoice-fields", input=bill).result(60)
    assert result.status == "succeeded"
    assert isinstance(result.output.data["total"], float)
    with pytest.raises(SkillNotFound):
        rt.submit("x", skill="invoice-fields@9")
    with pytest.raises(InvalidInput, match="a skill or a team, not both"):
        rt.submit("x", team="research", skill="sentiment")


def test_a_gate_sends_a_failing_answer_back_then_it_passes(rt):
    turns = [ScriptedTurn(text="no figure here"), ScriptedTurn(text="The total is 42.")]
    _models(rt, **{"sk-retry-m": runtime.ScriptedModel(turns=turns)})
    gate = {"regex": [{"pattern": r"\d+", "message": "give the number"}], "max_retries": 2}
    rt.put_skill(_skill("sk-retry", llm={"alias": "sk-retry-m"}, quality_gate=gate))
    result = rt.submit("What is the total?", skill="sk-retry").result(timeout=60)
    assert result.status == "succeeded"
    assert result.answer == "The total is 42."
    assert result.output.quality.retries == 1
    assert result.usage.calls == 2


def test_a_gate_that_keeps_failing_fails_the_job_with_every_check(rt):
    turns = [ScriptedTurn(text="nope"), ScriptedTurn(text="still nope")]
    _models(rt, **{"sk-fail-m": runtime.ScriptedModel(turns=turns)})
    gate = {"counts": [{"unit": "words", "min": 5}], "regex": [{"pattern": r"\d"}],
            "max_retries": 1}  # fmt: skip
    rt.put_skill(_skill("sk-fail", llm={"alias": "sk-fail-m"}, quality_gate=gate))
    with pytest.raises(JobFailed) as caught:
        rt.submit("Say something long.", skill="sk-fail").result(timeout=60)
    result = caught.value.detail["result"]
    assert result.error.code.value == "quality_gate"
    assert [c["name"] for c in result.error.detail["checks"]] == ["not_empty", "count", "regex"]
    assert result.output.quality.passed is False
    assert result.output.quality.retries == 1
    assert result.answer == "still nope"


def test_a_job_naming_nothing_is_routed_to_the_right_skill(rt, examples):
    rt.put_policy("sk-router", runtime.TenantPolicy(
        skills=("summarize", "sentiment", "invoice-fields", "arithmetic", "incident-report"),
        teams=()))  # fmt: skip
    tenant = rt.as_tenant("sk-router")
    review = "Label this app store review as positive, negative or neutral: 'crashes daily'."
    result = tenant.submit(review).result(timeout=120)
    route = result.route
    assert (route.target, route.kind, route.method) == ("sentiment", "skill", "similarity")
    assert route.score > 0.3
    assert result.output.skill == "sentiment"
    by_keyword = tenant.submit("Please summarize: Ray is a framework. It scales Python.").result(60)
    assert (by_keyword.route.target, by_keyword.route.method) == ("summarize", "keyword")
    assert [s.name for s in tenant.skills().skills] == [
        "arithmetic", "incident-report", "invoice-fields", "sentiment", "summarize"
    ]  # fmt: skip
    with pytest.raises(runtime.Forbidden):
        tenant.submit("x", skill="research-brief")


def test_versions_are_immutable_and_roll_back(rt):
    rt.put_skill(_skill("sk-versions", "1", prompt={"instructions": "First."}))
    rt.put_skill(_skill("sk-versions", "2", prompt={"instructions": "Second."}))
    with pytest.raises(Conflict, match="versions are immutable"):
        rt.put_skill(_skill("sk-versions", "2", prompt={"instructions": "Changed."}))
    assert rt.skill("sk-versions").prompt.instructions == "Second."
    assert rt.rollback_skill("sk-versions").version == "1"
    assert rt.skill("sk-versions").version == "1"
    history = [(e.action, e.version) for e in rt.skill_history("sk-versions")]
    assert history == [("applied", "1"), ("applied", "2"), ("rolled_back", "1")]
    info = rt.delete_skill("sk-versions")
    assert info.versions == ("1", "2")
    with pytest.raises(SkillNotFound):
        rt.skill("sk-versions")
    with pytest.raises(ConfigError, match="not configured: sk-no-such-tool"):
        rt.put_skill(_skill("sk-tools", execution_mode="react", tools=["sk-no-such-tool"]))


def _write(path: Path, version: str, instructions: str) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(
        textwrap.dedent(
            f"""\
            name: sk-hot
            version: "{version}"
            description: A skill edited while jobs run.
            execution_mode: direct
            llm: {{alias: sk-hot-slow}}
            prompt: {{instructions: "{instructions}"}}
            """
        ),
        encoding="utf-8",
    )
    shutil.move(tmp, path)  # one event for the watcher, never a half-written file


def _version(rt):
    try:
        return rt.skill("sk-hot").version
    except SkillNotFound:
        return None


def test_the_watched_directory_hot_reloads_and_running_jobs_keep_their_version(rt, skills_dir):
    _models(rt, **{"sk-hot-slow": runtime.OfflineModel(latency_s=3.0)})
    path = skills_dir / "sk-hot.yaml"
    _write(path, "1", "Version one.")
    _until(lambda: _version(rt) == "1", "sk-hot 1 loaded from the directory")
    found = rt.skills().skills
    assert found[[s.name for s in found].index("sk-hot")].source == str(path)
    running = rt.submit("The sky is blue. Grass is green.", skill="sk-hot")
    _write(path, "2", "Version two.")
    _until(lambda: _version(rt) == "2", "sk-hot 2 reloaded")
    later = rt.submit("The sky is blue. Grass is green.", skill="sk-hot")
    assert running.result(timeout=60).output.version == "1"
    assert later.result(timeout=60).output.version == "2"
    # a broken file is reported and the skill keeps the version it had
    path.write_text("name: sk-hot\nversion: '3'\nexecution_mode: sideways\n", encoding="utf-8")
    problems = _until(
        lambda: [p for p in rt.skill_problems() if p.file == str(path)], "sk-hot.yaml reported"
    )
    assert any("execution_mode" in p and "sk-hot.yaml:3" in p for p in problems[0].problems)
    assert _version(rt) == "2"
    assert rt.skill_history("sk-hot")[-1].action == "rejected"
