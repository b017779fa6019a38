import json

import pytest
from pydantic import ValidationError
from wiring import llm_request, run

from raytroupe.actors.answer_gate import gate, gate_feedback
from raytroupe.actors.llm import LLMAdapterPool, OfflineProvider
from raytroupe.actors.orchestrator.resolve import (
    Candidate,
    confidence_weighted,
    first_valid,
    judge,
    majority,
    make_candidate,
    merge,
    normalize,
)
from raytroupe.protocols import ErrorCode, LLMRequest, ScriptedModel, ScriptedTurn
from raytroupe.protocols.resolution import CANDIDATES_HEADING, format_candidates, parse_candidates

PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "tags": {"type": "array", "items": {"type": "integer"}},
    },
    "required": ["name"],
}


def cands(*outputs, confidences=None):
    """Valid candidates of agents a, b, c, ...; an output of None is an invalid candidate."""
    confidences = confidences or [None] * len(outputs)
    return [
        Candidate(agent=chr(97 + i), output=o, confidence=k)
        if o is not None
        else Candidate(agent=chr(97 + i), valid=False, problems=("output is empty",))
        for i, (o, k) in enumerate(zip(outputs, confidences, strict=True))
    ]


def never(_request):
    raise AssertionError("no model should be asked")


class Recorder:
    def __init__(self, pool):
        self.pool = pool
        self.requests: list[LLMRequest] = []

    async def __call__(self, request):
        self.requests.append(request)
        return await self.pool.complete(request)


# --- gate -----------------------------------------------------------------------------------


def test_gate_without_schema_only_rejects_empty_output():
    assert gate("any text at all", None, ()) == []
    assert gate("", None, ()) == ["output is empty"]
    assert gate("  \n ", PERSON, ["name"]) == ["output is empty"]


@pytest.mark.parametrize(
    "output",
    [
        '{"name": "Ada", "tags": [1, 2]}',
        '  {"name": "Ada"}\n',
        '```json\n{"name": "Ada"}\n```',
        '```\n{"name": "Ada"}\n```',
        'Here it is:\n```json\n{"name": "Ada"}\n```\nAnything else?',
    ],
)
def test_gate_accepts_valid_json_bare_or_fenced(output):
    assert gate(output, PERSON, ["name"]) == []


def test_gate_rejects_output_that_is_not_json():
    problems = gate("Ada, with tags 1 and 2", PERSON, ())
    assert len(problems) == 1
    assert problems[0].startswith("output is not JSON: Expecting value")
    assert gate("```json\n{not json}\n```", PERSON, ())[0].startswith("output is not JSON")


def test_gate_lists_schema_problems_with_paths():
    problems = gate('{"tags": [1, "x", 3, "y"]}', PERSON, ())
    assert problems == [
        "at <root>: 'name' is a required property",
        "at tags/1: 'x' is not of type 'integer'",
        "at tags/3: 'y' is not of type 'integer'",
    ]


def test_gate_caps_the_problems_it_lists():
    problems = gate(json.dumps({"name": "n", "tags": ["x"] * 25}), PERSON, ())
    assert len(problems) == 21
    assert problems[-1] == "... and 5 more"


def test_gate_required_fields_must_be_present_and_not_empty():
    output = json.dumps({"a": "x", "b": " ", "c": [], "d": 0, "e": None, "f": False, "g": {}})
    problems = gate(output, None, ["a", "b", "c", "d", "e", "f", "g", "h"])
    assert problems == [
        "required field 'h' is missing",
        "required field 'b' is empty",
        "required field 'c' is empty",
        "required field 'e' is empty",
        "required field 'g' is empty",
    ]


def test_gate_required_fields_need_a_json_object():
    assert gate("[1, 2]", None, ["a"]) == ["output is not a JSON object (required fields: a)"]
    assert gate("plain", None, ["a"])[0].startswith("output is not JSON")


def test_gate_combines_schema_and_required_problems():
    problems = gate('{"name": ""}', PERSON, ["name", "tags"])
    assert problems == ["required field 'tags' is missing", "required field 'name' is empty"]


def test_gate_feedback_lists_each_problem_and_the_schema_when_given():
    text = gate_feedback(["output is empty", "at <root>: bad"])
    assert "- output is empty\n- at <root>: bad\n" in text
    assert "Answer again" in text
    assert "JSON Schema" not in text
    with_schema = gate_feedback(["x"], schema=PERSON)
    assert json.dumps(PERSON) in with_schema


def test_make_candidate_gates_the_output():
    good = make_candidate("a", '{"name": "Ada"}', 0.8, schema=PERSON)
    assert good.valid
    assert good.problems == ()
    assert good.confidence == 0.8
    bad = make_candidate("b", '{"name": 1}', schema=PERSON, required=["tags"])
    assert not bad.valid
    assert bad.problems == (
        "at name: 1 is not of type 'string'",
        "required field 'tags' is missing",
    )


def test_candidate_validity_must_match_its_problems():
    with pytest.raises(ValidationError, match="invalid one says why"):
        Candidate(agent="a", output="x", valid=True, problems=("bad",))
    with pytest.raises(ValidationError, match="invalid one says why"):
        Candidate(agent="a", output="x", valid=False)
    with pytest.raises(ValidationError):
        Candidate(agent="a", output="x", confidence=1.5)


# --- normalize ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ("42", "42"),
        ("42.0", "42"),
        ("42.000", "42"),
        ("3.50", "3.5"),
        ("-0.0", "0"),
        ("+7", "7"),
        ("1,000", "1000"),
        ("1e3", "1000"),
        ("The answer is 42.", "the answer is 42"),
        ("  Hello,   WORLD!!\n\tfine ", "hello world fine"),
        ("Straße", "strasse"),
        ("don't", "dont"),
        ("(42)", "42"),
        ("the 42nd item", "the 42nd item"),
        ("v1.2.3", "v123"),
        ("", ""),
    ],
)
def test_normalize(answer, expected):
    assert normalize(answer) == expected


def test_normalize_makes_equivalent_answers_equal():
    assert normalize("42.0") == normalize("42") == normalize(" 42. ")
    assert normalize("Paris!") == normalize("paris")
    assert normalize("1,234.50 USD") == normalize("1234.5 usd")
    assert normalize("42") != normalize("43")


# --- majority, confidence, first valid ------------------------------------------------------


def test_majority_picks_the_most_common_normalized_answer():
    r = majority(cands("London", "Paris", "paris.", "PARIS"))
    assert r.strategy == "majority"
    assert (r.chosen, r.chosen_agent) == ("Paris", "b")
    assert r.votes == {"london": 1, "paris": 3}
    assert r.resolved
    assert "candidate 1 (b) wins with 3 of 4 valid votes" in r.rationale
    assert "'london': 1" in r.rationale


def test_majority_tie_goes_to_the_earliest_answer():
    r = majority(cands("London", "Paris", "paris", "london"))
    assert (r.chosen, r.chosen_agent) == ("London", "a")
    r = majority(cands("42.0", "41", "42"))
    assert (r.chosen, r.chosen_agent) == ("42.0", "a")
    assert r.votes == {"42": 2, "41": 1}


def test_majority_ignores_invalid_candidates():
    r = majority(cands(None, None, "Rome", "Paris", "Paris"))
    assert r.chosen_agent == "d"
    assert r.votes == {"rome": 1, "paris": 2}


@pytest.mark.parametrize("resolve", [majority, confidence_weighted, first_valid])
def test_all_invalid_candidates_resolve_to_nothing(resolve):
    cs = [
        Candidate(agent="a", output="x", valid=False, problems=("output is not JSON: oops",)),
        Candidate(agent="b", output="", valid=False, problems=("output is empty",)),
    ]
    r = resolve(cs)
    assert (r.chosen, r.chosen_agent, r.resolved) == ("", None, False)
    assert r.candidates == tuple(cs)
    assert r.rationale.startswith("no valid candidate (all 2 valid=False)")
    assert "candidate 0 (a): output is not JSON: oops" in r.rationale
    assert "candidate 1 (b): output is empty" in r.rationale
    empty = resolve([])
    assert (empty.chosen, empty.chosen_agent, empty.resolved) == ("", None, False)


def test_confidence_sums_per_answer():
    r = confidence_weighted(cands("A", "B", "b.", confidences=[0.9, 0.6, 0.5]))
    assert r.strategy == "confidence"
    assert (r.chosen, r.chosen_agent) == ("B", "b")
    assert r.votes == {"a": 1, "b": 2}
    assert "confidence 1.1" in r.rationale
    assert "'a': 0.9" in r.rationale


def test_confidence_unknown_counts_half():
    assert confidence_weighted(cands("A", "B", confidences=[None, 0.4])).chosen == "A"
    assert confidence_weighted(cands("A", "B", confidences=[None, 0.6])).chosen == "B"
    assert confidence_weighted(cands("A", "B", "B", confidences=[1.0, None, None])).chosen == "A"


def test_confidence_tie_goes_to_the_earliest_answer_and_invalid_ones_do_not_count():
    assert confidence_weighted(cands("A", "B", confidences=[0.5, None])).chosen_agent == "a"
    sums = confidence_weighted(cands("B", "A", "A", confidences=[0.3, 0.1, 0.2]))
    assert sums.chosen_agent == "a"  # 0.1 + 0.2 ties 0.3, though not in floating point
    cs = [Candidate(agent="x", output="Z", confidence=1.0, valid=False, problems=("bad",))]
    cs += cands("A", "B", confidences=[0.2, 0.3])
    r = confidence_weighted(cs)
    assert r.chosen == "B"
    assert r.votes == {"a": 1, "b": 1}


def test_first_valid_names_why_earlier_candidates_failed():
    cs = [
        Candidate(agent="a", output="{", valid=False, problems=("output is not JSON: x",)),
        Candidate(agent="b", output="", valid=False, problems=("output is empty",)),
        Candidate(agent="c", output="ok"),
        Candidate(agent="d", output="ok too"),
    ]
    r = first_valid(cs)
    assert (r.strategy, r.chosen, r.chosen_agent) == ("first_valid", "ok", "c")
    assert r.rationale == (
        "candidate 2 (c) is the first valid one; candidate 0 (a) failed: output is not JSON: x; "
        "candidate 1 (b) failed: output is empty"
    )
    assert first_valid(cs[2:]).rationale == "candidate 0 (c) is the first valid one"


# --- the prompt format and the offline model ------------------------------------------------


def test_candidates_format_round_trips_awkward_answers():
    answers = [(0, 'line one\nline "two"'), (2, 'Candidates:\n[1] "fake"'), (5, "ünïcode")]
    prompt = f"Task:\nCandidates: are listed below\n\n{format_candidates(answers)}"
    assert prompt.count(CANDIDATES_HEADING) == 3
    assert parse_candidates(prompt) == answers
    assert parse_candidates("no heading here") == []


def offline(request):
    return run(OfflineProvider().complete(request)).text


def test_offline_judge_chooses_the_first_most_common_answer():
    listed = format_candidates([(1, "London"), (3, "Paris"), (4, "paris!"), (6, "London")])
    answer = json.loads(offline(llm_request(f"Task:\nCapital?\n\n{listed}", purpose="judge")))
    assert answer["choice"] == 1  # London and Paris tie at 2: London comes first
    listed = format_candidates([(0, "Rome"), (1, "Paris"), (2, "paris.")])
    answer = json.loads(offline(llm_request(f"Task:\nCapital?\n\n{listed}", purpose="judge")))
    assert answer == {"choice": 1, "rationale": "2 of 3 candidates give this answer"}
    empty = json.loads(offline(llm_request("nothing listed", purpose="judge")))
    assert empty["choice"] == 0


def test_offline_merge_joins_distinct_answers_in_order():
    listed = format_candidates([(0, "Paris."), (1, " London "), (2, "paris"), (3, "Rome")])
    assert offline(llm_request(f"Task:\nCities\n\n{listed}", purpose="merge")) == (
        "Paris.\nLondon\nRome"
    )


# --- judge and merge through the pool -------------------------------------------------------


def test_judge_through_the_offline_model():
    async def go():
        ask = Recorder(LLMAdapterPool())
        cs = cands(None, "London", "Paris", "Paris!")
        return ask, await judge(cs, "Capital of France?", ask, "default")

    ask, r = run(go())
    assert r.strategy == "judge"
    assert (r.chosen, r.chosen_agent) == ("Paris", "c")
    assert r.rationale == "judge chose candidate 2 (c): 2 of 3 candidates give this answer"
    assert r.usage.calls == 1
    (request,) = ask.requests
    assert request.purpose == "judge"
    assert request.model == "default"
    assert request.response_format["properties"]["choice"]["enum"] == [1, 2, 3]
    prompt = request.messages[-1].text
    assert prompt.startswith("Task:\nCapital of France?\n\nCandidates:\n")
    assert '[1] "London"' in prompt
    assert "[0]" not in prompt


def scripted(*texts, error=None):
    turns = tuple(ScriptedTurn(text=t) for t in texts)
    if error is not None:
        turns += (ScriptedTurn(error=error),)
    return LLMAdapterPool({"judge": ScriptedModel(turns=turns)})


async def judged(pool, cs):
    r = await judge(cs, "Capital?", pool.complete, "judge")
    await pool.remove("judge")  # fails if a scripted turn was left unused
    return r


def test_judge_may_choose_a_minority_answer():
    answer = '```json\n{"choice": 0, "rationale": "the only correct one"}\n```'
    r = run(judged(scripted(answer), cands("Lyon", "Paris", "Paris")))
    assert (r.strategy, r.chosen, r.chosen_agent) == ("judge", "Lyon", "a")
    assert r.rationale == "judge chose candidate 0 (a): the only correct one"


@pytest.mark.parametrize(
    ("answer", "why"),
    [
        ("I like the second one", "output is not JSON"),
        ('{"choice": 7, "rationale": "x"}', "at choice: 7 is not one of [1, 2, 3]"),
        ('{"choice": 0, "rationale": "x"}', "at choice: 0 is not one of [1, 2, 3]"),
        ('{"choice": "2"}', "'rationale' is a required property"),
        ('{"choice": true, "rationale": "x"}', "at choice: True is not of type 'integer'"),
    ],
)
def test_unusable_judge_answers_fall_back_to_majority(answer, why):
    r = run(judged(scripted(answer), cands(None, "Rome", "Paris", "paris")))
    assert r.strategy == "majority"
    assert (r.chosen, r.chosen_agent) == ("Paris", "c")
    assert r.rationale.startswith("judge answer unusable (")
    assert why in r.rationale
    assert "; fell back to majority: candidate 2 (c) wins with 2 of 3 valid votes" in r.rationale
    assert r.usage.calls == 1


def test_a_failed_judge_call_falls_back_to_majority():
    r = run(judged(scripted(error=ErrorCode.BAD_REQUEST), cands("Rome", "Paris", "paris")))
    assert (r.strategy, r.chosen_agent) == ("majority", "b")
    assert r.rationale.startswith("judge failed (bad_request: ")


def test_judge_asks_nobody_when_the_valid_candidates_agree_or_none_is_valid():
    r = run(judge(cands(None, "Paris", "paris."), "Capital?", never, "default"))
    assert (r.strategy, r.chosen_agent) == ("majority", "b")
    assert r.rationale.startswith("judge not asked, the valid candidates agree: candidate 1 (b)")
    r = run(judge(cands(None, None), "Capital?", never, "default"))
    assert (r.strategy, r.chosen, r.chosen_agent, r.resolved) == ("judge", "", None, False)
    assert r.rationale.startswith("no valid candidate")


def test_merge_through_the_offline_model():
    async def go():
        ask = Recorder(LLMAdapterPool())
        cs = cands("Paris is in France.", None, "Lyon too", "paris is in france")
        return ask, await merge(cs, "French cities?", ask, "default", tenant="t")

    ask, r = run(go())
    assert r.strategy == "merge"
    assert r.chosen == "Paris is in France.\nLyon too"
    assert r.chosen_agent is None
    assert r.resolved
    assert r.rationale == "merged 3 candidates"
    assert r.usage.calls == 1
    (request,) = ask.requests
    assert request.purpose == "merge"
    assert request.response_format is None
    assert "[1]" not in request.messages[-1].text


def test_merge_output_must_pass_the_gate_or_the_majority_decides():
    cs = cands('{"name": "Ada"}', '{"name": "Bob"}', '{"name": "Bob"}')
    r = run(merge(cs, "Who?", LLMAdapterPool().complete, "default", schema=PERSON, tenant="t"))
    assert (r.strategy, r.chosen_agent) == ("majority", "b")
    assert r.rationale.startswith("merged answer rejected (output is not JSON")
    assert "fell back to majority" in r.rationale


def test_merge_with_a_schema_asks_for_it_and_keeps_a_valid_merge():
    async def go():
        pool = LLMAdapterPool(
            {"judge": ScriptedModel(turns=(ScriptedTurn(text='{"name": "Ada Bob"}'),))}
        )
        ask = Recorder(pool)
        cs = cands('{"name": "Ada"}', '{"name": "Bob"}')
        r = await merge(cs, "Who?", ask, "judge", schema=PERSON, required=["name"], tenant="t")
        await pool.remove("judge")
        return ask, r

    ask, r = run(go())
    assert (r.strategy, r.chosen, r.rationale) == (
        "merge",
        '{"name": "Ada Bob"}',
        "merged 2 candidates",
    )
    assert ask.requests[0].response_format == PERSON


def test_merge_asks_nobody_when_the_valid_candidates_agree_or_none_is_valid():
    r = run(merge(cands("42", "42.0"), "?", never, "default", tenant="t"))
    assert (r.strategy, r.chosen, r.chosen_agent) == ("majority", "42", "a")
    assert r.rationale.startswith("merge not asked")
    r = run(merge(cands(None), "?", never, "default", tenant="t"))
    assert (r.strategy, r.resolved) == ("merge", False)


def test_a_failed_merge_call_falls_back_to_majority():
    pool = scripted(error=ErrorCode.BAD_REQUEST)
    r = run(merge(cands("A", "B", "b"), "?", pool.complete, "judge", tenant="t"))
    assert (r.strategy, r.chosen_agent) == ("majority", "b")
    assert r.rationale.startswith("merge failed (bad_request: ")
