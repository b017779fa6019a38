"""Team and agent configuration."""

from __future__ import annotations

from collections import Counter
from typing import Annotated, Any, Final, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    field_validator,
    model_validator,
)

from raytroupe.protocols.addresses import Name, reserved
from raytroupe.protocols.graph import GraphSpec
from raytroupe.protocols.intent import IntentHints
from raytroupe.protocols.jobs import Plan, PlannedSubtask
from raytroupe.protocols.json_data import JsonSchema
from raytroupe.protocols.llm import Budget, Reasoning
from raytroupe.protocols.memory import EpisodePolicy, MemoryPolicy
from raytroupe.protocols.model_specs import ModelSpec, OfflineModel, ScriptedModel, ScriptedTurn
from raytroupe.protocols.output_schema import check_output_schema, schema_of

__all__ = [
    "AgentSpec",
    "ModelSpec",
    "OfflineModel",
    "ScriptedModel",
    "ScriptedTurn",
    "TeamSpec",
    "team_role",
]


_MAX_NAME = 64
MAX_AGENTS: Final = 256
"""Agents of one team, checked before any of them is (each is an actor to run)."""

FunctionDigest = Annotated[str, StringConstraints(pattern=r"^sha256:[0-9a-f]{64}$")]
"""A shipped function tool's identity: the SHA-256 of its pickled bytes."""


class _Config(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class AgentSpec(_Config):
    """One agent of a team."""

    name: Name = Field(description="Unique agent name; its actor is named 'agent/<name>'.")
    role: Name = Field(description="Role the orchestrator dispatches subtasks by.")
    instructions: str = Field(default="", description="System instructions for the agent.")
    model: Name = Field(default="default", description="Model alias served by the LLM pool.")
    tools: tuple[Name, ...] = Field(default=(), description="Tools this agent may call.")
    max_turns: int = Field(default=6, ge=1, le=100, description="Model calls per subtask, max.")
    max_concurrency: int = Field(
        default=4, ge=1, le=256, description="Subtasks this agent works on at once."
    )
    max_tokens_per_task: int | None = Field(
        default=None, ge=1, description="Tokens one subtask's model calls may use (None: no cap)."
    )
    max_cost_per_task_usd: float | None = Field(
        default=None, ge=0.0, description="USD one subtask's model calls may cost (None: no cap)."
    )
    max_repeated_tool_calls: int = Field(
        default=3, ge=2, description="Stop when the same tool call comes this many times in a row."
    )
    stagnation_turns: int | None = Field(
        default=4, ge=1, description="Stop after this many turns in a row bring nothing new."
    )
    temperature: float | None = Field(
        default=None,
        ge=0.0,
        le=2.0,
        description="Sampling temperature of the agent's model calls (0: the likeliest token "
        "each time, for repeatable answers); None: the deployment's own default.",
    )
    num_cpus: float = Field(default=0.0, ge=0.0, description="CPUs Ray reserves for the actor.")
    parallel_tool_calls: bool = Field(
        default=True,
        description="Run the tool calls the model asks for in one turn at once (each still "
        "waits for its own approval and runs at most once per side-effect key); False: one "
        "after another, and providers that can be told so are asked for one call per turn.",
    )
    reasoning: Reasoning | None = Field(
        default=None,
        description="Reasoning effort or thinking budget of the agent's model calls (sent to "
        "providers that support one); None: the model's default.",
    )
    stream: bool = Field(
        default=False, description="Stream model answers; tokens show up as job events."
    )
    memory: MemoryPolicy = Field(
        default_factory=MemoryPolicy, description="Recall before model calls; store results."
    )
    context_window: int | None = Field(
        default=None,
        ge=256,
        description="Tokens the agent's conversation, its answer, tools and memories "
        "included, is kept within: the oldest turns are summarized. The answering "
        "deployment's context_window applies too (the smaller wins); None: only that.",
    )

    @field_validator("name")
    @classmethod
    def _not_reserved(cls, name: str) -> str:
        if reserved(name):
            raise ValueError(f"agent name {name!r} is reserved for a system actor")
        return name


MAX_DELEGATES = 64
"""Agents one team may list in ``delegates``: each is granted to every agent of the team and
told of every cancel of its jobs, so the list stays short."""


def team_role(team: str, role: str) -> str:
    """The router role of ``role`` in team ``team``.

    Roles are scoped by team name, so two teams that both have a ``researcher`` never receive
    each other's subtasks.
    """
    return f"{team}.{role}"


class TeamSpec(_Config):
    """A team: agents, the models they use, and how the orchestrator drives them."""

    name: Name = Field(default="team", description="Team name, for people and logs.")
    description: str = Field(
        default="", max_length=2000, description="What the team does, for people and routing."
    )
    intent: IntentHints = Field(
        default_factory=IntentHints,
        description="How jobs that name no team or skill find this one (keywords, examples).",
    )
    agents: tuple[AgentSpec, ...] = Field(
        min_length=1, max_length=MAX_AGENTS, description="The team's agents."
    )
    models: dict[Name, ModelSpec] = Field(
        default_factory=dict, description="Model aliases this team adds to the LLM pool."
    )
    planner_model: Name = Field(
        default="default", description="Model alias that plans and aggregates jobs."
    )
    max_parallel: int = Field(
        default=16, ge=1, le=1024, description="Subtasks of one job running at once."
    )
    output_schema: JsonSchema | None = Field(
        default=None, description="JSON Schema the job's answer must satisfy (its quality gate)."
    )
    functions: dict[Name, FunctionDigest] = Field(
        default_factory=dict,
        description="The team's own function tools: name -> digest of the function a Python "
        "driver shipped to the sandboxes (raytroupe.tool). Agents name them in 'tools'. Set "
        "by drivers only: the HTTP API refuses a team with functions.",
    )
    required: tuple[str, ...] = Field(
        default=(), description="Fields the job's (JSON) answer must have, non-empty."
    )
    gate_retries: int = Field(
        default=1, ge=0, le=5, description="Times an output failing its schema is sent back."
    )
    subtask_timeout_s: float | None = Field(
        default=None, gt=0.0, description="Deadline of each subtask attempt, unless it sets one."
    )
    budget: Budget | None = Field(
        default=None, description="Default budget of each job of this team (tokens and/or USD)."
    )
    episodes: EpisodePolicy = Field(
        default_factory=EpisodePolicy,
        description="Keep its successful jobs as episodes and offer the most similar to new "
        "ones (off by default).",
    )
    keep_notes: bool = Field(
        default=False,
        description="Keep each job's scratchpad notes (the 'note' tool) as long-term memories "
        "of its tenant when it ends, tagged 'note'; by default they go with the job.",
    )
    max_subtasks: int = Field(
        default=32, ge=1, le=1024, description="Subtasks one plan may have, at most."
    )
    planning: Literal["auto", "model"] = Field(
        default="auto",
        description="auto: the orchestrator sizes each job before any model call: a task of "
        "one part goes to one agent, whose answer is the job's (no planner or aggregation "
        "call); a task listing independent questions gets one subtask per question, each sent "
        "to a role with the tools it needs, the answers assembled in order. model: the planner "
        "model plans every job (seeing each role's tools; work needing a tool repaired onto a "
        "role that has it) and the model aggregates the answers.",
    )
    plan_fallback: bool = Field(
        default=True,
        description="When the planner gives no usable plan twice, one agent (the first's "
        "role) takes the whole task, recorded on the plan; false: the job fails instead.",
    )
    plan: tuple[PlannedSubtask, ...] | None = Field(
        default=None,
        description="A fixed workflow the orchestrator runs instead of asking the planner "
        "(checked when a job starts); '{task}' in its instructions stands for the job's task.",
    )
    graph: GraphSpec | None = Field(
        default=None,
        description="A graph workflow run instead of a plan: shared typed state, edges "
        "on state or text, fan-out, joins, maps, subgraphs, checkpoints and interrupts.",
    )
    delegates: tuple[Name, ...] = Field(
        default=(),
        max_length=MAX_DELEGATES,
        description="Agents outside the team that its agents may also delegate or hand off "
        "to (with the delegate and handoff tools); by default only their teammates.",
    )

    @field_validator("output_schema", mode="before")
    @classmethod
    def _model_class(cls, schema: Any) -> Any:
        return schema_of(schema)

    @field_validator("output_schema")
    @classmethod
    def _valid_schema(cls, schema: JsonSchema | None) -> JsonSchema | None:
        return check_output_schema(schema)

    @model_validator(mode="after")
    def _consistent(self) -> TeamSpec:
        """Everything checkable without running a job is checked here, at the door."""
        duplicates = sorted(n for n, k in Counter(a.name for a in self.agents).items() if k > 1)
        if duplicates:
            raise ValueError(f"duplicate agent names: {', '.join(duplicates)}")
        too_long = [r for r in self.roles if len(team_role(self.name, r)) > _MAX_NAME]
        if too_long:
            raise ValueError(f"team name plus role must fit in {_MAX_NAME} characters: {too_long}")
        if self.budget is not None and self.budget.account is not None:
            raise ValueError("budget.account is the orchestrator's to set")
        unused = sorted(set(self.functions) - {t for a in self.agents for t in a.tools})
        if unused:
            raise ValueError(f"function tool(s) {unused} given to no agent: name them in tools")
        if self.plan is not None and self.graph is not None:
            raise ValueError("a team has a plan or a graph, not both")
        if self.plan is not None:
            if len(self.plan) > self.max_subtasks:
                raise ValueError(
                    f"the plan has {len(self.plan)} subtasks; max_subtasks is {self.max_subtasks}"
                )
            Plan(subtasks=self.plan)  # unique ids, known dependencies, no cycle
        needed = [(f"plan subtask {s.id!r}", s.role) for s in self.plan or ()]
        needed += [
            (f"graph node {n.id!r}", n.role)
            for n in (self.graph.walk() if self.graph else ())
            if n.role is not None
        ]
        unknown = [f"{where} (role {role!r})" for where, role in needed if role not in self.roles]
        if unknown:
            raise ValueError(
                f"no agent of the team has the role of {', '.join(unknown)}; "
                f"roles: {', '.join(self.roles)}"
            )
        return self

    @property
    def roles(self) -> tuple[str, ...]:
        """The team's roles, in order of first appearance."""
        return tuple(dict.fromkeys(a.role for a in self.agents))

    def peers(self, agent: str) -> tuple[str, ...]:
        """Whom ``agent`` may delegate or hand off to: its teammates and ``delegates``."""
        names = (*(a.name for a in self.agents), *self.delegates)
        return tuple(n for n in dict.fromkeys(names) if n != agent)
