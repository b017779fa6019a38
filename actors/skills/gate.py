"""A skill's quality gate: every check of :class:`QualityGateSpec` on one answer.

Checks, in order (each a :class:`QualityCheck` in the report, passed or not):

- ``not_empty``; with an output schema or required fields, ``schema`` and ``required``
  (:func:`raytroupe.actors.answer_gate.gate`: the answer must be JSON, a fenced block counts);
- ``count``: words of the text or of a field, items of a list field, within bounds;
- ``regex``: a pattern that must (or must not) match the text or a field, matched with a
  timeout (the pattern is the operator's, the text a model's: no catastrophic backtracking
  can hold the orchestrator);
- ``validator``: the operator's function, by import path, given the answer's JSON (or its
  text); it returns the problems (an empty list passes) or raises;
- ``judge``: a model (purpose ``grade``) scores the answer 0-1 against the rubric and says
  why; it passes at ``threshold``. An answer it cannot read fails the check, named so.

The report's score is the judge's when there is one, else the share of checks passed.
"""

from __future__ import annotations

import importlib
import json
import re
from collections.abc import Awaitable, Callable
from typing import Any, Final

import structlog

from raytroupe.actors.answer_gate import gate, load_json
from raytroupe.protocols import Budget, ChatMessage, LLMRequest, LLMResponse
from raytroupe.protocols.bounded import PATTERN_TIMEOUT_S, search
from raytroupe.protocols.json_data import JsonSchema
from raytroupe.protocols.quality import QualityCheck, QualityReport
from raytroupe.protocols.skill import CountRule, JudgeSpec, RegexRule, SkillSpec

__all__ = ["GRADE_SCHEMA", "check_answer", "field_at", "grade_request", "graded", "parse_grade"]

log = structlog.get_logger("raytroupe.skills")

Ask = Callable[[LLMRequest], Awaitable[LLMResponse]]

_WORD: Final = re.compile(r"\S+")
_GRADER: Final = (
    "You grade answers against a rubric. Read the rubric, the request and the answer; score "
    "how well the answer meets the rubric from 0 (not at all) to 1 (fully), and say why in one "
    "sentence. Reply with JSON only."
)
GRADE_SCHEMA: Final[JsonSchema] = {
    "type": "object",
    "properties": {
        "score": {"type": "number", "minimum": 0, "maximum": 1},
        "rationale": {"type": "string"},
    },
    "required": ["score", "rationale"],
    "additionalProperties": False,
}
RUBRIC_HEADING: Final = "Rubric:"
ANSWER_HEADING: Final = "Answer:"


async def check_answer(
    skill: SkillSpec, answer: str, request: str, ask: Ask, *, budget: Budget | None = None
) -> QualityReport:
    """The gate's report on ``answer`` to ``request``.

    Raises:
        TroupeError: the judge's model call failed (budget, provider): not the answer's fault.
    """
    spec = skill.quality_gate
    checks = [_basic(answer, skill)]
    data = _data(answer) if skill.output_schema is not None or _needs_data(skill) else None
    checks += [_count(rule, answer, data) for rule in spec.counts]
    checks += [_regex(rule, answer, data) for rule in spec.regex]
    if spec.validator is not None:
        checks.append(_validate(spec.validator, answer, data))
    if spec.judge is not None and all(c.passed for c in checks):  # judge only what may pass
        checks.append(await _judge(spec.judge, answer, request, ask, budget))
    judged = next((c.score for c in checks if c.name == "judge" and c.score is not None), None)
    passed = all(c.passed for c in checks)
    score = judged if judged is not None else sum(c.passed for c in checks) / len(checks)
    return QualityReport(passed=passed, score=round(score, 4), checks=tuple(checks))


def _basic(answer: str, skill: SkillSpec) -> QualityCheck:
    problems = gate(answer, skill.output_schema, skill.quality_gate.required)
    if not answer.strip():
        return QualityCheck(name="not_empty", passed=False, detail="the answer is empty")
    name = "schema" if skill.output_schema is not None else "required"
    if skill.output_schema is None and not skill.quality_gate.required:
        name = "not_empty"
    return QualityCheck(name=name, passed=not problems, detail="; ".join(problems))


def _needs_data(skill: SkillSpec) -> bool:
    spec = skill.quality_gate
    return bool(
        spec.required
        or spec.validator
        or any(r.field for r in spec.counts)
        or any(r.field for r in spec.regex)
    )


def _data(answer: str) -> Any:
    try:
        return load_json(answer)
    except ValueError:
        return None


def field_at(data: Any, path: str) -> tuple[bool, Any]:
    """(found, value) of a dotted path (``a.b.0``) in the answer's JSON."""
    node = data
    for part in path.split("."):
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return False, None
    return True, node


def _target(field: str | None, answer: str, data: Any) -> tuple[str, Any, str | None]:
    """(what it is called, its value, the problem if it cannot be had)."""
    if field is None:
        return "the answer", answer, None
    found, value = field_at(data, field) if data is not None else (False, None)
    if not found:
        return f"field {field!r}", None, f"field {field!r} is missing (or the answer is not JSON)"
    return f"field {field!r}", value, None


def _count(rule: CountRule, answer: str, data: Any) -> QualityCheck:
    what, value, missing = _target(rule.field, answer, data)
    if missing:
        return QualityCheck(name="count", passed=False, detail=missing)
    if rule.unit == "items":
        if not isinstance(value, list):
            return QualityCheck(name="count", passed=False, detail=f"{what} is not a list")
        n = len(value)
    else:
        text = value if isinstance(value, str) else json.dumps(value)
        n = len(_WORD.findall(text))
    bounds = f"{rule.min if rule.min is not None else 0}-{rule.max if rule.max is not None else ''}"
    low = rule.min is not None and n < rule.min
    high = rule.max is not None and n > rule.max
    said = f"{what} has {n} {rule.unit}"
    if low or high:
        return QualityCheck(name="count", passed=False, detail=f"{said}; allowed {bounds}")
    return QualityCheck(name="count", passed=True, detail=said)


def _regex(rule: RegexRule, answer: str, data: Any) -> QualityCheck:
    what, value, missing = _target(rule.field, answer, data)
    if missing:
        return QualityCheck(name="regex", passed=False, detail=missing)
    text = value if isinstance(value, str) else json.dumps(value)
    found = search(rule.pattern, text)
    if found is None:
        return QualityCheck(
            name="regex",
            passed=False,
            detail=f"pattern {rule.pattern!r} took over {PATTERN_TIMEOUT_S} s on {what}",
        )
    passed = found if rule.must == "match" else not found
    default = f"{what} {'does not match' if rule.must == 'match' else 'matches'} {rule.pattern!r}"
    return QualityCheck(
        name="regex", passed=passed, detail="" if passed else rule.message or default
    )


def _validate(path: str, answer: str, data: Any) -> QualityCheck:
    module, _, name = path.partition(":")
    try:
        function = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as e:
        return QualityCheck(name="validator", passed=False, detail=f"validator {path}: {e}")
    try:
        problems = function(data if data is not None else answer)
    except Exception as e:  # noqa: BLE001 - the operator's code: its failure is a check's
        return QualityCheck(
            name="validator",
            passed=False,
            detail=f"validator {path} raised {type(e).__name__}: {e}",
        )
    if problems is None or problems is True:
        problems = []
    if problems is False:
        problems = [f"validator {path} refused the answer"]
    if isinstance(problems, str):
        problems = [problems]
    listed = [str(p) for p in problems]
    return QualityCheck(name="validator", passed=not listed, detail="; ".join(listed))


def grade_request(judge: JudgeSpec, answer: str, request: str) -> LLMRequest:
    """The request that asks the judge model to score ``answer`` against the rubric."""
    prompt = (
        f"{RUBRIC_HEADING}\n{judge.rubric}\n\nRequest:\n{request}\n\n{ANSWER_HEADING}\n{answer}"
    )
    return LLMRequest(
        model=judge.model,
        purpose="grade",
        messages=(
            ChatMessage(role="system", content=_GRADER),
            ChatMessage(role="user", content=prompt),
        ),
        response_format=GRADE_SCHEMA,
        temperature=0.0,
    )


def parse_grade(text: str) -> tuple[float, str]:
    """(score, rationale) from a judge's answer.

    Raises:
        ValueError: not JSON with a number ``score`` in 0-1.
    """
    data = load_json(text)
    score = data.get("score") if isinstance(data, dict) else None
    if isinstance(score, bool) or not isinstance(score, int | float) or not 0 <= score <= 1:
        raise ValueError(f"the judge's score is not a number from 0 to 1: {score!r}")
    rationale = data.get("rationale", "")
    return float(score), str(rationale).strip()


async def graded(
    judge: JudgeSpec, answer: str, request: str, ask: Ask, budget: Budget | None = None
) -> tuple[float, str]:
    """(score, rationale) the judge model gives ``answer`` to ``request``.

    Raises:
        ValueError: the judge's answer cannot be read.
        TroupeError: its model call failed.
    """
    call = grade_request(judge, answer, request)
    if budget is not None:
        call = call.model_copy(update={"budget": budget})
    return parse_grade((await ask(call)).text)


async def _judge(
    judge: JudgeSpec, answer: str, request: str, ask: Ask, budget: Budget | None
) -> QualityCheck:
    try:
        score, rationale = await graded(judge, answer, request, ask, budget)
    except ValueError as e:
        log.warning("judge_unusable", model=judge.model, error=str(e))
        return QualityCheck(
            name="judge", passed=False, detail=f"the judge's answer is unusable: {e}"
        )
    passed = score >= judge.threshold
    said = f"score {score:.2f} (pass at {judge.threshold:.2f}): {rationale}"
    return QualityCheck(name="judge", passed=passed, detail=said, score=score)
