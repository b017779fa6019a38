"""The HTTP calls that are no declared operation, each a ``Call`` builder.

The probes, OpenAI's model list, and a skill sent as its file.

Every other call is made from its operation's declaration
(:meth:`~raytroupe.runtime.operations.Operation.call`). The OpenAI-compatible
``/v1/chat/completions`` is for OpenAI's SDKs and has no builder here.
"""

from __future__ import annotations

from typing import Final

import httpx
from pydantic import BaseModel

from raytroupe.protocols import (
    InvalidInput,
)
from raytroupe.protocols.http import (
    Health,
    Readiness,
    SkillApplied,
)
from raytroupe.runtime.http_calls import Call, read, segment

_JOBS: Final = "/v1/jobs"


def _job(job_id: str, *rest: str) -> str:
    return "/".join((_JOBS, segment(job_id, "job_id"), *rest))


# --- teams and agents ----------------------------------------------------------------------


# --- tenants' policies ---------------------------------------------------------------------


# --- operations and the console ------------------------------------------------------------


class _ModelCard(BaseModel):
    id: str


class _ModelList(BaseModel):
    data: list[_ModelCard]


def _ids(response: httpx.Response) -> list[str]:
    return [card.id for card in read(_ModelList)(response).data]


def models() -> Call[list[str]]:
    """``GET /v1/models`` (the ids: what a client may name as ``model``)."""
    return Call("GET", "/v1/models", _ids)


def model(model_id: str) -> Call[str]:
    """``GET /v1/models/{model_id}``."""
    path = f"/v1/models/{segment(model_id, 'model')}"
    return Call("GET", path, lambda response: read(_ModelCard)(response).id)


def health() -> Call[Health]:
    """``GET /healthz``."""
    return Call("GET", "/healthz", read(Health))


def ready() -> Call[Readiness]:
    """``GET /readyz`` (its 503 says which system actor does not answer)."""
    return Call("GET", "/readyz", read(Readiness), answered=frozenset({503}))


# --- skills --------------------------------------------------------------------------------

_SKILLS: Final = "/v1/skills"
_SKILL_FILE_TYPES: Final = {"yaml": "application/yaml", "markdown": "text/markdown"}


def apply_skill_file(text: str, kind: str) -> Call[SkillApplied]:
    """``POST /v1/skills`` with a skill file (``kind``: 'yaml' or 'markdown')."""
    if kind not in _SKILL_FILE_TYPES:
        raise InvalidInput(f"a skill file is 'yaml' or 'markdown', not {kind!r}", field="kind")
    return Call(
        "POST",
        _SKILLS,
        read(SkillApplied),
        content=text.encode("utf-8"),
        content_type=_SKILL_FILE_TYPES[kind],
    )
