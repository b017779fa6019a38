"""Evaluation suites: cases with expectations, runs of a suite against a skill, comparisons.

An :class:`EvalSuite` is a dataset: each :class:`EvalCase` is a request (a task, and a
skill's structured input) and what its answer must be. Expectations are a tagged union
(``kind``): ``exact``, ``contains``, ``regex``, ``json_schema``, ``number`` (with a tolerance),
``judge`` (a model scoring 0-1 against a rubric) and ``custom`` (a scorer by import path).
A case's score is the weighted mean of its expectations' scores; it passes when every
expectation does. An :class:`EvalRun` keeps each case's result, the aggregate score with a
95 % confidence interval, cost and latency; two runs compare case by case
(:class:`EvalComparison`, with a paired test). Pure data: no I/O.
"""

from __future__ import annotations

from typing import Annotated, Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from raytroupe.protocols.addresses import Name
from raytroupe.protocols.json_data import JsonSchema
from raytroupe.protocols.output_schema import check_output_schema
from raytroupe.protocols.skill import ImportPath, Pattern

__all__ = [
    "Candidate",
    "CaseResult",
    "ContainsExpect",
    "CustomExpect",
    "EvalCase",
    "EvalComparison",
    "EvalRun",
    "EvalSuite",
    "ExactExpect",
    "Expectation",
    "ExpectationScore",
    "JudgeExpect",
    "NumberExpect",
    "OptimisationReport",
    "ProposedVersion",
    "RegexExpect",
    "SchemaExpect",
]


MAX_EXPECTATIONS: Final = 32
"""Expectations one eval case may have (each is work per answer: a pattern, a schema)."""


class _Config(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class _Expect(_Config):
    weight: float = Field(default=1.0, gt=0.0, description="Its share of the case's score.")
    field: str | None = Field(
        default=None, description="A dotted path in the answer's JSON (None: the answer)."
    )


class ExactExpect(_Expect):
    """The answer (or field) equals ``value`` (whitespace trimmed; case as ``case_sensitive``)."""

    kind: Literal["exact"] = "exact"
    value: Any
    case_sensitive: bool = False


class ContainsExpect(_Expect):
    """The answer holds ``values`` (all of them, or ``any``); the score is the share held."""

    kind: Literal["contains"] = "contains"
    values: tuple[str, ...] = Field(min_length=1, max_length=256)
    any: bool = Field(default=False, description="One of them suffices.")
    case_sensitive: bool = False


class RegexExpect(_Expect):
    """The answer matches ``pattern`` (searched, with a time limit)."""

    kind: Literal["regex"] = "regex"
    pattern: Pattern


class SchemaExpect(_Expect):
    """The answer is JSON satisfying ``schema``."""

    kind: Literal["json_schema"] = "json_schema"
    schema_: JsonSchema = Field(alias="schema")

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    @field_validator("schema_")
    @classmethod
    def _valid(cls, schema: JsonSchema) -> dict[str, Any]:
        return check_output_schema(schema, "schema") or {}


class NumberExpect(_Expect):
    """The answer's number (the field's, or the first in the text) is ``value`` ± ``tolerance``."""

    kind: Literal["number"] = "number"
    value: float
    tolerance: float = Field(default=0.0, ge=0.0, description="Absolute.")
    relative: float = Field(default=0.0, ge=0.0, description="Relative, e.g. 0.01 for 1 %.")


class JudgeExpect(_Expect):
    """A model scores the answer 0-1 against ``rubric``; it passes at ``threshold``."""

    kind: Literal["judge"] = "judge"
    rubric: str = Field(min_length=1, max_length=4000)
    model: Name = "default"
    threshold: float = Field(default=0.7, ge=0.0, le=1.0)


class CustomExpect(_Expect):
    """``module:function`` scores the answer: ``f(answer, case) -> float | bool`` in 0-1."""

    kind: Literal["custom"] = "custom"
    scorer: ImportPath


Expectation = Annotated[
    ExactExpect
    | ContainsExpect
    | RegexExpect
    | SchemaExpect
    | NumberExpect
    | JudgeExpect
    | CustomExpect,
    Field(discriminator="kind"),
]


class EvalCase(_Config):
    """One request of a suite and what its answer must be."""

    id: str = Field(min_length=1, max_length=128)
    task: str = Field(default="", max_length=200_000, description="The request's text.")
    input: Any = Field(default=None, description="A skill's structured input.")
    expect: tuple[Expectation, ...] = Field(min_length=1, max_length=MAX_EXPECTATIONS)
    tags: tuple[str, ...] = ()

    @model_validator(mode="after")
    def _asks(self) -> EvalCase:
        if not self.task.strip() and self.input is None:
            raise ValueError(f"case {self.id!r} has neither a task nor an input")
        return self


class EvalSuite(_Config):
    """A dataset of cases (from a JSONL or YAML file)."""

    name: Name
    description: str = ""
    skill: str | None = Field(default=None, description="The skill it evaluates by default.")
    cases: tuple[EvalCase, ...] = Field(min_length=1, max_length=10_000)

    @model_validator(mode="after")
    def _unique(self) -> EvalSuite:
        ids = [c.id for c in self.cases]
        twice = sorted({i for i in ids if ids.count(i) > 1})
        if twice:
            raise ValueError(f"case ids given twice: {', '.join(twice)}")
        return self


class ExpectationScore(_Config):
    """How one expectation came out."""

    kind: str
    score: float = Field(ge=0.0, le=1.0)
    passed: bool
    detail: str = ""


class CaseResult(_Config):
    """One case of a run."""

    case_id: str
    status: Literal["passed", "failed", "error", "skipped"]
    score: float = Field(ge=0.0, le=1.0)
    expectations: tuple[ExpectationScore, ...] = ()
    answer: str = ""
    job_id: str | None = None
    trace_id: str | None = None
    cost_usd: float = 0.0
    tokens: int = 0
    latency_s: float = 0.0
    error: str | None = Field(default=None, description="Why the job failed or was skipped.")
    code: str | None = Field(default=None, description="The failed job's error code.")


class EvalRun(_Config):
    """A suite run against a skill version (or a team): per case and in aggregate."""

    id: str
    suite: str
    target: str = Field(description="'skill:<name>@<version>' or 'team:<name>'.")
    status: Literal["running", "finished", "stopped"]
    started_at: float
    finished_at: float | None = None
    total: int = Field(ge=0, description="Cases in the suite.")
    cases: tuple[CaseResult, ...] = ()
    score: float = Field(default=0.0, description="Mean case score.")
    ci_low: float = Field(default=0.0, description="95 % confidence interval of the mean.")
    ci_high: float = 0.0
    pass_rate: float = 0.0
    cost_usd: float = 0.0
    latency_p50_s: float = 0.0
    stopped_because: str | None = None


class EvalComparison(_Config):
    """Two runs of one suite, case by case."""

    base: str = Field(description="The first run's id.")
    other: str
    cases: int = Field(description="Cases both runs scored.")
    mean_diff: float = Field(description="Mean of other - base over those cases.")
    better: int
    worse: int
    same: int
    p_value: float = Field(description="Two-sided, paired sign-flip permutation test.")
    significant: bool = Field(description="p < 0.05.")
    diffs: tuple[tuple[str, float, float], ...] = Field(
        default=(), description="(case id, base score, other score) where they differ."
    )


class ProposedVersion(_Config):
    """One proposed version of a skill, run on the suite and compared with the current one."""

    version: str
    run: str = Field(description="Its eval run's id.")
    score: float
    mean_diff: float = Field(description="Its mean minus the current version's.")
    p_value: float
    beats: bool = Field(description="Higher mean and p < 0.05.")
    instructions: str
    rationale: str = ""


Candidate = ProposedVersion
"""The name before 0.3 (two models of the API were named ``Candidate``)."""


class OptimisationReport(_Config):
    """What an optimisation run proposed, how each proposal did, and what happened."""

    skill: str
    version: str = Field(description="The version the proposals were measured against.")
    suite: str
    baseline_run: str
    baseline_score: float
    candidates: tuple[ProposedVersion, ...] = ()
    best: str | None = Field(default=None, description="The best version that beats it.")
    promoted: bool = Field(default=False, description="Whether ``best`` became current.")
