"""Prompt optimisation: variants of a skill's prompt proposed by a model, proven on a suite.

From a suite run's failures and the skill's lessons, an optimiser model (purpose
``optimize``, answering :data:`VARIANTS_SCHEMA`) proposes up to ``n`` variants of the
skill's ``instructions`` and ``constraints``. Each becomes a *proposed* version of the skill
(registered, not current: ``<version>.o<run><k>``), is run on the same suite, and is
compared with the current version case by case (:func:`raytroupe.actors.evals.desk.compare_runs`).
A variant *beats* the current version when its mean is higher and the paired test says
p < 0.05. Nothing is promoted unless the caller asks (``promote=True``), and then only the
best variant that beats it.
"""

from __future__ import annotations

import json
from typing import Any, Final

from raytroupe.actors.answer_gate import load_json
from raytroupe.protocols import ChatMessage, LLMRequest
from raytroupe.protocols.evals import CaseResult, EvalRun
from raytroupe.protocols.json_data import JsonSchema
from raytroupe.protocols.skill import SkillSpec

__all__ = ["VARIANTS_SCHEMA", "candidates", "optimise_request", "parse_variants"]

VARIANTS_SCHEMA: Final[JsonSchema] = {
    "type": "object",
    "properties": {
        "variants": {
            "type": "array",
            "minItems": 1,
            "maxItems": 5,
            "items": {
                "type": "object",
                "properties": {
                    "instructions": {"type": "string", "minLength": 1},
                    "constraints": {"type": "array", "items": {"type": "string"}},
                    "rationale": {"type": "string"},
                },
                "required": ["instructions"],
            },
        }
    },
    "required": ["variants"],
}
_OPTIMISER: Final = (
    "You improve the prompt of a skill. Given its current instructions and constraints, the "
    "cases it failed and the lessons learned, propose better instructions (and constraints) "
    "that would make it pass. Reply with JSON only."
)
MAX_FAILURES: Final = 10


def optimise_request(
    skill: SkillSpec, run: EvalRun, lessons: tuple[str, ...], n: int, model: str
) -> LLMRequest:
    """The optimiser's request: the prompt, the run's failures, the lessons, how many."""
    failed: list[CaseResult] = [c for c in run.cases if c.status in ("failed", "error")]
    listed = "\n".join(
        f"- case {c.case_id}: answered {c.answer[:300]!r}; "
        + ("; ".join(e.detail for e in c.expectations if not e.passed) or c.error or "")
        for c in failed[:MAX_FAILURES]
    )
    text = (
        f"Skill: {skill.name}: {skill.description}\n\n"
        f"Instructions:\n{skill.prompt.instructions}\n\n"
        f"Constraints:\n"
        + "\n".join(f"- {c}" for c in skill.prompt.constraints)
        + f"\n\nScore on suite {run.suite}: {run.score:.3f}\nFailed cases:\n{listed or '(none)'}"
        + ("\n\nLessons:\n" + "\n".join(f"- {x}" for x in lessons) if lessons else "")
        + f"\n\nPropose {n} variant(s)."
    )
    return LLMRequest(
        model=model,
        purpose="optimize",
        messages=(
            ChatMessage(role="system", content=_OPTIMISER),
            ChatMessage(role="user", content=text),
        ),
        response_format=VARIANTS_SCHEMA,
        temperature=0.7,
    )


def parse_variants(text: str, n: int) -> list[dict[str, Any]]:
    """The variants of the optimiser's answer (at most ``n``).

    Raises:
        ValueError: not JSON with at least one variant that has instructions.
    """
    data = load_json(text)
    variants = data.get("variants") if isinstance(data, dict) else None
    if not isinstance(variants, list):
        raise ValueError("the optimiser's answer has no 'variants' list")  # noqa: TRY004 - callers catch ValueError: a bad answer
    found = [
        v
        for v in variants
        if isinstance(v, dict) and isinstance(v.get("instructions"), str)
        and v["instructions"].strip()
    ]  # fmt: skip
    if not found:
        raise ValueError("the optimiser proposed no variant with instructions")
    return found[:n]


def candidates(skill: SkillSpec, variants: list[dict[str, Any]], tag: str) -> list[SkillSpec]:
    """Each variant as a version of ``skill`` (``<version>.o<tag><k>``, at most 16 characters)."""
    specs = []
    for k, variant in enumerate(variants, start=1):
        constraints = variant.get("constraints")
        prompt = skill.prompt.model_copy(
            update={
                "instructions": variant["instructions"].strip(),
                "constraints": tuple(str(c) for c in constraints)
                if isinstance(constraints, list) else skill.prompt.constraints,
            }
        )  # fmt: skip
        version = f"{skill.version[: 16 - len(tag) - 3]}.o{tag}{k}"
        specs.append(SkillSpec.model_validate(
            {**json.loads(skill.model_dump_json()), "version": version,
             "prompt": json.loads(prompt.model_dump_json())}
        ))  # fmt: skip
    return specs
