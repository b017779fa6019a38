"""What the operator allows guardrails to run: the Python callables a rule may name."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

__all__ = ["GuardrailsConfig"]

Target = Annotated[
    str, StringConstraints(pattern=r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$", max_length=200)
]


class GuardrailsConfig(BaseModel):
    """The operator's settings for guardrails."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    callables: tuple[Target, ...] = Field(
        default=(),
        description="The 'module:function' targets a callable rule may name: a guardrail "
        "(an admin's, over HTTP too) naming any other is refused. Each is imported where "
        "the stage it checks runs (the desk, agents, job shards): install it on every node.",
    )
