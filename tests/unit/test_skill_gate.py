"""A skill's quality gate, the gate loop, the output standardizer and the offline shaped answers."""

import json

import pytest
from wiring import run

from raytroupe.actors.llm.offline import OfflineProvider
from raytroupe.actors.llm.offline_shaped import grade, shaped
from raytroupe.actors.skills.gate import check_answer, grade_request, parse_grade
from raytroupe.actors.skills.run import check_input, direct_request, gated, request_text
from raytroupe.actors.skills.standard import normalize, standard_output
from raytroupe.protocols import (
    ChatMessage,
    InvalidInput,
    JobResult,
    LLMRequest,
    LLMResponse,
    Timings,
)
from raytroupe.protocols.skill import SkillSpec


def _skill(**fields):
    return SkillSpec.model_validate(
        {
            "name": "s",
            "version": "1",
            "description": "d",
            "execution_mode": "direct",
            "prompt": {"instructions": "Do it."},
            **fields,
        }
    )


def _answer(text):
    return LLMResponse(text=text, model="m", provider="scripted")


def _judge_saying(*texts):
    asked = []
    answers = iter(texts)

    async def ask(request: LLMRequest):
        asked.append(request)
        return _answer(next(answers))

    return ask, asked


async def _no_model(request):
    raise AssertionError(f"no model call expected, got {request.purpose}")


def _check(skill, answer, ask=_no_model):
    return run(check_answer(skill, answer, "the request", ask))


def test_schema_and_required_fields():
    skill = _skill(
        output_schema={"type": "object", "properties": {"n": {"type": "integer"}}},
        quality_gate={"required": ["n"]},
    )
    good = _check(skill, '{"n": 3}')
    assert good.passed
    assert good.score == 1.0
    assert [c.name for c in good.checks] == ["schema"]
    bad = _check(skill, '{"n": "three"}')
    assert not bad.passed
    assert bad.score == 0.0
    assert bad.problems == ["at n: 'three' is not of type 'integer'"]
    empty = _check(skill, "  ")
    assert empty.problems == ["the answer is empty"]


def test_word_and_item_counts():
    skill = _skill(
        quality_gate={
            "counts": [
                {"unit": "words", "max": 4},
                {"field": "tags", "unit": "items", "min": 2},
            ]
        }
    )
    report = _check(skill, json.dumps({"tags": ["a"]}))
    assert [c.passed for c in report.checks] == [True, True, False]
    assert report.problems == ["field 'tags' has 1 items; allowed 2-"]
    assert report.score == pytest.approx(2 / 3, abs=1e-3)
    long = _check(
        _skill(quality_gate={"counts": [{"unit": "words", "max": 4}]}), "one two three four five"
    )
    assert long.problems == ["the answer has 5 words; allowed 0-4"]
    missing = _check(skill, "not json at all")
    assert "field 'tags' is missing (or the answer is not JSON)" in missing.problems


def test_regex_rules_match_and_must_not_match_with_a_time_limit():
    skill = _skill(
        quality_gate={
            "regex": [
                {"pattern": r"^INV-\d+$", "field": "number", "message": "numbers start INV-"},
                {"pattern": "(?i)lorem", "must": "not_match"},
            ]
        }
    )
    assert _check(skill, '{"number": "INV-42"}').passed
    report = _check(skill, '{"number": "42", "note": "Lorem"}')
    assert report.problems == ["numbers start INV-", "the answer matches '(?i)lorem'"]
    # a catastrophic pattern against a model's crafted text stops at the time limit
    slow = _skill(quality_gate={"regex": [{"pattern": r"^(a|aa)+$"}]})
    report = _check(slow, "a" * 60 + "!")
    assert not report.passed
    assert "took over" in report.problems[0]


def reject_short(data):
    return [] if len(str(data)) > 10 else ["too short"]


def explode(_data):
    raise RuntimeError("validator bug")


def test_custom_validators_by_import_path():
    ok = _skill(quality_gate={"validator": "test_skill_gate:reject_short"})
    assert _check(ok, "long enough answer").passed
    assert _check(ok, "short").problems == ["too short"]
    broken = _skill(quality_gate={"validator": "test_skill_gate:explode"})
    assert _check(broken, "x").problems == [
        "validator test_skill_gate:explode raised RuntimeError: validator bug"
    ]
    missing = _skill(quality_gate={"validator": "no_such_module:f"})
    assert "No module named 'no_such_module'" in _check(missing, "x").problems[0]


def test_a_model_judge_scores_against_the_rubric():
    skill = _skill(
        quality_gate={"judge": {"model": "j", "rubric": "Mentions the cause.", "threshold": 0.6}}
    )
    ask, asked = _judge_saying('{"score": 0.8, "rationale": "names the cause"}')
    report = run(check_answer(skill, "the disk filled up", "what broke?", ask))
    assert report.passed
    assert report.score == 0.8
    (request,) = asked
    assert request.purpose == "grade"
    assert request.model == "j"
    assert "Mentions the cause." in request.messages[-1].text
    ask, _ = _judge_saying('{"score": 0.2, "rationale": "no cause"}')
    low = run(check_answer(skill, "bad", "q", ask))
    assert not low.passed
    assert low.score == 0.2
    assert low.problems == ["score 0.20 (pass at 0.60): no cause"]
    ask, _ = _judge_saying("I think it is fine")
    unusable = run(check_answer(skill, "x", "q", ask))
    assert not unusable.passed
    assert unusable.problems[0].startswith("the judge's answer is unusable")


def test_the_judge_is_not_asked_about_an_answer_that_already_failed():
    skill = _skill(quality_gate={"counts": [{"unit": "words", "max": 1}],
                                 "judge": {"rubric": "r"}})  # fmt: skip
    report = _check(skill, "two words")
    assert [c.name for c in report.checks] == ["not_empty", "count"]


@pytest.mark.parametrize("said", ['{"score": 1.5}', '{"score": true}', "[]", '{"score": "0.5"}'])
def test_parse_grade_refuses_out_of_range_or_mistyped_scores(said):
    with pytest.raises(ValueError, match=r"not JSON|not a number"):
        parse_grade(said)


def test_the_gate_loop_retries_with_the_problems_then_passes():
    skill = _skill(quality_gate={"regex": [{"pattern": r"\d"}], "max_retries": 2})
    produced = []

    async def produce(attempt, previous, feedback):
        produced.append((attempt, previous, feedback))
        return ("no number" if attempt == 0 else "it is 42"), []

    result = run(gated(skill, "q", produce, _no_model))
    assert result.answer == "it is 42"
    assert result.report.passed
    assert result.report.retries == 1
    assert produced[1][1] == "no number"
    assert "the answer does not match" in produced[1][2]


def test_the_gate_loop_gives_up_after_its_retries_with_every_check():
    skill = _skill(quality_gate={"regex": [{"pattern": r"\d"}], "max_retries": 1})

    async def produce(attempt, previous, feedback):
        return "never a number", []

    result = run(gated(skill, "q", produce, _no_model))
    assert not result.report.passed
    assert result.report.retries == 1
    assert [c.name for c in result.report.checks] == ["not_empty", "regex"]


def test_input_is_checked_against_the_input_schema_naming_the_fields():
    skill = _skill(input_schema={"type": "object", "properties": {"text": {"type": "string"},
                                 "n": {"type": "integer"}}, "required": ["text"]})  # fmt: skip
    check_input(skill, {"text": "hi", "n": 2})
    with pytest.raises(InvalidInput) as caught:
        check_input(skill, {"n": "two"})
    assert caught.value.detail["fields"] == ["<root>", "n"]
    assert "'text' is a required property" in caught.value.message
    with pytest.raises(InvalidInput, match="send it as 'input'"):
        check_input(skill, None)
    check_input(_skill(), None)  # no schema: anything goes
    assert request_text("Summarize", {"text": "x"}).startswith("Summarize\n\nInput (JSON):")


def test_standard_output_normalizes_what_the_schema_types():
    schema = {
        "type": "object",
        "properties": {
            "total": {"type": "number"},
            "paid": {"type": "boolean"},
            "due": {"type": "string", "format": "date"},
            "at": {"type": "string", "format": "date-time"},
            "level": {"enum": ["Low", "High"]},
            "count": {"type": "integer"},
            "items": {"type": "array", "items": {"$ref": "#/$defs/n"}},
        },
        "$defs": {"n": {"type": "number"}},
    }
    data = {
        "total": "1,234.50", "paid": "Yes", "due": "June 1, 2024", "level": " high ",
        "count": 3.0, "items": ["2", "x"], "at": "2024-06-01T10:00:00Z", "other": "kept",
    }  # fmt: skip
    assert normalize(data, schema) == {
        "total": 1234.5, "paid": True, "due": "2024-06-01", "level": "High", "count": 3,
        "items": [2.0, "x"], "at": "2024-06-01T10:00:00+00:00", "other": "kept",
    }  # fmt: skip
    assert normalize({"paid": "maybe", "due": "soonish"}, schema) == {
        "paid": "maybe",
        "due": "soonish",
    }
    result = JobResult(
        job_id="j", task="t", team="skill.s", status="succeeded",
        answer='```json\n{"total": "7"}\n```', timings=Timings(submitted_at=1.0, finished_at=2.0),
    )  # fmt: skip
    out = standard_output(result, skill=_skill(), schema=schema)
    assert (out.skill, out.version, out.data, out.produced_at) == ("s", "1", {"total": 7.0}, 2.0)
    plain = standard_output(result.model_copy(update={"answer": "plain words"}))
    assert plain.data is None
    assert plain.text == "plain words"
    assert plain.skill is None


def test_offline_answers_take_the_shape_of_the_schema():
    schema = {
        "type": "object",
        "properties": {
            "sentiment": {"enum": ["positive", "negative", "neutral"]},
            "confidence": {"type": "number", "minimum": 0, "maximum": 1},
            "reasons": {"type": "array", "items": {"type": "string"}, "maxItems": 2},
            "ok": {"type": "boolean"},
        },
    }
    data = json.loads(shaped(schema, "Very negative review. Terrible service; 5 stars never."))
    assert data["sentiment"] == "negative"
    assert data["confidence"] == 0.5  # bounded, and not named in the text: the middle
    assert len(data["reasons"]) == 2
    assert data["ok"] is False
    said = json.loads(
        grade("Rubric:\nNames the failed database\n\nRequest:\nx\n\nAnswer:\nThe database failed.")
    )
    assert said["score"] == pytest.approx(2 / 3, abs=1e-3)


def test_a_direct_skill_runs_offline_to_a_schema_shaped_answer():
    skill = _skill(
        prompt={"instructions": "Classify the sentiment of the customer review."},
        output_schema={
            "type": "object",
            "properties": {"sentiment": {"enum": ["positive", "negative"]}},
            "required": ["sentiment"],
        },
    )
    # the offline model picks the enum value that shares the most words with its answer
    request = direct_request(skill, "A negative review: the support was slow. I want a refund.")
    answer = run(OfflineProvider().complete(request))
    assert json.loads(answer.text) == {"sentiment": "negative"}
    retry = direct_request(skill, "x", (ChatMessage(role="assistant", content="a"),
                                        ChatMessage(role="user", content="fix")))  # fmt: skip
    assert [m.role for m in retry.messages] == ["system", "user", "assistant", "user"]
    graded = run(
        OfflineProvider().complete(
            grade_request(
                skill.model_copy(update={}).quality_gate.judge or _judge(),
                "the review is negative",
                "q",
            )
        )
    )
    assert 0.0 <= json.loads(graded.text)["score"] <= 1.0


def _judge():
    from raytroupe.protocols.skill import JudgeSpec  # noqa: PLC0415

    return JudgeSpec(rubric="says negative review")


def test_offline_shaping_finds_each_field_after_its_name():
    schema = {
        "type": "object",
        "properties": {
            "invoice_number": {"type": "string"},
            "total": {"type": "number"},
            "due_date": {"type": "string", "format": "date"},
            "confidence": {"type": "number", "minimum": 0, "maximum": 1},
        },
    }
    text = "Invoice INV-2024-117 from Acme: total 1,250.00 EUR, due July 15, 2025."
    assert json.loads(shaped(schema, text)) == {
        "invoice_number": "INV-2024-117",
        "total": 1250.0,  # not the 2024 of the invoice's number
        "due_date": "2025-07-15",
        "confidence": 0.5,  # no number after its name: the middle of its bounds
    }
    said = {"type": "object", "properties": {"mood": {"enum": ["positive", "negative"]}}}
    question = "Is it positive or negative? 'A negative surprise.'"
    assert json.loads(shaped(said, question)) == {"mood": "negative"}  # the question aside


def _job_result(status="failed", answer="no number", job_id="job-1"):
    from raytroupe.protocols import ErrorCode, ErrorPayload  # noqa: PLC0415

    error = ErrorPayload(code=ErrorCode.QUALITY_GATE, message="failed its gate")
    return JobResult(job_id=job_id, task="t", team="skill.s", status=status, answer=answer,
                     error=error if status == "failed" else None,
                     timings=Timings(submitted_at=1.0, finished_at=2.0))  # fmt: skip


def test_reflection_is_due_as_the_policy_says_and_sampled_by_job():
    from raytroupe.actors.skills.reflect import reflection_due  # noqa: PLC0415
    from raytroupe.protocols.quality import QualityReport  # noqa: PLC0415

    def skill(**policy):
        return _skill(reflection=policy)

    low = QualityReport(passed=True, score=0.5)
    high = QualityReport(passed=True, score=0.9)
    ok, failed = _job_result("succeeded", "42"), _job_result()
    assert not reflection_due(skill(), failed, None)
    assert reflection_due(skill(when="failure"), failed, None)
    assert not reflection_due(skill(when="failure"), ok, low)
    assert reflection_due(skill(when="low_score", below=0.7), ok, low)
    assert not reflection_due(skill(when="low_score", below=0.7), ok, high)
    assert reflection_due(skill(when="always"), ok, high)
    half = skill(when="always", sample=0.5)
    picked = [reflection_due(half, _job_result("succeeded", job_id=f"job-{n}"), high)
              for n in range(2000)]  # fmt: skip
    assert 0.45 < sum(picked) / 2000 < 0.55
    assert picked == [reflection_due(half, _job_result("succeeded", job_id=f"job-{n}"), high)
                      for n in range(2000)]  # deterministic by job id  # fmt: skip


def test_lessons_reach_a_direct_calls_prompt_and_a_react_subtask():
    from raytroupe.actors.skills.reflect import LESSONS_HEADING, reflect_request  # noqa: PLC0415
    from raytroupe.actors.skills.run import react_plan  # noqa: PLC0415

    skill = _skill(prompt={"instructions": "Give the total of the invoice."})
    call = direct_request(skill, "Invoice 7: total 12.", lessons=("Say the currency.",))
    assert [m.role for m in call.messages] == ["system", "system", "user"]
    assert call.messages[1].text == f"{LESSONS_HEADING}\n- Say the currency."
    answer = run(OfflineProvider().complete(call))
    assert answer.text == "Invoice 7: total 12."  # the skill's prompt, not the lessons, guides it
    plan = react_plan("What is 2 + 2?", 0, None, None, ("Use the calculator.",))
    assert plan.subtasks[0].instructions.startswith(f"{LESSONS_HEADING}\n- Use the calculator.")
    reflect = reflect_request(skill, "Invoice 7: total 12.", _job_result(), None)
    lesson = run(OfflineProvider().complete(reflect)).text
    assert lesson == (
        "A request like 'Invoice 7: total 12.' ended failed: failed its gate. "
        "Next time, check for that before answering."
    )
