"""Guardrails: set, read and unset by admins; each tenant reads the decisions about its jobs.

A guardrail is a named, versioned policy (:mod:`raytroupe.protocols.guardrails`) that binds
jobs by their tenant, team, skill and API key: its rules check a job's input, tool calls,
tool results and output, and block (the job ends with ``GuardrailTripped``) or redact.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Final

from pydantic import Field

from raytroupe.protocols.guardrails import (
    DecisionRecord,
    GuardrailInfo,
    GuardrailName,
    GuardrailSpec,
)
from raytroupe.runtime.operations.declare import At, given, operation

__all__ = [
    "delete_guardrail",
    "guardrail",
    "guardrail_decisions",
    "guardrails",
    "put_guardrail",
]

TAG: Final = "guardrails"

JobId = Annotated[str, Field(pattern=r"^[A-Za-z0-9_.:-]{1,100}$")]


@operation("PUT", "/v1/guardrails/{name}", cli="guardrails set", admin=True)
async def put_guardrail(
    at: At, name: GuardrailName, guardrail: GuardrailSpec | Mapping[str, Any]
) -> GuardrailInfo:
    """Set a guardrail (its next version); that version.

    Jobs admitted from now on are bound by it where ``applies_to`` says; a running job keeps
    the versions it was admitted with.

    Raises:
        Forbidden: a callable rule names a target the operator does not allow.
        InvalidInput: a regex that is not RE2, or a schema that is not a JSON Schema.
        QuotaExceeded: as many guardrails are set as may be.
    """
    return await at.system.put_guardrail(name, given(GuardrailSpec, guardrail), at.name)


@operation("GET", "/v1/guardrails", cli="guardrails list", admin=True)
async def guardrails(at: At) -> list[GuardrailInfo]:
    """Every guardrail set, its current version, by name."""
    return await at.system.guardrails()


@operation("GET", "/v1/guardrails/{name}", cli="guardrails show", admin=True)
async def guardrail(
    at: At, name: GuardrailName, version: Annotated[int, Field(ge=1)] | None = None
) -> GuardrailInfo:
    """A guardrail's current version, or ``version`` (kept after a change or an unset).

    Raises:
        GuardrailNotFound: none is set under ``name`` (or it has no such version).
    """
    return await at.system.guardrail(name, version)


@operation("DELETE", "/v1/guardrails/{name}", cli="guardrails delete", admin=True)
async def delete_guardrail(at: At, name: GuardrailName) -> GuardrailInfo:
    """Unset a guardrail: new jobs are not bound by it (its versions stay readable).

    Raises:
        GuardrailNotFound: none is set under ``name``.
    """
    return await at.system.delete_guardrail(name)


@operation("GET", "/v1/guardrail-decisions", cli="guardrails decisions")
async def guardrail_decisions(
    at: At, job_id: JobId | None = None, limit: Annotated[int, Field(ge=1, le=1000)] = 100
) -> list[DecisionRecord]:
    """What guardrails decided about the caller's tenant's jobs (an admin's: every tenant's).

    Newest first: refused input (no job), and each blocked or redacted tool call, tool
    result and output; by rule and kind of match, never the text matched.
    """
    return await at.system.guardrail_decisions(at.scope, job_id=job_id, limit=limit)
