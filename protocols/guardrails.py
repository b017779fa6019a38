"""Guardrails: named, versioned policies that check a job's input, tool calls and output.

A guardrail (:class:`GuardrailSpec`) holds rules of one or more kinds and says at which
stages of a job they apply: its ``input`` (before it is planned), each ``tool_call`` (its
arguments, before it runs), each ``tool_result`` (before the model sees it) and its
``output`` (before it is delivered). Where a rule matches, the guardrail either *blocks* (a
tripwire: the job ends with :class:`~raytroupe.protocols.GuardrailTripped` naming the rule)
or *redacts* (the matched text is replaced and the decision recorded).

Guardrails are set by admins and bind jobs by what they run under (:class:`AppliesTo`:
tenants, teams, skills, API keys); a job keeps the versions bound when it was admitted
(:class:`BoundGuardrail`, on its context), whatever changes afterwards.
"""

from __future__ import annotations

import json
from typing import Annotated, Final, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    field_validator,
    model_validator,
)

from raytroupe.protocols.addresses import Name
from raytroupe.protocols.json_data import JsonSchema

__all__ = [
    "GUARDRAIL_STAGES",
    "PII_KINDS",
    "AppliesTo",
    "BoundGuardrail",
    "CallableRule",
    "DecisionRecord",
    "GuardrailAction",
    "GuardrailDecision",
    "GuardrailInfo",
    "GuardrailName",
    "GuardrailSpec",
    "GuardrailStage",
    "JsonSchemaRule",
    "JudgeRule",
    "KeywordsRule",
    "PiiKind",
    "PiiRule",
    "RegexPatternRule",
    "Rule",
]

GuardrailStage = Literal["input", "tool_call", "tool_result", "output"]
GUARDRAIL_STAGES: Final[tuple[GuardrailStage, ...]] = (
    "input",
    "tool_call",
    "tool_result",
    "output",
)
GuardrailAction = Literal["block", "redact"]
PiiKind = Literal["email", "phone", "credit_card", "iban", "ssn", "ip_address"]
PII_KINDS: Final[tuple[PiiKind, ...]] = (
    "email",
    "phone",
    "credit_card",
    "iban",
    "ssn",
    "ip_address",
)
GuardrailName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")]
Selector = Annotated[str, StringConstraints(pattern=r"^(\*|[A-Za-z0-9_.:@/-]{1,128})$")]
MAX_RULES: Final = 20
MAX_PATTERNS: Final = 100


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class RegexPatternRule(_Frozen):
    """Matches any of ``patterns`` (RE2 syntax: linear time, no backreferences or lookaround).

    Write ``(?i)`` at a pattern's start to ignore case.
    """

    kind: Literal["regex"] = "regex"
    patterns: tuple[Annotated[str, StringConstraints(min_length=1, max_length=1000)], ...] = Field(
        min_length=1, max_length=MAX_PATTERNS
    )
    label: str = Field(default="MATCH", max_length=40, description="Shown as [LABEL] in place.")


class KeywordsRule(_Frozen):
    """Matches any of ``words`` as whole words (case-insensitive unless ``case_sensitive``)."""

    kind: Literal["keywords"] = "keywords"
    words: tuple[Annotated[str, StringConstraints(min_length=1, max_length=200)], ...] = Field(
        min_length=1, max_length=1000
    )
    case_sensitive: bool = False
    label: str = Field(default="REDACTED", max_length=40, description="Shown as [LABEL].")


class PiiRule(_Frozen):
    """Matches personal data, found offline without a model.

    Email addresses, phone numbers, card numbers (Luhn), IBANs, US social security numbers
    and IP addresses (:mod:`raytroupe.actors.guardrails.pii`).
    """

    kind: Literal["pii"] = "pii"
    entities: tuple[PiiKind, ...] = Field(default=PII_KINDS, min_length=1)
    regions: tuple[Annotated[str, StringConstraints(pattern=r"^[A-Z]{2}$")], ...] = Field(
        default=("US",), min_length=1, max_length=20,
        description="Where phone numbers written without a country code are read as from.",
    )  # fmt: skip


class JsonSchemaRule(_Frozen):
    """Matches text that is not JSON satisfying ``schema`` (a tool call's arguments are)."""

    kind: Literal["json_schema"] = "json_schema"
    json_schema: JsonSchema = Field(alias="schema")

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)


class JudgeRule(_Frozen):
    """A model reads the text and says whether it breaks ``criteria`` (fails closed)."""

    kind: Literal["judge"] = "judge"
    model: Name = Field(default="default", description="The model alias that judges.")
    criteria: str = Field(
        min_length=1, max_length=4000, description="What the text must not be or do."
    )


class CallableRule(_Frozen):
    """A Python function by import path, ``module:function``, of the operator's allow-list.

    Called as ``function(text, stage)``; it returns None to pass, or a reason (text) to
    match. Only a target the operator lists in ``guardrails.callables`` may be named: a
    guardrail made over HTTP imports nothing else.
    """

    kind: Literal["callable"] = "callable"
    target: str = Field(pattern=r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$", max_length=200)


Rule = Annotated[
    RegexPatternRule | KeywordsRule | PiiRule | JsonSchemaRule | JudgeRule | CallableRule,
    Field(discriminator="kind"),
]


class AppliesTo(_Frozen):
    """Which jobs a guardrail binds: every selector given must match (``*``: any)."""

    tenants: tuple[Selector, ...] = Field(default=("*",), min_length=1, max_length=100)
    teams: tuple[Selector, ...] = Field(
        default=(), max_length=100, description="Team names (empty: any team)."
    )
    skills: tuple[Selector, ...] = Field(
        default=(), max_length=100, description="Skill names (empty: with or without one)."
    )
    keys: tuple[Selector, ...] = Field(
        default=(), max_length=100, description="API key names of the submitter (empty: any)."
    )

    def binds(self, tenant: str, team: str | None, skill: str | None, key: str | None) -> bool:
        """Whether a job of ``tenant``, ``team``, ``skill``, submitted with ``key``, is bound."""

        def hit(selectors: tuple[str, ...], value: str | None) -> bool:
            return not selectors or "*" in selectors or value in selectors

        return (
            hit(self.tenants, tenant)
            and hit(self.teams, team)
            and hit(self.skills, skill)
            and hit(self.keys, key)
        )


class GuardrailSpec(_Frozen):
    """A guardrail: its rules, the stages they apply at, what a match does, whom it binds."""

    description: str = Field(default="", max_length=2000)
    stages: tuple[GuardrailStage, ...] = Field(min_length=1, max_length=4)
    rules: tuple[Rule, ...] = Field(min_length=1, max_length=MAX_RULES)
    action: GuardrailAction = Field(
        default="block",
        description="block: end the job (refuse its input) naming the rule; redact: replace "
        "what matched ([LABEL]) and go on (regex, keywords and PII rules only).",
    )
    tools: tuple[Name, ...] = Field(
        default=(), description="At the tool stages, only these tools' calls (empty: every tool)."
    )
    applies_to: AppliesTo = Field(default_factory=AppliesTo)
    enabled: bool = True

    @field_validator("stages")
    @classmethod
    def _distinct(cls, stages: tuple[GuardrailStage, ...]) -> tuple[GuardrailStage, ...]:
        if len(set(stages)) != len(stages):
            raise ValueError("a stage is listed twice")
        return stages

    @model_validator(mode="after")
    def _redacts_where_it_matched(self) -> GuardrailSpec:
        """A redacting guardrail has only rules that say where they matched."""
        if self.action == "redact":
            for rule in self.rules:
                if rule.kind not in {"regex", "keywords", "pii"}:
                    raise ValueError(
                        f"a {rule.kind} rule cannot redact (it does not say where it matched): "
                        "use action 'block'"
                    )
        return self


class GuardrailInfo(_Frozen):
    """A guardrail as set: its name, version (1, 2, ... one per change) and spec."""

    name: GuardrailName
    version: int = Field(ge=1)
    spec: GuardrailSpec
    updated_at: float
    updated_by: str | None = None


class BoundGuardrail(_Frozen):
    """A guardrail version that binds a job (on its context, from its admission on)."""

    name: GuardrailName
    version: int = Field(ge=1)
    spec: GuardrailSpec

    def at(self, stage: GuardrailStage, tool: str | None = None) -> bool:
        """Whether it applies at ``stage`` (to ``tool``'s calls, at a tool stage)."""
        if not self.spec.enabled or stage not in self.spec.stages:
            return False
        return tool is None or not self.spec.tools or tool in self.spec.tools


class GuardrailDecision(_Frozen):
    """What a guardrail did at a stage of a job: a tripwire or a redaction (never the text)."""

    guardrail: GuardrailName
    version: int
    rule: str = Field(description="The rule's index and kind, e.g. '0:pii'.")
    stage: GuardrailStage
    action: Literal["blocked", "redacted"]
    reason: str = Field(max_length=500, description="What matched, by kind and count.")
    tool: str | None = None

    def summary(self) -> str:
        """One line for people and logs."""
        where = f" ({self.tool})" if self.tool else ""
        return (
            f"guardrail {self.guardrail!r} v{self.version} rule {self.rule} {self.action} "
            f"the {self.stage.replace('_', ' ')}{where}: {self.reason}"
        )


class DecisionRecord(_Frozen):
    """A decision as kept: when, for which tenant and job (None: input it refused)."""

    at: float
    tenant: str
    job_id: str | None
    decision: GuardrailDecision


def arguments_text(arguments: object) -> str:
    """A tool call's arguments as the text its guardrails read: canonical JSON."""
    return json.dumps(arguments, sort_keys=True, ensure_ascii=False, default=str)
