"""Conflict resolution as data: candidate answers to one subtask, and the resolution chosen.

Also the conventions shared by the resolver's judge and merge prompts
(``actors/orchestrator/resolve.py``) and the models that answer them (the offline provider
parses them): the candidates follow a line :data:`CANDIDATES_HEADING`, one per line, as
``[<index>] <answer as a JSON string>``, where ``<index>`` is the candidate's position among
all the candidates of the subtask (only valid ones are shown, so indices may skip). A judge
answers JSON ``{"choice": <index>, "rationale": "..."}``.

:func:`normalize` is the answer comparison both sides use (votes, the offline judge).
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Sequence
from decimal import Decimal, InvalidOperation
from typing import Final, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from raytroupe.protocols.llm import Usage

__all__ = [
    "CANDIDATES_HEADING",
    "Candidate",
    "Resolution",
    "ResolutionStrategy",
    "format_candidates",
    "normalize",
    "parse_candidates",
]

ResolutionStrategy = Literal["majority", "confidence", "judge", "merge", "first_valid"]
"""How one answer is chosen among the candidates of a redundantly dispatched subtask."""

CANDIDATES_HEADING: Final = "Candidates:"
"""Heading under which judge and merge prompts list the candidates, one per line."""

_CANDIDATE_LINE: Final = re.compile(r"^\[(\d{1,6})\] (\".*\")\s*$")
_NUMBER: Final = re.compile(
    r"(?<![\w.])[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:e[-+]?\d{1,3})?(?![\w]|\.\d)"
)
_SPACES: Final = re.compile(r"\s+")


class _Data(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)


class Candidate(_Data):
    """One agent's answer to a subtask, and whether it passed the quality gate."""

    agent: str = Field(description="Agent that answered.")
    output: str = ""
    confidence: float | None = Field(
        default=None, ge=0.0, le=1.0, description="The agent's own confidence, if it gave one."
    )
    valid: bool = True
    problems: tuple[str, ...] = Field(default=(), description="Why the gate rejected it.")

    @model_validator(mode="after")
    def _consistent(self) -> Candidate:
        if self.valid == bool(self.problems):
            raise ValueError("a valid candidate has no problems; an invalid one says why")
        return self


class Resolution(_Data):
    """The answer chosen among candidates, by which strategy, and why.

    ``strategy`` is the strategy that made the choice: a judge or merge that fell back says so
    in ``rationale`` and reports ``majority``. With no valid candidate ``chosen`` is ``''``,
    ``chosen_agent`` is None and :attr:`resolved` is False. A merged answer has no
    ``chosen_agent``.
    """

    strategy: ResolutionStrategy
    chosen: str = Field(description="The chosen (or merged) output.")
    chosen_agent: str | None = None
    candidates: tuple[Candidate, ...] = ()
    rationale: str = ""
    votes: dict[str, int] = Field(
        default_factory=dict, description="Valid candidates per normalized answer."
    )
    usage: Usage = Field(default_factory=Usage, description="What judging or merging cost.")

    @property
    def resolved(self) -> bool:
        """True when some candidate was valid, so ``chosen`` is an answer."""
        return any(c.valid for c in self.candidates)


def normalize(answer: str) -> str:
    """``answer`` for comparison: casefolded, numbers canonical, punctuation gone.

    Numbers are written canonically (``42.0`` and ``42`` are ``42``, ``1,000`` is ``1000``,
    ``3.50`` is ``3.5``), other punctuation is deleted and whitespace runs become one space.
    """
    text = unicodedata.normalize("NFKC", answer).casefold()
    parts: list[str] = []
    end = 0
    for match in _NUMBER.finditer(text):
        parts += [_unpunctuated(text[end : match.start()]), f" {_number(match.group(0))} "]
        end = match.end()
    parts.append(_unpunctuated(text[end:]))
    return _SPACES.sub(" ", "".join(parts)).strip()


def _unpunctuated(text: str) -> str:
    return "".join(ch for ch in text if not unicodedata.category(ch).startswith("P"))


def _number(text: str) -> str:
    try:
        value = Decimal(text.replace(",", ""))
    except InvalidOperation:  # pragma: no cover - the pattern only matches numbers
        return text
    if value == value.to_integral_value():
        return str(int(value))
    return format(value.normalize(), "f")


def format_candidates(candidates: Sequence[tuple[int, str]]) -> str:
    """The heading and one ``[index] "answer"`` line per (index, answer)."""
    lines = [f"[{i}] {json.dumps(text.strip(), ensure_ascii=False)}" for i, text in candidates]
    return "\n".join([CANDIDATES_HEADING, *lines])


def parse_candidates(prompt: str) -> list[tuple[int, str]]:
    """The (index, answer) pairs listed under the last :data:`CANDIDATES_HEADING` line."""
    lines = prompt.splitlines()
    starts = [i for i, line in enumerate(lines) if line.strip() == CANDIDATES_HEADING]
    pairs: list[tuple[int, str]] = []
    for line in lines[starts[-1] + 1 :] if starts else ():
        match = _CANDIDATE_LINE.match(line.strip())
        if match is None:
            continue
        try:
            text = json.loads(match.group(2))
        except json.JSONDecodeError:
            continue
        if isinstance(text, str):
            pairs.append((int(match.group(1)), text))
    return pairs
