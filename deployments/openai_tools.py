"""A chat request's own tools: the team may answer by asking the caller to run one.

raytroupe can then stand as the model behind another framework's tool loop (the OpenAI Agents
SDK, LangChain's ``ChatOpenAI``): the caller offers ``tools`` (functions with a JSON Schema of
their arguments) and a ``tool_choice``; the job is told of them beside its task, and when its
answer is a request to call them, the completion answers with ``tool_calls`` and
``finish_reason: "tool_calls"``. The caller runs them and sends the conversation on (the
assistant's ``tool_calls``, then a ``tool`` message per result); the next job is shown what
was called and what came back, and answers or asks again.

What a caller must know:

- The team runs nothing of the caller's: it only asks. An answer asks when it is exactly a
  JSON object ``{"tool_calls": [{"name": ..., "arguments": {...}}, ...]}`` (a code fence
  around it is taken off), every name is one of the request's tools, and every ``arguments``
  fits that tool's ``parameters``. An answer naming a tool the caller did not offer, or
  arguments its schema refuses, is not passed on as a call: the request fails
  (``bad_response``, 502), since a model (or a prompt injected into one) must not make the
  caller run what it did not offer.
- ``tool_choice``: ``none`` (the tools are not shown; the answer is text), ``auto`` (the
  default), ``required`` (the answer must ask for a call) or ``{"type": "function",
  "function": {"name": N}}`` (it must call N, and only N). A text answer where a call was
  required fails the request (``bad_response``). ``parallel_tool_calls: false`` allows one
  call per answer.
- Limits: 128 tools, names ``^[A-Za-z0-9_-]{1,64}$``, descriptions of 4,000 characters,
  every ``parameters`` a JSON Schema (2020-12, nothing outside it referred to), 64 KiB of
  tool definitions in all. A request past them is a 422 naming the field; nothing starts.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal, NoReturn

from raytroupe.protocols import InvalidRequest, TroupeError
from raytroupe.protocols.errors.base import ErrorCode
from raytroupe.protocols.output_schema import check_output_schema
from raytroupe.protocols.safe_schema import safe_validator

__all__ = [
    "CallerTools", "ToolCallsAsked", "asked_calls", "called", "caller_tools", "tool_turns",
]  # fmt: skip

MAX_TOOLS: Final = 128
MAX_DESCRIPTION: Final = 4000
MAX_DEFINITIONS_BYTES: Final = 64 * 1024
_NAME: Final = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_FENCE: Final = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.DOTALL)
Choice = Literal["auto", "required", "one"]


class ToolCallsAsked(TroupeError):
    """The team's answer asked for calls the request does not allow (or for none it must)."""

    code = ErrorCode.BAD_RESPONSE


@dataclass(frozen=True)
class CallerTools:
    """The tools a request offers and what its ``tool_choice`` says."""

    tools: dict[str, dict[str, Any]]
    """name -> ``{"description": str, "parameters": schema}``."""
    choice: Choice
    only: str | None = None
    """The one tool ``tool_choice`` names."""
    parallel: bool = True

    def instructions(self) -> str:
        """What the job is told, beside its task, of the caller's tools.

        Each tool is one JSON object, as models are shown tools in their own templates (a
        small model copied a ``Tool <name>:`` heading into the call's name), and the names
        a call may take are said once more, exactly.
        """
        shown = [
            {
                "name": name,
                "description": tool["description"] or "",
                "parameters": tool["parameters"],
            }
            for name, tool in self.tools.items()
        ]
        listed = "\n".join(json.dumps(one) for one in shown)
        names = ", ".join(self.tools) if self.only is None else self.only
        must = {
            "auto": "Answer in words, or ask for calls when you need what a tool gives.",
            "required": "You must answer by asking for at least one call.",
            "one": f"You must answer by asking for a call of {self.only}, and of no other tool.",
        }[self.choice]
        many = "" if self.parallel else " Ask for one call at a time."
        return (
            "The caller can run these tools of its own (you cannot run them; you may ask the "
            "caller to). To ask, make your whole answer only this JSON object: "
            '{"tool_calls": [{"name": "<tool>", "arguments": {<its arguments>}}]}, where '
            f'"name" is exactly one of: {names}. {must}{many}\n'
            f"The caller's tools:\n{listed}"
        )


def caller_tools(asked: Mapping[str, Any]) -> CallerTools | None:
    """The request's tools and choice (None: none offered, or ``tool_choice`` is ``none``).

    Raises:
        InvalidRequest: a tool, the choice or ``parallel_tool_calls`` is not of OpenAI's
            shape, or goes past the limits (the field is named).
    """
    offered = asked.get("tools")
    choice = asked.get("tool_choice")
    if offered in (None, []):
        if choice not in (None, "none", "auto"):
            _refuse("tool_choice", "a tool_choice that calls a tool needs tools")
        return None
    if not isinstance(offered, list):
        _refuse("tools", "tools must be a list of function tools")
    if len(offered) > MAX_TOOLS:
        _refuse("tools", f"at most {MAX_TOOLS} tools")
    if len(json.dumps(offered, default=str)) > MAX_DEFINITIONS_BYTES:
        _refuse("tools", f"the tools' definitions exceed {MAX_DEFINITIONS_BYTES} bytes")
    tools = dict(_tool(n, tool) for n, tool in enumerate(offered))
    if len(tools) != len(offered):
        _refuse("tools", "two tools have the same name")
    parallel = asked.get("parallel_tool_calls", True)
    if not isinstance(parallel, bool):
        _refuse("parallel_tool_calls", "parallel_tool_calls must be a boolean")
    if choice in (None, "auto"):
        return CallerTools(tools, "auto", parallel=parallel)
    if choice == "none":
        return None
    if choice == "required":
        return CallerTools(tools, "required", parallel=parallel)
    named = choice.get("function") if isinstance(choice, dict) else None
    name = named.get("name") if isinstance(named, dict) else None
    if not isinstance(choice, dict) or choice.get("type") != "function" or name not in tools:
        _refuse("tool_choice", "tool_choice must be none, auto, required or "
                '{"type": "function", "function": {"name": <one of the tools>}}')  # fmt: skip
    return CallerTools(tools, "one", only=str(name), parallel=parallel)


def _tool(n: int, tool: Any) -> tuple[str, dict[str, Any]]:
    where = f"tools[{n}]"
    function = tool.get("function") if isinstance(tool, dict) else None
    if (
        not isinstance(tool, dict)
        or tool.get("type") != "function"
        or not isinstance(function, dict)
    ):
        _refuse(where, 'a tool must be {"type": "function", "function": {...}}')
    name = function.get("name")
    if not isinstance(name, str) or not _NAME.match(name):
        _refuse(f"{where}.function.name", "a name of 1 to 64 letters, digits, '_' or '-'")
    description = function.get("description") or ""
    if not isinstance(description, str) or len(description) > MAX_DESCRIPTION:
        _refuse(f"{where}.function.description", f"a string of {MAX_DESCRIPTION} characters "
                "at most")  # fmt: skip
    parameters = function.get("parameters") or {"type": "object", "properties": {}}
    if not isinstance(parameters, dict):
        _refuse(f"{where}.function.parameters", "a JSON Schema object")
    try:
        check_output_schema(parameters, f"{where}.function.parameters")
    except ValueError as exc:
        _refuse(f"{where}.function.parameters", str(exc))
    return name, {"description": description, "parameters": parameters}


def _refuse(field: str, why: str) -> NoReturn:
    said = f"{field}: {why}"
    raise InvalidRequest(said, field=field, problems=[f"body.{field}: {why}"])


def asked_calls(answer: str, tools: CallerTools) -> list[tuple[str, dict[str, Any]]] | None:
    """The calls ``answer`` asks the caller for (None: it is an answer in words).

    Raises:
        ToolCallsAsked: it asks for a tool not offered, with arguments its schema refuses,
            for several where one is allowed, or it is words where a call is required.
    """
    calls = _parsed(answer)
    if calls is None:
        if tools.choice != "auto":
            raise ToolCallsAsked(
                "the team answered in words where tool_choice required a call of "
                + (tools.only or "a tool")
            )
        return None
    if not tools.parallel and len(calls) > 1:
        raise ToolCallsAsked(f"the team asked for {len(calls)} calls; parallel_tool_calls is off")
    for name, arguments in calls:
        if name not in tools.tools or (tools.only is not None and name != tools.only):
            raise ToolCallsAsked(f"the team asked for a call of {name!r}, which is not offered")
        problems = [e.message for e in safe_validator(tools.tools[name]["parameters"])
                    .iter_errors(arguments)][:3]  # fmt: skip
        if problems:
            raise ToolCallsAsked(
                f"the team asked for {name} with arguments its schema refuses: "
                + "; ".join(problems)
            )
    return calls


def _parsed(answer: str) -> list[tuple[str, dict[str, Any]]] | None:
    text = answer.strip()
    fenced = _FENCE.match(text)
    if fenced is not None:
        text = fenced.group(1)
    if not text.startswith("{"):
        return None
    try:
        asked = json.loads(text)
    except ValueError:
        return None
    listed = asked.get("tool_calls") if isinstance(asked, dict) else None
    if not isinstance(listed, list) or not listed or set(asked) != {"tool_calls"}:
        return None
    calls = []
    for call in listed:
        if not isinstance(call, dict) or not isinstance(call.get("name"), str):
            raise ToolCallsAsked("the team's tool_calls must each have a name and arguments")
        arguments = call.get("arguments", {})
        if isinstance(arguments, str):  # as OpenAI writes them: a JSON string
            try:
                arguments = json.loads(arguments)
            except ValueError:
                arguments = None
        if not isinstance(arguments, dict):
            raise ToolCallsAsked(f"the arguments of {call['name']!r} must be a JSON object")
        calls.append((call["name"], arguments))
    return calls


def called(job_id: str, calls: list[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    """``calls`` as an assistant message's ``tool_calls`` (ids unique to the job)."""
    return [
        {"id": f"call_{job_id}_{n}", "type": "function",
         "function": {"name": name, "arguments": json.dumps(arguments)}}
        for n, (name, arguments) in enumerate(calls)
    ]  # fmt: skip


def tool_turns(messages: list[dict[str, Any]]) -> str:
    """What the caller's tools did since its last user message, as the job is told it ('')."""
    users = [i for i, m in enumerate(messages) if isinstance(m, dict) and m.get("role") == "user"]
    if not users:
        return ""
    said: list[str] = []
    names: dict[str, str] = {}
    for message in messages[users[-1] + 1 :]:
        role = message.get("role")
        if role == "assistant":
            for call in message.get("tool_calls") or ():
                function = call.get("function") if isinstance(call, dict) else None
                if isinstance(function, dict):
                    names[str(call.get("id"))] = str(function.get("name"))
                    said.append(f"You asked for {function.get('name')}"
                                f"({function.get('arguments')})")  # fmt: skip
            if isinstance(message.get("content"), str) and message["content"].strip():
                said.append(f"You said: {message['content'].strip()}")
        elif role == "tool":
            name = names.get(str(message.get("tool_call_id")), "a tool")
            said.append(f"The caller ran {name}; it returned: {_content(message)}")
    if not said:
        return ""
    return (
        "What happened since, in order:\n"
        + "\n".join(said)
        + ("\nUse these results: answer the task, or ask for more calls.")
    )


def _content(message: Mapping[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return "" if content is None else str(content)
