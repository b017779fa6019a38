"""How good an answer is, and the one shape every job's answer comes back in.

:class:`QualityReport` is a quality gate's verdict (each :class:`QualityCheck`, a score);
:class:`StandardOutput` is a job's answer as skills and teams alike return it.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from raytroupe.protocols.llm import Usage

__all__ = ["QualityCheck", "QualityReport", "StandardOutput"]


class _Config(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class QualityCheck(_Config):
    """One check of a quality gate, as it came out."""

    name: str = Field(description="'not_empty', 'schema', 'required', 'count', 'regex', ...")
    passed: bool
    detail: str = Field(default="", description="What was found (the problem, if it failed).")
    score: float | None = Field(default=None, ge=0.0, le=1.0, description="A judge's score.")


class QualityReport(_Config):
    """A quality gate's verdict on one answer."""

    passed: bool
    score: float = Field(
        ge=0.0, le=1.0, description="The judge's score, else the share of checks passed."
    )
    checks: tuple[QualityCheck, ...] = ()
    retries: int = Field(default=0, ge=0, description="Answers sent back before this one.")

    @property
    def problems(self) -> list[str]:
        """The failed checks' details."""
        return [c.detail or c.name for c in self.checks if not c.passed]


class StandardOutput(_Config):
    """Every job's answer in one shape, whatever produced it (a skill or a team)."""

    skill: str | None = Field(default=None, description="The skill that answered, if any.")
    version: str | None = Field(default=None, description="Its version.")
    team: str = Field(description="The team the job ran under.")
    produced_at: float = Field(description="UNIX time the answer was final.")
    quality: QualityReport | None = Field(default=None, description="The quality gate's report.")
    data: Any = Field(
        default=None,
        description="The answer's JSON, normalized by the output schema (numbers, booleans, "
        "dates, enums); None when the answer is not JSON.",
    )
    text: str = Field(description="The answer as text.")
    usage: Usage = Field(default_factory=Usage, description="Tokens, calls and cost of the job.")
    trace_id: str | None = Field(default=None, description="The job's trace id.")
