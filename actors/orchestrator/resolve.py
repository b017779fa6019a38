r"""Conflict resolution for subtasks dispatched redundantly (to k agents).

:func:`make_candidate` gates an agent's answer (:mod:`raytroupe.actors.answer_gate`) into a
:class:`~raytroupe.protocols.resolution.Candidate`; a strategy then picks one
:class:`Resolution`:

- :func:`majority`: the most common normalized answer among valid candidates;
- :func:`confidence_weighted`: the answer with the highest summed confidence (0.5 if unknown);
- :func:`first_valid`: the first candidate that passed the gate;
- :func:`judge`: a model (purpose ``judge``) picks one; an unusable answer falls back to
  majority;
- :func:`merge`: a model (purpose ``merge``) combines them; a failure falls back to majority.

Ties go to the answer given earliest. Invalid candidates never win; with none valid every
strategy returns a Resolution with ``chosen=''``, ``chosen_agent=None`` (``resolved`` False)
and asks no model. Judge and merge ask no model either when fewer than two distinct answers
are valid (the majority decides: it is unanimous).

Judge and merge prompts: a system message, then a user message ``Task:``, the task on the
next lines, a blank line, and the valid candidates as
:func:`raytroupe.protocols.resolution.format_candidates` lists them (indices into ``candidates``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Final, Literal

from raytroupe.actors.answer_gate import checked_gate, gate, load_json
from raytroupe.protocols import Budget, ChatMessage, LLMRequest, LLMResponse, ModelError
from raytroupe.protocols.json_data import JsonSchema
from raytroupe.protocols.resolution import (
    Candidate,
    Resolution,
    ResolutionStrategy,
    format_candidates,
    normalize,
)

__all__ = [
    "Ask",
    "Candidate",
    "Resolution",
    "ResolutionStrategy",
    "confidence_weighted",
    "first_valid",
    "judge",
    "majority",
    "make_candidate",
    "merge",
    "normalize",
]

Ask = Callable[[LLMRequest], Awaitable[LLMResponse]]
"""Sends a model request (``LLMAdapterPool.complete``, or a request through the router)."""

UNKNOWN_CONFIDENCE: Final = 0.5

_JUDGE: Final = (
    "You judge answers. Several agents answered the same task; choose the best answer: "
    "correct, complete and faithful to the task. Reply with JSON only: "
    '{"choice": <the [index] of the best candidate>, "rationale": "<why, briefly>"}.'
)
_MERGE: Final = (
    "You merge answers. Several agents answered the same task; combine their answers into "
    "one: keep what is correct and agreed, resolve contradictions, drop repetition. Reply "
    "with the merged answer only."
)


def make_candidate(
    agent: str,
    output: str,
    confidence: float | None = None,
    *,
    schema: JsonSchema | None = None,
    required: Sequence[str] = (),
    problems: Sequence[str] | None = None,
) -> Candidate:
    """``output`` of ``agent`` as a candidate, gated (``problems``: as gated already)."""
    problems = tuple(gate(output, schema, required) if problems is None else problems)
    return Candidate(
        agent=agent, output=output, confidence=confidence, valid=not problems, problems=problems
    )


def _label(i: int, c: Candidate) -> str:
    return f"candidate {i} ({c.agent})"


def _none_valid(strategy: ResolutionStrategy, candidates: tuple[Candidate, ...]) -> Resolution:
    why = "; ".join(f"{_label(i, c)}: {', '.join(c.problems)}" for i, c in enumerate(candidates))
    return Resolution(
        strategy=strategy,
        chosen="",
        candidates=candidates,
        rationale=f"no valid candidate (all {len(candidates)} valid=False)"
        + (f": {why}" if why else ""),
    )


def _tally(
    candidates: tuple[Candidate, ...], weight: Callable[[Candidate], float]
) -> tuple[int, dict[str, int], dict[str, float]]:
    """(index of the winner, valid votes per answer, summed weight per answer)."""
    first: dict[str, int] = {}
    votes: Counter[str] = Counter()
    score: dict[str, float] = {}
    for i, c in enumerate(candidates):
        if c.valid:
            key = normalize(c.output)
            first.setdefault(key, i)
            votes[key] += 1
            score[key] = score.get(key, 0.0) + weight(c)
    best = max(first, key=lambda k: (round(score[k], 9), -first[k]))  # 0.1 + 0.2 ties 0.3
    return first[best], dict(votes), score


def _chosen(
    strategy: ResolutionStrategy, cs: tuple[Candidate, ...], i: int, **fields: Any
) -> Resolution:
    return Resolution(
        strategy=strategy, chosen=cs[i].output, chosen_agent=cs[i].agent, candidates=cs, **fields
    )


def majority(candidates: Sequence[Candidate]) -> Resolution:
    """The most common normalized answer among valid candidates; ties: the earliest given."""
    cs = tuple(candidates)
    if not any(c.valid for c in cs):
        return _none_valid("majority", cs)
    i, votes, _ = _tally(cs, lambda _c: 1.0)
    counts = ", ".join(f"{k!r}: {n}" for k, n in votes.items())
    why = f"{votes[normalize(cs[i].output)]} of {sum(votes.values())} valid votes ({counts})"
    return _chosen("majority", cs, i, votes=votes, rationale=f"{_label(i, cs[i])} wins with {why}")


def confidence_weighted(candidates: Sequence[Candidate]) -> Resolution:
    """The answer whose valid candidates' confidences sum highest (unknown: 0.5); ties: earliest."""
    cs = tuple(candidates)
    if not any(c.valid for c in cs):
        return _none_valid("confidence", cs)

    def weight(c: Candidate) -> float:
        return UNKNOWN_CONFIDENCE if c.confidence is None else c.confidence

    i, votes, score = _tally(cs, weight)
    sums = ", ".join(f"{k!r}: {s:g}" for k, s in score.items())
    why = f"{_label(i, cs[i])} wins with confidence {score[normalize(cs[i].output)]:g} ({sums})"
    return _chosen("confidence", cs, i, votes=votes, rationale=why)


def first_valid(candidates: Sequence[Candidate]) -> Resolution:
    """The first candidate that passed the gate."""
    cs = tuple(candidates)
    i = next((i for i, c in enumerate(cs) if c.valid), None)
    if i is None:
        return _none_valid("first_valid", cs)
    failed = "; ".join(
        f"{_label(j, c)} failed: {', '.join(c.problems)}" for j, c in enumerate(cs[:i])
    )
    why = f"{_label(i, cs[i])} is the first valid one" + (f"; {failed}" if failed else "")
    return _chosen("first_valid", cs, i, rationale=why)


def _request(
    purpose: Literal["judge", "merge"],
    cs: Sequence[Candidate],
    task: str,
    model: str,
    *,
    response_format: dict[str, Any] | None,
    budget: Budget | None,
) -> LLMRequest:
    """A judge or merge request: the task and the valid candidates (``format_candidates``)."""
    listed = format_candidates([(i, c.output) for i, c in enumerate(cs) if c.valid])
    system = _JUDGE if purpose == "judge" else _MERGE
    if purpose == "merge" and response_format is not None:
        system += " Reply with JSON satisfying the response schema."
    return LLMRequest(
        model=model,
        purpose=purpose,
        messages=(
            ChatMessage(role="system", content=system),
            ChatMessage(role="user", content=f"Task:\n{task}\n\n{listed}"),
        ),
        response_format=response_format,
        temperature=0.0,
        budget=budget,
    )


def _fallback(cs: tuple[Candidate, ...], why: str, **fields: Any) -> Resolution:
    vote = majority(cs)
    return vote.model_copy(
        update={"rationale": f"{why}; fell back to majority: {vote.rationale}", **fields}
    )


def _unanimous(cs: tuple[Candidate, ...], strategy: ResolutionStrategy) -> Resolution | None:
    answers = {normalize(c.output) for c in cs if c.valid}
    if len(answers) > 1:
        return None
    if not answers:
        return _none_valid(strategy, cs)
    vote = majority(cs)
    why = f"{strategy} not asked, the valid candidates agree: {vote.rationale}"
    return vote.model_copy(update={"rationale": why})


async def judge(
    candidates: Sequence[Candidate],
    task: str,
    ask: Ask,
    model: str,
    *,
    budget: Budget | None = None,
) -> Resolution:
    """The valid candidate a model (purpose ``judge``) chooses; majority if its answer is unusable.

    Unusable: not JSON, not ``{choice, rationale}`` with the index of a valid candidate, or
    the call failed with a ``ModelError`` (other errors, such as a budget, propagate).
    """
    cs = tuple(candidates)
    if (settled := _unanimous(cs, "judge")) is not None:
        return settled
    choice = {"type": "integer", "enum": [i for i, c in enumerate(cs) if c.valid]}
    schema = {
        "type": "object",
        "properties": {"choice": choice, "rationale": {"type": "string"}},
        "required": ["choice", "rationale"],
        "additionalProperties": False,
    }
    request = _request("judge", cs, task, model, response_format=schema, budget=budget)
    try:
        response = await ask(request)
    except ModelError as e:
        return _fallback(cs, f"judge failed ({e.code.value}: {e.message})")
    problems = gate(response.text, request.response_format)
    if problems:
        why = f"judge answer unusable ({'; '.join(problems)})"
        return _fallback(cs, why, usage=response.usage)
    answer = load_json(response.text)
    i = int(answer["choice"])  # the schema allows 1.0
    why = f"judge chose {_label(i, cs[i])}: {answer['rationale']}"
    return _chosen("judge", cs, i, rationale=why, usage=response.usage)


async def merge(
    candidates: Sequence[Candidate],
    task: str,
    ask: Ask,
    model: str,
    *,
    schema: JsonSchema | None = None,
    required: Sequence[str] = (),
    budget: Budget | None = None,
    tenant: str,
) -> Resolution:
    """The valid candidates combined by a model (purpose ``merge``), for ``tenant``'s job.

    The merged text must pass :func:`gate` (with ``schema`` and ``required``); when it does
    not, or the call fails with a ``ModelError``, the majority decides.
    """
    cs = tuple(candidates)
    if (settled := _unanimous(cs, "merge")) is not None:
        return settled
    try:
        response = await ask(
            _request("merge", cs, task, model, response_format=schema, budget=budget)
        )
    except ModelError as e:
        return _fallback(cs, f"merge failed ({e.code.value}: {e.message})")
    problems = await checked_gate(response.text, schema, required, tenant=tenant)
    if problems:
        return _fallback(
            cs, f"merged answer rejected ({'; '.join(problems)})", usage=response.usage
        )
    k = sum(c.valid for c in cs)
    return Resolution(
        strategy="merge",
        chosen=response.text,
        candidates=cs,
        rationale=f"merged {k} candidates",
        usage=response.usage,
    )
