"""raytroupe as an MCP server: each team and skill the caller may run is a tool.

Served at ``/mcp`` by the Serve application (streamable HTTP, behind the same guard as every
route: keys, tenants, limits; see :mod:`raytroupe.deployments.mcp_http`) and over stdio by
``troupe mcp`` (:meth:`~raytroupe.runtime.driver.Runtime.serve_mcp`, for desktop clients,
which start the server as a child process). The same handlers serve both; only who the caller
is differs (a key's tenant over HTTP; over stdio the driver, or the tenant it names).

- ``tools/list``: ``team_<name>`` for each registered team the caller may run (input: a
  ``task`` string) and ``skill_<name>`` for each skill (input: the skill's ``input_schema``,
  else a ``task``). Another tenant's skills and the teams a tenant's policy leaves out are not
  listed, and calling them by name is refused as an unknown tool.
- ``tools/call``: the job is submitted as ``POST /v1/jobs`` submits it (the tenant's policy
  and budgets apply), followed to its end, and answered with its answer as text and the
  standard output envelope (:class:`~raytroupe.protocols.StandardOutput`) as structured
  content; a job that fails is a tool error naming its code. A caller that asked for
  progress gets a notification per step (plan, each subtask started and finished,
  aggregation). A cancelled request (the client closes the stream, or sends
  ``notifications/cancelled`` where its transport carries them) cancels the job.
- ``resources``: ``troupe://jobs/{job_id}/result`` and ``troupe://jobs/{job_id}/trace``
  (JSON) for the caller's own jobs; the result of every tool call names its job.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final, Literal

import anyio
import mcp_types as mt
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError

from raytroupe import __version__
from raytroupe.protocols import (
    InvalidInput,
    JobEvent,
    JobResult,
    SkillNotFound,
    SkillSpec,
    StandardOutput,
    TeamNotFound,
    TeamSpec,
    TroupeError,
)
from raytroupe.protocols.http import JobView
from raytroupe.runtime.operations import At, job_reads, jobs, skills, submit, teams

__all__ = ["SKILL_PREFIX", "TEAM_PREFIX", "AtFor", "mcp_server", "serve_stdio"]

TEAM_PREFIX: Final = "team_"
SKILL_PREFIX: Final = "skill_"
_RESOURCE = re.compile(r"^troupe://jobs/(?P<job_id>[^/]{1,64})/(?P<part>result|trace)$")
_TASK_SCHEMA: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {
        "task": {"type": "string", "minLength": 1, "maxLength": 200_000,
                 "description": "What is asked, in words."},
    },
    "required": ["task"],
    "additionalProperties": False,
}  # fmt: skip
_OUTPUT_SCHEMA: Final = StandardOutput.model_json_schema()
_INVALID_PARAMS: Final = -32602
_NOT_FOUND: Final = -32002
"""MCP's code for a resource that does not exist."""

AtFor = Callable[[ServerRequestContext[Any, Any]], At]
"""Who a request's operations run for (over HTTP: its key's tenant)."""


def mcp_server(at_for: AtFor) -> Server[Any]:
    """The MCP server whose operations run for ``at_for(ctx)``, the caller of each request."""

    async def list_tools(
        ctx: ServerRequestContext[Any, Any], _params: mt.PaginatedRequestParams | None
    ) -> mt.ListToolsResult:
        found = await _tools(at_for(ctx))
        tools = [entry.tool for entry in found.values()]
        return mt.ListToolsResult(tools=tools, cache_scope="private")  # the caller's own

    async def call_tool(
        ctx: ServerRequestContext[Any, Any], params: mt.CallToolRequestParams
    ) -> mt.CallToolResult:
        at = at_for(ctx)
        entry = await _tool(at, params.name)
        if entry is None:
            raise MCPError(_INVALID_PARAMS, f"no tool {params.name!r} for this caller")
        arguments = dict(params.arguments or {})
        try:  # shielded: a call cancelled while its job is being accepted cancels that job below
            with anyio.CancelScope(shield=True):
                order = _order(params.name, arguments, entry.takes)
                accepted = await submit.submit.run_for(at, order)
        except TroupeError as exc:
            return _failed(f"{exc.code.value}: {exc.message}", None)
        try:
            view = await _followed(at, accepted.id, ctx)
        except TroupeError as exc:  # following it failed, not the job: it goes on
            said = f"job {accepted.id} could not be followed ({exc.code.value}: {exc.message})"
            return _failed(f"{said}; read troupe://jobs/{accepted.id}/result", accepted.id)
        except BaseException:  # the call was cancelled, or its caller's stream broke: so is its job
            with anyio.CancelScope(shield=True), contextlib.suppress(TroupeError):
                await jobs.cancel.run_for(at, {"job_id": accepted.id})
            raise
        return _answer(view)

    async def list_resources(
        _ctx: ServerRequestContext[Any, Any], _params: mt.PaginatedRequestParams | None
    ) -> mt.ListResourcesResult:
        return mt.ListResourcesResult(resources=[])  # a job's are reached by its templates

    async def list_templates(
        _ctx: ServerRequestContext[Any, Any], _params: mt.PaginatedRequestParams | None
    ) -> mt.ListResourceTemplatesResult:
        return mt.ListResourceTemplatesResult(
            resource_templates=[
                mt.ResourceTemplate(
                    name="job-result", uri_template="troupe://jobs/{job_id}/result",
                    mime_type="application/json",
                    description="A job of yours: its status and, once it has one, its result.",
                ),
                mt.ResourceTemplate(
                    name="job-trace", uri_template="troupe://jobs/{job_id}/trace",
                    mime_type="application/json",
                    description="A job of yours: its spans (plan, subtasks, model and tool "
                    "calls) so far.",
                ),
            ]
        )  # fmt: skip

    async def read_resource(
        ctx: ServerRequestContext[Any, Any], params: mt.ReadResourceRequestParams
    ) -> mt.ReadResourceResult:
        uri = str(params.uri)
        found = _RESOURCE.match(uri)
        if found is None:
            raise MCPError(_NOT_FOUND, f"no resource {uri!r}")
        op = job_reads.job if found["part"] == "result" else job_reads.trace
        try:
            answer = await op.run_for(at_for(ctx), {"job_id": found["job_id"]})
        except TroupeError as exc:  # another tenant's job is as absent as one never made
            raise MCPError(_NOT_FOUND, f"{exc.code.value}: {exc.message}") from None
        text = answer.model_dump_json()
        return mt.ReadResourceResult(
            contents=[mt.TextResourceContents(uri=uri, mime_type="application/json", text=text)]
        )

    return Server(
        "raytroupe",
        version=__version__,
        instructions="Each tool runs a multi-agent job (a team, or a skill) and answers with "
        "its result; troupe://jobs/{job_id}/result and /trace read a job of yours.",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_list_resource_templates=list_templates,
        on_read_resource=read_resource,
    )


@dataclass(frozen=True)
class _Entry:
    """A tool, and how its arguments become a job's.

    ``task``: a ``task`` string; ``input``: the skill's input; ``wrapped``: a skill's input
    that is not an object, given as the argument ``input``.
    """

    tool: mt.Tool
    takes: Literal["task", "input", "wrapped"]


async def _tools(at: At) -> dict[str, _Entry]:
    """The tools ``at`` may call, by name: its teams', then its skills'."""
    entries = [_team_entry(n, spec) for n, spec in (await teams.teams.run_for(at, {})).items()]
    listed = (await skills.skills.run_for(at, {})).skills
    entries += [_skill_entry(await skills.skill.run_for(at, {"name": i.name})) for i in listed]
    return {entry.tool.name: entry for entry in entries}


async def _tool(at: At, name: str) -> _Entry | None:
    """The tool ``name`` if ``at`` may call it (only that team or skill is read)."""
    try:
        if name.startswith(TEAM_PREFIX):
            team = name.removeprefix(TEAM_PREFIX)
            return _team_entry(team, await teams.team.run_for(at, {"name": team}))
        if name.startswith(SKILL_PREFIX):
            skill = name.removeprefix(SKILL_PREFIX)
            return _skill_entry(await skills.skill.run_for(at, {"name": skill}))
    except (TeamNotFound, SkillNotFound, InvalidInput):
        return None
    return None


_HINTS: Final = mt.ToolAnnotations(read_only_hint=False, open_world_hint=True)


def _team_entry(name: str, spec: TeamSpec) -> _Entry:
    tool = mt.Tool(
        name=TEAM_PREFIX + name, title=f"Team {name}",
        description=spec.description or f"Run a job of the team {name}.",
        input_schema=_TASK_SCHEMA, output_schema=_OUTPUT_SCHEMA, annotations=_HINTS,
    )  # fmt: skip
    return _Entry(tool, "task")


def _skill_entry(spec: SkillSpec) -> _Entry:
    schema = spec.input_schema
    takes: Literal["task", "input", "wrapped"] = "task"
    if schema is not None:
        takes = "input" if schema.get("type") == "object" else "wrapped"
    if takes == "wrapped":
        schema = {"type": "object", "properties": {"input": schema}, "required": ["input"]}
    tool = mt.Tool(
        name=SKILL_PREFIX + spec.name, title=f"Skill {spec.name} ({spec.version})",
        description=spec.description, input_schema=schema or _TASK_SCHEMA,
        output_schema=_OUTPUT_SCHEMA, annotations=_HINTS,
    )  # fmt: skip
    return _Entry(tool, takes)


def _order(name: str, arguments: dict[str, Any], takes: str) -> dict[str, Any]:
    """The ``submit`` operation's arguments for a call of the tool ``name``."""
    if takes == "task" and (set(arguments) != {"task"} or not isinstance(arguments["task"], str)):
        raise MCPError(_INVALID_PARAMS, f"{name} takes one argument, 'task' (a string)")
    if takes == "wrapped" and set(arguments) != {"input"}:
        raise MCPError(_INVALID_PARAMS, f"{name} takes one argument, 'input'")
    if name.startswith(TEAM_PREFIX):
        return {"task": arguments["task"], "team": name.removeprefix(TEAM_PREFIX)}
    skill = name.removeprefix(SKILL_PREFIX)
    if takes == "task":
        return {"task": arguments["task"], "skill": skill}
    given = arguments["input"] if takes == "wrapped" else arguments
    return {"skill": skill, "input": given}  # checked by the skill's input_schema


async def _followed(at: At, job_id: str, ctx: ServerRequestContext[Any, Any]) -> JobView:
    """The job once it has ended, its steps reported as progress to a caller who asked."""
    total: int | None = None
    done = 0
    stream = await job_reads.events.run_for(at, {"job_id": job_id})
    async for event in stream:
        if event is None:
            continue
        if event.type == "plan_ready":
            total = len(event.data.get("subtasks", ()))  # type: ignore[arg-type]
        elif event.type == "subtask_finished":
            done += 1
        if event.type != "llm_delta":
            await ctx.session.report_progress(done, total, _step(event))
    return await job_reads.job.run_for(at, {"job_id": job_id})


def _step(event: JobEvent) -> str:
    """What a job's event says, for a person watching its progress."""
    said = event.type.replace("_", " ")
    return f"{said}: {event.subtask_id}" if event.subtask_id else said


def _answer(view: JobView) -> mt.CallToolResult:
    result = view.result
    if result is None or result.status != "succeeded" or result.output is None:
        return _failed(_why(view.id, result), view.id)
    return mt.CallToolResult(
        content=[mt.TextContent(text=result.answer)],
        structured_content=result.output.model_dump(mode="json"),
        meta={"raytroupe/job_id": view.id},
    )


def _why(job_id: str, result: JobResult | None) -> str:
    if result is None or result.error is None:
        return f"job {job_id} ended {result.status if result else 'without a result'}"
    return f"job {job_id} {result.status}: {result.error.code.value}: {result.error.message}"


def _failed(said: str, job_id: str | None) -> mt.CallToolResult:
    """A tool error saying ``said`` (with the job's id, if one was started)."""
    meta = None if job_id is None else {"raytroupe/job_id": job_id}
    return mt.CallToolResult(content=[mt.TextContent(text=said)], is_error=True, meta=meta)


async def serve_stdio(at: At) -> None:
    """Serve the MCP server for ``at`` on this process's stdin and stdout until stdin ends."""
    server = mcp_server(lambda _ctx: at)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())
