"""Scoring one answer against a case's expectations (see :mod:`raytroupe.protocols.evals`).

Each expectation scores 0-1 and passes or not: ``exact`` 1 or 0; ``contains`` the share of
its values held (passing when all are, or one with ``any``); ``regex`` 1 or 0 (matched with
a 0.2 s limit); ``json_schema`` 1 or 0; ``number`` 1 within the tolerance, else 0; ``judge``
the model's score (purpose ``grade``), passing at its threshold; ``custom`` what the
scorer returns (a bool counts as 1 or 0; a number is clipped to 0-1, passing at 0.5). A
scorer that raises, or a judge whose answer cannot be read, scores 0 with the reason. A
case's plain expectations share one time limit, ``EVAL_CASE_WORK_S`` (see
:mod:`raytroupe.protocols.bounded`): past it the case is an error naming the limit.
"""

from __future__ import annotations

import importlib
import json
import re
from collections.abc import Awaitable, Callable
from typing import Any, Final

from raytroupe.actors.answer_gate import load_json
from raytroupe.actors.offload import offloaded
from raytroupe.actors.skills.gate import field_at, graded
from raytroupe.protocols import Budget, LLMRequest, LLMResponse
from raytroupe.protocols.bounded import EVAL_CASE_WORK_S, PATTERN_TIMEOUT_S, search
from raytroupe.protocols.evals import (
    ContainsExpect,
    CustomExpect,
    EvalCase,
    ExactExpect,
    Expectation,
    ExpectationScore,
    JudgeExpect,
    NumberExpect,
    RegexExpect,
    SchemaExpect,
)
from raytroupe.protocols.safe_schema import safe_validator
from raytroupe.protocols.skill import JudgeSpec

__all__ = ["Ask", "score_answer"]

Ask = Callable[[LLMRequest], Awaitable[LLMResponse]]

_NUMBER: Final = re.compile(r"(?<![\w.])-?\d[\d,]*(?:\.\d+)?")
_CUSTOM_PASS: Final = 0.5


async def score_answer(
    case: EvalCase, answer: str, ask: Ask, *, tenant: str, budget: Budget | None = None
) -> tuple[float, bool, tuple[ExpectationScore, ...]]:
    """(score, passed, each expectation's score) of ``answer`` to ``tenant``'s ``case``.

    Every expectation but the judges is one unit of work, run off the event loop in the
    tenant's share within ``EVAL_CASE_WORK_S`` (the patterns and schemas are the tenant's).

    Raises:
        TroupeError: a judge's model call failed (budget, provider): not the answer's fault.
        WorkLimitExceeded: the case's patterns and schemas took over ``EVAL_CASE_WORK_S``.
    """
    plain = await offloaded(
        tenant, EVAL_CASE_WORK_S, "eval_case_work_s", _score_plain, case, answer
    )
    scores = [
        plain[n] if n in plain else await _judged(e, case, answer, ask, budget)
        for n, e in enumerate(case.expect)
    ]
    weights = [e.weight for e in case.expect]
    total = sum(w * s.score for w, s in zip(weights, scores, strict=True)) / sum(weights)
    return round(total, 6), all(s.passed for s in scores), tuple(scores)


def _target(expect: Expectation, answer: str) -> tuple[Any, str | None]:
    """(the value the expectation looks at, why it cannot be had)."""
    if expect.field is None:
        return answer, None
    try:
        data = load_json(answer)
    except ValueError:
        return None, f"the answer is not JSON (looking for {expect.field!r})"
    found, value = field_at(data, expect.field)
    return (value, None) if found else (None, f"field {expect.field!r} is missing")


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def _result(
    expect: Expectation, score: float, *, passed: bool, detail: str = ""
) -> ExpectationScore:
    return ExpectationScore(kind=expect.kind, score=max(0.0, min(1.0, score)), passed=passed,
                            detail=detail)  # fmt: skip


def _fail(expect: Expectation, why: str) -> ExpectationScore:
    return _result(expect, 0.0, passed=False, detail=why)


def _score_plain(case: EvalCase, answer: str) -> dict[int, ExpectationScore]:
    """Each expectation's score but the judges', by its place in the case."""
    return {
        n: _score(e, case, answer)
        for n, e in enumerate(case.expect)
        if not isinstance(e, JudgeExpect)
    }


async def _judged(
    expect: Expectation, case: EvalCase, answer: str, ask: Ask, budget: Budget | None
) -> ExpectationScore:
    assert isinstance(expect, JudgeExpect)  # noqa: S101 - the others are scored plainly
    value, missing = _target(expect, answer)
    if missing is not None:
        return _fail(expect, missing)
    return await _judge(expect, _text(value), case, ask, budget)


def _score(  # noqa: PLR0911 - one return per kind of expectation
    expect: Expectation, case: EvalCase, answer: str
) -> ExpectationScore:
    value, missing = _target(expect, answer)
    if missing is not None:
        return _fail(expect, missing)
    match expect:
        case ExactExpect():
            return _exact(expect, value)
        case ContainsExpect():
            return _contains(expect, _text(value))
        case RegexExpect():
            return _regex(expect, _text(value))
        case SchemaExpect():
            return _schema(expect, value)
        case NumberExpect():
            return _number(expect, value)
        case JudgeExpect():
            raise AssertionError("judges are scored by _judged")  # pragma: no cover
        case CustomExpect():
            return _custom(expect, value, case)


def _exact(expect: ExactExpect, value: Any) -> ExpectationScore:
    if isinstance(expect.value, str) or isinstance(value, str):
        got, want = _text(value).strip(), _text(expect.value).strip()
        if not expect.case_sensitive:
            got, want = got.casefold(), want.casefold()
        same = got == want
    else:
        same = value == expect.value
    return _result(expect, float(same), passed=same,
                   detail="" if same else f"got {_text(value)[:200]!r}")  # fmt: skip


def _contains(expect: ContainsExpect, text: str) -> ExpectationScore:
    hay = text if expect.case_sensitive else text.casefold()
    held = [v for v in expect.values if (v if expect.case_sensitive else v.casefold()) in hay]
    share = len(held) / len(expect.values)
    passed = bool(held) if expect.any else len(held) == len(expect.values)
    missing = [v for v in expect.values if v not in held]
    said = "" if passed else f"missing {missing}"
    return _result(expect, 1.0 if expect.any and held else share, passed=passed, detail=said)


def _regex(expect: RegexExpect, text: str) -> ExpectationScore:
    found = search(expect.pattern, text)
    if found is None:
        return _fail(expect, f"pattern took over {PATTERN_TIMEOUT_S} s")
    said = "" if found else f"no match for {expect.pattern!r}"
    return _result(expect, float(found), passed=found, detail=said)


def _schema(expect: SchemaExpect, value: Any) -> ExpectationScore:
    try:
        data = load_json(value) if isinstance(value, str) else value
    except ValueError as e:
        return _fail(expect, str(e))
    errors = list(safe_validator(expect.schema_).iter_errors(data))
    said = "; ".join(
        f"at {'/'.join(map(str, e.absolute_path)) or '<root>'}: {e.message}" for e in errors[:5]
    )
    return _result(expect, float(not errors), passed=not errors, detail=said)


def _number(expect: NumberExpect, value: Any) -> ExpectationScore:
    if isinstance(value, bool) or not isinstance(value, int | float):
        found = _NUMBER.search(_text(value))
        if found is None:
            return _fail(expect, "no number in the answer")
        value = float(found.group(0).replace(",", ""))
    allowed = max(expect.tolerance, expect.relative * abs(expect.value))
    close = abs(float(value) - expect.value) <= allowed
    said = f"got {value}, want {expect.value} ± {allowed}"
    return _result(expect, float(close), passed=close, detail=said)


async def _judge(
    expect: JudgeExpect, text: str, case: EvalCase, ask: Ask, budget: Budget | None
) -> ExpectationScore:
    spec = JudgeSpec(model=expect.model, rubric=expect.rubric, threshold=expect.threshold)
    try:
        score, rationale = await graded(
            spec, text, case.task or json.dumps(case.input), ask, budget
        )
    except ValueError as e:
        return _fail(expect, f"the judge's answer is unusable: {e}")
    return _result(expect, score, passed=score >= expect.threshold, detail=rationale)


def _custom(expect: CustomExpect, value: Any, case: EvalCase) -> ExpectationScore:
    module, _, name = expect.scorer.partition(":")
    try:
        scorer = getattr(importlib.import_module(module), name)
        said = scorer(value, case)
    except Exception as e:  # noqa: BLE001 - the scorer is user code: its failure is a score
        return _fail(expect, f"scorer {expect.scorer} raised {type(e).__name__}: {e}")
    if isinstance(said, bool):
        return _result(expect, float(said), passed=said)
    if isinstance(said, int | float):
        return _result(expect, float(said), passed=float(said) >= _CUSTOM_PASS)
    return _fail(expect, f"scorer {expect.scorer} returned {type(said).__name__}")
