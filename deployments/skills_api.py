"""``POST /v1/skills``: a skill registered from JSON or its file, the body naming it.

It runs the operation ``apply_skill`` (``PUT /v1/skills/{name}``). Listing, reading one, its
history, rolling back, optimising, promoting, deleting and lessons are declared operations
(:mod:`raytroupe.runtime.operations.skills`), served by :mod:`raytroupe.deployments.declared`.

Reading is for every key (a tenant's key sees the skills its policy lets it run); changing
is for admin keys, as for teams. A skill is sent as JSON (the :class:`SkillSpec` fields) or
as the skill file itself (``Content-Type: application/yaml``, or ``text/markdown`` for a
Markdown skill), whose problems come back with their line numbers.
"""

from __future__ import annotations

import json

import structlog
from fastapi import APIRouter, Request, Response
from pydantic import ValidationError

from raytroupe.deployments.access import Admin
from raytroupe.deployments.declared import at_of
from raytroupe.deployments.documents import checked
from raytroupe.protocols import ConfigError, InvalidInput
from raytroupe.protocols.http import SkillApplied
from raytroupe.protocols.skill import SkillEvent, SkillSpec
from raytroupe.protocols.skill_files import MAX_SKILL_BYTES
from raytroupe.runtime.client import SystemClient
from raytroupe.runtime.operations import skills as skill_ops

__all__ = ["skill_routes"]

log = structlog.get_logger("raytroupe.api")


async def _body_skill(request: Request) -> SkillSpec:
    """The skill a request carries: JSON fields, or a YAML or Markdown skill file.

    Raises:
        InvalidInput: not a skill (each problem named; a file's with its line).
    """
    raw = await request.body()
    if len(raw) > MAX_SKILL_BYTES:
        raise InvalidInput(f"a skill is at most {MAX_SKILL_BYTES} bytes", field="body")
    kind = request.headers.get("content-type", "application/json").split(";")[0].strip().lower()
    return await checked(request, _skill_of, raw, kind)


def _skill_of(raw: bytes, kind: str) -> SkillSpec:
    """The skill in a body's bytes (JSON, YAML or Markdown); run off the loop."""
    if kind in skill_ops.SKILL_FILES:  # the file readers apply_skill's route reads them with
        return skill_ops.SKILL_FILES[kind](raw)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidInput("the body is not UTF-8", field="body") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise InvalidInput(f"the body is not JSON: {e}", field="body") from None
    except RecursionError:
        raise InvalidInput("the body's JSON nests too deeply to be read", field="body") from None
    except ValueError as e:  # an integer of more digits than Python converts (4300)
        raise InvalidInput(f"the body is not JSON this API reads: {e}", field="body") from None
    try:
        return SkillSpec.model_validate(data)
    except ValidationError as e:
        problems = [
            f"{'.'.join(str(p) for p in err['loc']) or '<root>'}: {err['msg']}"
            for err in e.errors(include_url=False, include_input=False)
        ]
        raise ConfigError(f"invalid skill: {'; '.join(problems)}", problems=problems) from None


_SKILL_BODY = {
    "requestBody": {
        "required": True,
        "content": {
            "application/json": {"schema": {"$ref": "#/components/schemas/SkillSpec"}},
            "application/yaml": {"schema": {"type": "string"}},
            "text/markdown": {"schema": {"type": "string"}},
        },
    }
}


def skill_routes(client: SystemClient) -> APIRouter:
    """The ``/v1/skills`` routes."""
    routes = APIRouter(prefix="/v1/skills", tags=["skills"])

    @routes.get("/{name}/history", response_model=list[SkillEvent], deprecated=True)
    async def get_skill_history(name: str, who: Admin) -> list[SkillEvent]:
        """Deprecated for ``GET /v1/skill-history?name=``: what happened to the skill."""
        return await skill_ops.skill_history.invoke(at_of(who, client), {"name": name})

    @routes.post("", status_code=201, response_model=SkillApplied, openapi_extra=_SKILL_BODY)
    async def create_skill(request: Request, response: Response, who: Admin) -> SkillApplied:
        """Register a skill version and make it current (200 if it was registered already).

        The body names the skill: the operation ``apply_skill`` (``PUT /v1/skills/{name}``)
        without the name in the URL.
        """
        spec = await _body_skill(request)
        at = at_of(who, client)
        applied = await skill_ops.apply_skill.invoke(at, {"skill": spec})
        response.status_code = 200 if at.reply.created is False else 201
        log.info("skill_applied", skill=spec.name, version=spec.version, key=who.name)
        return applied

    return routes
