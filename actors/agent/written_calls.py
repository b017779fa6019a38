"""Tool calls a model wrote in its answer's text instead of through the tools interface.

Small local models do this whatever mode they are served in (Qwen2.5-Coder under llama.cpp
writes bare or fenced JSON in ``content``; Hermes-style models write ``<tool_call>`` tags).
Taken as the answer, such a call is a wrong answer; :func:`read_written_calls` recognizes:

- ``<tool_call>{...}</tool_call>`` blocks anywhere in the text;
- fenced code blocks (```json ... ```) holding a call or a list of calls;
- the whole answer being a call, or a list of calls, as JSON (also inside ``<tools>`` and
  like tags), or a call followed by more JSON (the result a small model imagines for it,
  dropped: the tool's own result follows).

A call is an object ``{"name", "arguments"}`` (also ``parameters``, ``args`` or ``input`` for
the arguments, ``tool`` for the name, or the OpenAI ``{"function": {...}}`` shape) with no
other keys but ``id`` and ``type``, naming one of the agent's tools. An object of exactly
``{"name": <string>, "arguments": {...}}`` naming a tool the agent does not have is a call of
a tool the model made up (small models do: ``orderTotal``), reported with the tools it has;
other JSON is an answer. Inside ``<tool_call>`` tags the intent is plain, so a block that
cannot be read is reported (:class:`Unreadable`) for the model to write again.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any, Final

from raytroupe.protocols import ToolCall
from raytroupe.protocols.json_data import JsonSchema
from raytroupe.protocols.llm import ToolArguments

__all__ = [
    "SCHEMA_WORDS",
    "Unreadable",
    "WrittenCalls",
    "answer_of",
    "described_calculation",
    "read_written_calls",
    "without_schema_words",
]

_TAGGED: Final = re.compile(r"<tool_call>(.*?)(?:</tool_call>|\Z)", re.S)
_WRAPPED: Final = re.compile(
    r"\A\s*<(tools|tool|tool_response|function_call|function|call)>\s*(.*?)\s*</\1>\s*\Z", re.S
)
"""A whole answer that is a call in other tags: Qwen2.5 writes ``<tools>{...}</tools>``, the
tag its template lists the tools in, and ``<tool_response>{...}</tool_response>``, the tag
its template puts results in."""
_FENCED: Final = re.compile(r"```[A-Za-z0-9_-]*[ \t]*\n(.*?)```", re.S)
_STRAY_FENCES: Final = re.compile(r"\A\s*```[A-Za-z0-9_-]*[ \t]*\n|(?:\s*```)+\s*\Z")
"""A code fence opened and not closed, or fences closed and not opened, around a whole call
(Qwen2.5-Coder 1.5B wrote ``{"name": "calculator", ...}`` and then a closing fence, or two)."""
_NAME_KEYS: Final = ("name", "tool")
_ARGUMENT_KEYS: Final = ("arguments", "parameters", "args", "input")
_EXTRA_KEYS: Final = frozenset({"id", "type"})
_BLANK_LINES: Final = re.compile(r"\n{3,}")
SCHEMA_WORDS: Final = frozenset(
    {"required", "type", "properties", "description", "title", "$schema", "additionalProperties"}
)
"""JSON Schema keywords a small model copies from a tool's schema into its arguments
(Qwen2.5-Coder-0.5B writes ``{"expression": "2+2", "required": ["expression"]}``)."""


@dataclass(frozen=True)
class WrittenCalls:
    """Calls found in the text, and the text without them."""

    text: str
    calls: tuple[ToolCall, ...]


@dataclass(frozen=True)
class Unreadable:
    """The model meant to call a tool and the call cannot be read: what to tell it."""

    problem: str


def read_written_calls(
    text: str, tools: Collection[str], *, first_index: int = 0
) -> WrittenCalls | Unreadable | None:
    """The tool calls written in ``text`` (None: it holds none; it is an answer)."""
    if not tools or not text.strip():
        return None
    if "<tool_call>" in text:
        return _tagged(text, tools, first_index)
    if wrapped := _WRAPPED.match(text):
        text = wrapped.group(2)
    for match in _FENCED.finditer(text):
        calls = _calls(match.group(1), tools)
        if isinstance(calls, Unreadable):
            return calls
        if calls:
            rest = _FENCED.sub(lambda m: "" if _calls(m.group(1), tools) else m.group(0), text)
            return WrittenCalls(_tidy(rest), _numbered(calls, first_index))
    calls = _calls(text, tools)
    if isinstance(calls, Unreadable):
        return calls
    return WrittenCalls("", _numbered(calls, first_index)) if calls else None


def _tagged(text: str, tools: Collection[str], first_index: int) -> WrittenCalls | Unreadable:
    found: list[tuple[str, ToolArguments]] = []
    for match in _TAGGED.finditer(text):
        body = match.group(1).strip()
        calls = _calls(body, tools)
        if isinstance(calls, Unreadable):
            return calls
        if not calls:
            return Unreadable(
                f"the <tool_call> block {body[:200]!r} is not a call of one of your tools "
                f"({', '.join(sorted(tools))}): write "
                '<tool_call>{"name": "<tool>", "arguments": {...}}</tool_call>'
            )
        found += calls
    return WrittenCalls(_tidy(_TAGGED.sub("", text)), _numbered(found, first_index))


def _calls(body: str, tools: Collection[str]) -> list[tuple[str, ToolArguments]] | Unreadable:
    """The calls ``body`` is (a call, or a list of calls), [] if it is not calls at all."""
    body = _STRAY_FENCES.sub("", body)
    try:
        data: Any = json.loads(body)
    except json.JSONDecodeError as e:
        data = _leading(body) if e.msg == "Extra data" else None
        if data is None and any(f'"{tool}"' in body for tool in tools):  # a call, written wrong
            return Unreadable(f"a tool call that is not valid JSON ({e}): {body[:200]!r}")
        if data is None:
            return []
    items = data if isinstance(data, list) and data else [data]
    calls = []
    for item in items:
        call = _call(item, tools)
        if call is None:
            return []
        if isinstance(call, Unreadable):
            return call
        calls.append(call)
    return calls


def _leading(body: str) -> Any:
    """The JSON value ``body`` starts with, when what follows it is more JSON (else None).

    A small model writes its call and then the result it imagines (``{"result": 347}``),
    which is dropped.
    """
    decoder = json.JSONDecoder()
    try:
        value, end = decoder.raw_decode(body.strip())
        decoder.raw_decode(body.strip()[end:].strip())
    except json.JSONDecodeError:
        return None
    return value


def _call(item: Any, tools: Collection[str]) -> tuple[str, ToolArguments] | Unreadable | None:
    if not isinstance(item, dict):
        return None
    if isinstance(item.get("function"), dict) and set(item) <= {"function", *_EXTRA_KEYS}:
        item = item["function"]
    names = [k for k in _NAME_KEYS if k in item]
    given = [k for k in _ARGUMENT_KEYS if k in item]
    if len(names) != 1 or len(given) > 1 or set(item) - {*names, *given, *_EXTRA_KEYS}:
        return None
    name = item[names[0]]
    made_up = isinstance(name, str) and name not in tools and set(item) == {"name", "arguments"}
    if made_up and (item["arguments"] is None or isinstance(item["arguments"], dict)):
        return Unreadable(
            f"there is no tool {name[:80]!r}; your tools are {', '.join(sorted(tools))}: "
            "call one of them, or answer in words"
        )
    if not isinstance(name, str) or name not in tools:
        return None
    arguments = item[given[0]] if given else {}
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except json.JSONDecodeError:
            arguments = None
    if not isinstance(arguments, dict):
        return Unreadable(
            f"the arguments of your call of {name!r} are not a JSON object: "
            f"{json.dumps(item.get(given[0]))[:200]}"
        )
    return name, arguments


def _numbered(calls: list[tuple[str, ToolArguments]], first_index: int) -> tuple[ToolCall, ...]:
    return tuple(
        ToolCall(call_id=f"call_{first_index + k}", tool=name, arguments=arguments)
        for k, (name, arguments) in enumerate(calls)
    )


def _tidy(text: str) -> str:
    return _BLANK_LINES.sub("\n\n", text).strip()


_QUOTED: Final = re.compile(r"`([^`\n]{3,200})`|\"([^\"\n]{3,200})\"")
"""A span in backticks or double quotes, on one line."""
_ARITHMETIC: Final = re.compile(r"^[\d\s.,+\-*/()^%\u00d7\u00f7$\u20ac\u00a3]+$")
"""Only numbers, operators and parentheses (and currency signs)."""
_OPERATOR: Final = re.compile(r"\d\s*[-+*/^\u00d7\u00f7]\s*\(?\s*\d")


def described_calculation(text: str, *, call_id: str) -> ToolCall | None:
    """The calculator call an answer describes instead of making (None: it describes none).

    Told to check its arithmetic with the calculator, Qwen2.5-Coder 1.5B answered "we can use
    the calculator tool with the expression `3 * 2.4 * 6.2 + 2 * 3.75 * 6.2`" and then did
    the sum itself. An answer that names the calculator and quotes an expression of numbers
    and operators only (in backticks or double quotes) is read as the call of its first such
    expression; the caller reads it only before any calculator call of the subtask, so an
    answer quoting the expression it was given a result for is an answer.
    """
    if "calculator" not in text.lower():
        return None
    for match in _QUOTED.finditer(text):
        span = (match.group(1) or match.group(2)).strip()
        if _ARITHMETIC.match(span) and _OPERATOR.search(span):
            return ToolCall(call_id=call_id, tool="calculator", arguments={"expression": span})
    return None


_RESULT_TAGS: Final = re.compile(r"</?tool_response>")


def answer_of(text: str) -> str:
    """A final answer without the tool-result tags a model copied from its chat template.

    Qwen2.5 on llama.cpp was seen answering with the calculator's 395 between
    ``<tool_response>`` tags, as if the tool spoke: the answer is 395. Nothing else of the text
    is touched.
    """
    if "tool_response>" not in text:
        return text
    return _tidy(_RESULT_TAGS.sub("", text)) or text


def without_schema_words(call: ToolCall, parameters: JsonSchema) -> ToolCall:
    """``call`` without arguments that are JSON Schema keywords its tool does not take.

    Only keys of :data:`SCHEMA_WORDS` that are not properties of the tool's ``parameters``
    are dropped, and only when that schema admits no other properties: anything else the
    model wrote reaches the tool (and its validation) as written.
    """
    properties = parameters.get("properties")
    if parameters.get("additionalProperties") is not False or not isinstance(properties, dict):
        return call
    echoed = [k for k in call.arguments if k in SCHEMA_WORDS and k not in properties]
    if not echoed:
        return call
    kept = {k: v for k, v in call.arguments.items() if k not in echoed}
    return call.model_copy(update={"arguments": kept})
