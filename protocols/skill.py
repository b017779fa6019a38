"""Skills: business capabilities with a prompt, tools, schemas, a quality gate and a version.

A tool is one operation; a :class:`SkillSpec` is a capability a user asks for by intent
("summarize this contract"): how to prompt for it, which tools and model it uses, what its
input and output look like, and the checks its answer must pass. It runs in one of three
execution modes: ``react`` (one agent's tool loop), ``direct`` (one model call) or
``team:<name>`` (a registered team, its answer gated by the skill).

Skill files (YAML, or Markdown whose front matter is the YAML and whose body is the
instructions) are read by :mod:`raytroupe.actors.skills.files`; the registry keeps every version.
Pure data here: no I/O.
"""

from __future__ import annotations

import json
import re
from typing import Annotated, Any, Final, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationInfo,
    field_validator,
    model_validator,
)

from raytroupe.protocols.addresses import NAME_PATTERN, Name
from raytroupe.protocols.intent import IntentHints
from raytroupe.protocols.json_data import JsonSchema
from raytroupe.protocols.memory import EpisodePolicy, MemoryPolicy
from raytroupe.protocols.output_schema import check_output_schema, schema_of

__all__ = [
    "LESSON",
    "CountRule",
    "ExecutionMode",
    "ImportPath",
    "JudgeSpec",
    "Pattern",
    "QualityGateSpec",
    "ReflectionPolicy",
    "RegexRule",
    "SkillAction",
    "SkillEvent",
    "SkillInfo",
    "SkillModel",
    "SkillProblemInfo",
    "SkillPrompt",
    "SkillSpec",
    "SkillTool",
    "Version",
    "compose_prompt",
    "lesson_tags",
]

_VERSION: Final = r"[0-9A-Za-z][0-9A-Za-z._-]{0,15}"
Version = str
"""A skill version as its file gives it (``1``, ``1.2.0``, ``2024-06-01``): immutable once
registered."""

_MODE: Final = re.compile(rf"^(react|direct|team:{NAME_PATTERN})$")
ExecutionMode = str
"""``react``, ``direct`` or ``team:<registered team name>``."""

_MAX_AGENT_NAME: Final = 64
"""A react skill's agent is ``skill.<name>.<version>``: an actor name."""
_IMPORT_PATH: Final = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")


MAX_GATE_RULES: Final = 32
"""Rules of each kind one quality gate may have (each is work on every answer)."""


class _Config(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class SkillPrompt(_Config):
    """The skill's prompt, in parts (composed by :func:`compose_prompt`)."""

    identity: str = Field(default="", description="Who the model is for this skill.")
    context: str = Field(default="", description="Background it needs.")
    instructions: str = Field(min_length=1, description="What to do with the request.")
    constraints: tuple[str, ...] = Field(default=(), description="Rules the answer must keep.")
    output_format: str = Field(default="", description="How the answer is laid out.")


class SkillTool(_Config):
    """A tool the skill uses: ``required`` tools must be configured for the skill to load."""

    name: Name = Field(description="A tool of the cluster's sandboxes.")
    required: bool = Field(default=True, description="The skill cannot run without it.")


class SkillModel(_Config):
    """The model settings of the skill's calls.

    ``alias`` serves every mode; ``temperature`` and ``max_tokens`` apply to the calls the
    orchestrator makes for the skill (a direct skill's call, a team skill's revisions): a
    react skill's agent calls its alias as configured in the pool.
    """

    alias: Name = Field(default="default", description="Model alias served by the LLM pool.")
    temperature: float | None = Field(default=None, ge=0.0, le=2.0)
    max_tokens: int | None = Field(default=None, ge=1, le=200_000)


class CountRule(_Config):
    """Words of a text, or items of a list, within bounds."""

    field: str | None = Field(
        default=None, description="Dotted path in the answer's JSON (None: the whole text)."
    )
    unit: Literal["words", "items"] = Field(default="words")
    min: int | None = Field(default=None, ge=0)
    max: int | None = Field(default=None, ge=0)

    @model_validator(mode="after")
    def _bounded(self) -> CountRule:
        if self.min is None and self.max is None:
            raise ValueError("a count rule needs min or max")
        if self.min is not None and self.max is not None and self.min > self.max:
            raise ValueError(f"min {self.min} is above max {self.max}")
        if self.unit == "items" and self.field is None:
            raise ValueError("an item count needs the field that holds the list")
        return self


def _compiles(pattern: str) -> str:
    import regex  # noqa: PLC0415 - what matches it later (protocols.bounded); 1.2 MB

    try:
        re.compile(pattern)
        regex.compile(pattern)
    # a count past 2**32 (a{99999999999}) overflows re; groups nested hundreds deep recurse
    except (re.error, regex.error, OverflowError, RecursionError) as e:
        raise ValueError(f"not a valid regular expression: {e}") from None
    return pattern


def _importable(path: str) -> str:
    if not _IMPORT_PATH.match(path):
        raise ValueError(f"{path!r} is not an import path ('package.module:function')")
    return path


Pattern = Annotated[str, StringConstraints(min_length=1, max_length=500), AfterValidator(_compiles)]
"""A regular expression (checked to compile; matched later with a time limit)."""
ImportPath = Annotated[str, AfterValidator(_importable)]
"""``package.module:function``."""


class RegexRule(_Config):
    """A pattern the answer (or one field of it) must match, or must not."""

    pattern: Pattern
    field: str | None = Field(default=None, description="Dotted path (None: the whole text).")
    must: Literal["match", "not_match"] = Field(default="match")
    message: str = Field(default="", max_length=500, description="Said when the rule fails.")


class JudgeSpec(_Config):
    """A model that scores the answer 0-1 against a rubric."""

    model: Name = Field(default="default", description="Model alias of the judge.")
    rubric: str = Field(min_length=1, max_length=4000, description="What a good answer is.")
    threshold: float = Field(default=0.7, ge=0.0, le=1.0, description="Lowest passing score.")


class QualityGateSpec(_Config):
    """Checks every answer of the skill passes; a failing answer is sent back with them."""

    required: tuple[str, ...] = Field(
        default=(), description="Fields of the JSON answer that must be present and not empty."
    )
    counts: tuple[CountRule, ...] = Field(
        default=(), max_length=MAX_GATE_RULES, description="Word and item counts."
    )
    regex: tuple[RegexRule, ...] = Field(
        default=(), max_length=MAX_GATE_RULES, description="Pattern rules."
    )
    validator: ImportPath | None = Field(
        default=None,
        description="'module:function' called with the answer (its JSON, else its text); "
        "returns a list of problems (empty: passes). Operator skills only.",
    )
    judge: JudgeSpec | None = Field(default=None, description="A model judge with a rubric.")
    max_retries: int = Field(default=1, ge=0, le=5, description="Times an answer is sent back.")


class ReflectionPolicy(_Config):
    """When a finished job of the skill is reflected upon, and how lessons come back.

    A reflector model writes a short lesson (what went wrong, what to do next time) into
    long-term memory, scoped to the skill and the job's tenant; jobs of the skill recall the
    lessons closest to their request before they start (direct and react skills).
    """

    when: Literal["never", "failure", "low_score", "always"] = Field(
        default="never",
        description="'failure': the job failed; 'low_score': failed, or its quality score is "
        "below 'below'; 'always': every job.",
    )
    below: float = Field(default=0.7, ge=0.0, le=1.0, description="For 'low_score'.")
    sample: float = Field(
        default=1.0, gt=0.0, le=1.0,
        description="Share of the jobs due a reflection that get one (by a hash of the job id).",
    )  # fmt: skip
    model: Name = Field(default="default", description="Model alias of the reflector.")
    recall: int = Field(default=3, ge=0, le=20, description="Lessons recalled into a job.")


LESSON: Final = "lesson"
"""The memory tag of every lesson reflection writes."""


def lesson_tags(skill: str) -> tuple[str, str]:
    """The tags of a skill's lessons in memory (what the memory store is asked for)."""
    return LESSON, f"skill:{skill}"


class SkillSpec(_Config):
    """One version of a skill (see the module docstring)."""

    name: Name = Field(description="The skill's name; jobs and the intent router use it.")
    version: Version = Field(description="This version's label; versions are immutable.")
    description: str = Field(min_length=1, max_length=2000, description="For people.")
    intent: IntentHints = Field(default_factory=IntentHints)
    execution_mode: ExecutionMode = Field(
        default="react", description="'react', 'direct' or 'team:<registered team>'."
    )
    max_steps: int = Field(default=6, ge=1, le=100, description="Model calls of a react loop.")
    prompt: SkillPrompt
    tools: tuple[SkillTool, ...] = Field(default=(), description="Tools of a react skill.")
    llm: SkillModel = Field(default_factory=SkillModel)
    input_schema: JsonSchema | None = Field(
        default=None, description="JSON Schema of a structured request (JSON input)."
    )
    output_schema: JsonSchema | None = Field(
        default=None, description="JSON Schema of the answer; the answer is then JSON."
    )
    quality_gate: QualityGateSpec = Field(default_factory=QualityGateSpec)
    memory: MemoryPolicy = Field(
        default_factory=lambda: MemoryPolicy(recall=False),
        description="How a react skill's agent uses memory (default: not at all).",
    )
    reflection: ReflectionPolicy = Field(default_factory=ReflectionPolicy)
    episodes: EpisodePolicy = Field(
        default_factory=EpisodePolicy,
        description="Keep its successful jobs as episodes and offer the most similar to new "
        "ones (off by default).",
    )

    @field_validator("version")
    @classmethod
    def _version(cls, version: str) -> str:
        if not re.fullmatch(_VERSION, version):
            raise ValueError(
                f"{version!r} is not a version: 1-16 letters, digits, '.', '_' or '-', "
                "starting with a letter or digit"
            )
        return version

    @field_validator("execution_mode")
    @classmethod
    def _mode(cls, mode: str) -> str:
        if not _MODE.match(mode):
            raise ValueError(f"{mode!r} is not 'react', 'direct' or 'team:<team name>'")
        return mode

    @field_validator("input_schema", "output_schema", mode="before")
    @classmethod
    def _model_class(cls, schema: Any) -> Any:
        return schema_of(schema)

    @field_validator("input_schema", "output_schema")
    @classmethod
    def _schema(cls, schema: JsonSchema | None, info: ValidationInfo) -> JsonSchema | None:
        return check_output_schema(schema, info.field_name or "schema")

    @field_validator("tools", mode="before")
    @classmethod
    def _tool_names(cls, tools: Any) -> Any:
        """A bare name means a required tool."""
        if isinstance(tools, list | tuple):
            return [{"name": t} if isinstance(t, str) else t for t in tools]
        return tools

    @model_validator(mode="after")
    def _consistent(self) -> SkillSpec:
        names = [t.name for t in self.tools]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"tools listed twice: {', '.join(duplicates)}")
        if self.tools and self.execution_mode != "react":
            raise ValueError(
                f"tools are used by 'react' skills only (execution_mode is {self.execution_mode!r})"
            )
        if len(f"skill.{self.name}.{self.version}") > _MAX_AGENT_NAME:
            raise ValueError("name and version together must fit in 57 characters")
        return self

    @property
    def team(self) -> str | None:
        """The team a ``team:<name>`` skill runs (None for the other modes)."""
        mode = self.execution_mode
        return mode.removeprefix("team:") if mode.startswith("team:") else None

    @property
    def ref(self) -> str:
        """``name@version``."""
        return f"{self.name}@{self.version}"


def compose_prompt(skill: SkillSpec) -> str:
    """The skill's system prompt: identity, context, instructions, constraints, output format."""
    p = skill.prompt
    parts = [p.identity.strip(), p.context.strip() and f"Context:\n{p.context.strip()}"]
    parts.append(f"Instructions:\n{p.instructions.strip()}")
    if p.constraints:
        parts.append("Constraints:\n" + "\n".join(f"- {c.strip()}" for c in p.constraints))
    if p.output_format.strip():
        parts.append(f"Output format:\n{p.output_format.strip()}")
    if skill.output_schema is not None:
        parts.append(
            "Reply with JSON only, satisfying this JSON Schema:\n"
            + json.dumps(skill.output_schema, separators=(",", ":"))
        )
    return "\n\n".join(part for part in parts if part)


SkillAction = Literal["applied", "rolled_back", "promoted", "proposed", "deleted", "rejected"]
"""What happened to a skill: a version became current (applied, rolled back to, or promoted
from a proposal), a version was proposed (registered, not current: an optimiser's
candidate), the skill was deleted, or a file's new content was refused."""


class SkillEvent(_Config):
    """One entry of the registry's history."""

    name: str = Field(description="The skill (for 'rejected', as far as the file said).")
    version: str | None = Field(default=None, description="The version concerned, if any.")
    action: SkillAction
    at: float = Field(description="UNIX time.")
    source: str = Field(default="api", description="'api', 'driver', 'cli' or the file path.")
    problems: tuple[str, ...] = Field(default=(), description="Why it was rejected.")


class SkillInfo(_Config):
    """A registered skill: its current version and the versions it has had."""

    name: Name
    version: Version = Field(description="The current version: what new jobs run.")
    versions: tuple[Version, ...] = Field(description="Every registered version, oldest first.")
    description: str
    execution_mode: ExecutionMode
    source: str = Field(description="Where the current version came from.")
    updated_at: float = Field(description="When the current version became current.")


class SkillProblemInfo(_Config):
    """A skill file the registry could not load (its skill, if any, kept its old version)."""

    file: str
    problems: tuple[str, ...]
    at: float
