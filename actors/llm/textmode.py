"""Tool calling through plain text, for OpenAI-compatible servers without native tools.

The tools and the exact call format go into the system prompt; the model answers with one
line per call::

    <tool_call>{"name": "calculator", "arguments": {"expression": "2 + 2"}}</tool_call>

:func:`parse_tool_calls` takes those blocks out of the answer. Earlier tool calls are written
back in the same format, and tool results become user messages (``Tool result for <id>: ...``),
since such servers often reject role ``tool``. Call ids are deterministic: ``call_<n>``, ``n``
counting every call in the conversation.

*Constrained* text mode, for servers that decode under a JSON Schema (llama.cpp, vLLM): every
answer is JSON: a call ``{"name": ..., "arguments": {...}}`` (the shape instruction-tuned
models write calls in unprompted), a list of calls, or ``{"answer": ...}``; and
:func:`constrained_schema` is sent as the ``response_format``, so the server can only produce
a known tool's name with arguments of that tool's schema, or an answer (of the request's own
``response_format`` when it has one).
"""

from __future__ import annotations

import json
import re
from typing import Any, Final

from raytroupe.protocols import ChatMessage, ModelError, ToolCall, ToolSpec
from raytroupe.protocols.json_data import JsonSchema
from raytroupe.protocols.llm import ToolArguments

__all__ = [
    "CLOSE_TAG",
    "OPEN_TAG",
    "ConstrainedStream",
    "TextModeStream",
    "constrained_schema",
    "count_calls",
    "parse_arguments",
    "parse_constrained",
    "parse_tool_calls",
    "to_text_mode",
    "tool_prompt",
]

OPEN_TAG: Final = "<tool_call>"
CLOSE_TAG: Final = "</tool_call>"
_BLANK_LINES: Final = re.compile(r"\n{3,}")
_BLOCK: Final = re.compile(re.escape(OPEN_TAG) + r"(.*?)(?:" + re.escape(CLOSE_TAG) + r"|\Z)", re.S)


def tool_prompt(tools: tuple[ToolSpec, ...], tool_choice: str, *, constrained: bool = False) -> str:
    """The system-prompt section that describes ``tools`` and how to call them."""
    lines = ["# Tools", "", "You can call these tools:", ""]
    for tool in tools:
        schema = json.dumps(tool.parameters, sort_keys=True)
        lines.append(f"- {tool.name}: {tool.description}\n  Arguments (JSON Schema): {schema}")
    if constrained:
        lines += [
            "",
            "Answer in JSON. To call a tool:",
            '{"name": "<tool name>", "arguments": {...}}',
            "(several calls: a JSON list of them), then wait: each result comes back as "
            "'Tool result for <call id>: ...'.",
        ]
        if tool_choice == "required":
            lines.append("You must call at least one tool now.")
        else:
            lines.append('When you need no tool, give your final answer as {"answer": ...}.')
        return "\n".join(lines)
    lines += [
        "",
        "To call a tool, answer with one line per call, exactly in this format:",
        f'{OPEN_TAG}{{"name": "<tool name>", "arguments": {{...}}}}{CLOSE_TAG}',
        "Then stop and wait: each result comes back as 'Tool result for <call id>: ...'.",
    ]
    if tool_choice == "required":
        lines.append("You must call at least one tool now.")
    else:
        lines.append("Answer without a tool call when you need none.")
    return "\n".join(lines)


def count_calls(messages: tuple[ChatMessage, ...]) -> int:
    """How many tool calls the conversation holds: the first id a new answer gets."""
    return sum(len(m.tool_calls) for m in messages)


def to_text_mode(
    messages: tuple[ChatMessage, ...],
    tools: tuple[ToolSpec, ...],
    tool_choice: str,
    *,
    constrained: bool = False,
) -> tuple[ChatMessage, ...]:
    """``messages`` rewritten for a server that knows no tools.

    The tool description joins the first system message (or a new one, placed first), unless
    there are no tools or ``tool_choice`` is ``'none'``; assistant tool calls become
    ``<tool_call>`` lines (``constrained``: the JSON object such an answer is); consecutive
    tool results merge into one user message.
    """
    out: list[ChatMessage] = []
    for message in messages:
        if message.role == "tool":
            line = f"Tool result for {message.tool_call_id or 'unknown'}: {message.text}"
            if out and out[-1].role == "user" and out[-1].text.startswith("Tool result for "):
                line = f"{out.pop().text}\n\n{line}"
            out.append(ChatMessage(role="user", content=line))
        elif message.role == "assistant" and message.tool_calls and constrained:
            calls = [{"name": c.tool, "arguments": c.arguments} for c in message.tool_calls]
            written = calls[0] if len(calls) == 1 else calls
            out.append(ChatMessage(role="assistant", content=json.dumps(written)))
        elif message.role == "assistant" and message.tool_calls:
            blocks = [_block(call) for call in message.tool_calls]
            text = "\n".join([message.text, *blocks] if message.text else blocks)
            out.append(ChatMessage(role="assistant", content=text))
        else:
            out.append(message)
    if not tools or tool_choice == "none":
        return tuple(out)
    section = tool_prompt(tools, tool_choice, constrained=constrained)
    for i, message in enumerate(out):
        if message.role == "system":
            out[i] = ChatMessage(role="system", content=f"{message.text}\n\n{section}")
            return tuple(out)
    return (ChatMessage(role="system", content=section), *out)


def _block(call: ToolCall) -> str:
    payload = json.dumps({"name": call.tool, "arguments": call.arguments})
    return f"{OPEN_TAG}{payload}{CLOSE_TAG}"


def parse_tool_calls(text: str, *, first_index: int = 0) -> tuple[str, tuple[ToolCall, ...]]:
    """Split an answer into (text without the call blocks, tool calls).

    A last block left unclosed (a stop sequence cut it) counts if its JSON is complete.

    Raises:
        ModelError: a block whose JSON is not ``{"name": str, "arguments": object}``; the
            model broke the format, so the caller should not take the text as an answer.
    """
    calls: list[ToolCall] = []
    for match in _BLOCK.finditer(text):
        body = match.group(1).strip()
        try:
            data: Any = json.loads(body)
        except json.JSONDecodeError:
            data = None
        name = data.get("name") if isinstance(data, dict) else None
        arguments = data.get("arguments", {}) if isinstance(data, dict) else None
        if not isinstance(name, str) or not name or not isinstance(arguments, dict | str):
            raise ModelError(
                f"the model wrote a malformed tool call: {body[:200]!r}", reason="tool_format"
            )
        if isinstance(arguments, str):
            arguments = parse_arguments(arguments, name)
        call_id = f"call_{first_index + len(calls)}"
        calls.append(ToolCall(call_id=call_id, tool=name, arguments=arguments))
    if not calls:
        return text, ()
    return _BLANK_LINES.sub("\n\n", _BLOCK.sub("", text)).strip(), tuple(calls)


def constrained_schema(
    tools: tuple[ToolSpec, ...], tool_choice: str, answer: dict[str, Any] | None
) -> JsonSchema:
    """The JSON Schema every constrained answer meets: known calls, or an answer.

    Each call's ``arguments`` are held to its own tool's schema; the answer is a string, or
    of ``answer`` (the request's ``response_format``) when given.
    """
    one_call: dict[str, Any] = {
        "anyOf": [
            {
                "type": "object",
                "properties": {"name": {"const": t.name}, "arguments": t.parameters},
                "required": ["name", "arguments"],
                "additionalProperties": False,
            }
            for t in tools
        ]
    }
    calls = [one_call, {"type": "array", "minItems": 1, "items": one_call}]
    if tool_choice == "required":
        return {"anyOf": calls}
    reply = {
        "type": "object",
        "properties": {"answer": answer if answer is not None else {"type": "string"}},
        "required": ["answer"],
        "additionalProperties": False,
    }
    return {"anyOf": [*calls, reply]}


def parse_constrained(text: str, *, first_index: int = 0) -> tuple[str, tuple[ToolCall, ...]]:
    """Split a constrained answer into (answer text, tool calls).

    An answer that is not the constrained JSON (a server that ignored the schema) is read as
    a plain text-mode answer (:func:`parse_tool_calls`). A structured ``answer`` is returned
    as its JSON text.

    Raises:
        ModelError: a call that is not ``{"name": str, "arguments": object}``.
    """
    try:
        data: Any = json.loads(text)
    except json.JSONDecodeError:
        return parse_tool_calls(text, first_index=first_index)
    if isinstance(data, dict) and "answer" in data and "name" not in data:
        answer = data["answer"]
        return (answer if isinstance(answer, str) else json.dumps(answer)), ()
    entries = data if isinstance(data, list) else [data] if isinstance(data, dict) else None
    if not entries:
        return text, ()
    calls: list[ToolCall] = []
    for entry in entries:
        name = entry.get("name") if isinstance(entry, dict) else None
        arguments = entry.get("arguments", {}) if isinstance(entry, dict) else None
        if not isinstance(name, str) or not name or not isinstance(arguments, dict):
            raise ModelError(
                f"the model wrote a malformed tool call: {json.dumps(entry)[:200]!r}",
                reason="tool_format",
            )
        calls.append(
            ToolCall(call_id=f"call_{first_index + len(calls)}", tool=name, arguments=arguments)
        )
    return "", tuple(calls)


def parse_arguments(raw: str | None, tool: str) -> ToolArguments:
    """A tool call's JSON arguments as a dict (``{}`` when empty or missing); any provider.

    Raises:
        ModelError: the model wrote arguments that are not a JSON object (the answer is
            unusable as it is; a retry may get valid ones).
    """
    if raw is None or not raw.strip():
        return {}
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        value = None
    if not isinstance(value, dict):
        raise ModelError(
            f"the model wrote invalid JSON arguments for tool {tool!r}: {raw[:200]!r}",
            tool=tool,
            reason="tool_arguments",
        )
    return value


class TextModeStream:
    """Filters streamed text so ``<tool_call>`` blocks are never shown as answer text.

    :meth:`feed` returns the part of a chunk that is safe to show now (holding back what
    could be the start of a tag); :meth:`flush` returns what is left at the end. The whole
    text, blocks included, is kept in :attr:`raw` for :func:`parse_tool_calls`.
    """

    def __init__(self) -> None:
        self.raw = ""
        self._pending = ""
        self._inside = False

    def feed(self, chunk: str) -> str:
        """The showable text of ``chunk``, given what came before it."""
        self.raw += chunk
        self._pending += chunk
        shown: list[str] = []
        while self._pending:
            tag = CLOSE_TAG if self._inside else OPEN_TAG
            at = self._pending.find(tag)
            if at >= 0:
                if not self._inside:
                    shown.append(self._pending[:at])
                self._pending = self._pending[at + len(tag) :]
                self._inside = not self._inside
                continue
            keep = _partial_tag_length(self._pending, tag)
            if not self._inside:
                shown.append(self._pending[: len(self._pending) - keep])
            self._pending = self._pending[len(self._pending) - keep :]
            break
        return "".join(shown)

    def flush(self) -> str:
        """What is left to show once the stream ended (nothing, inside a block)."""
        rest, self._pending = ("" if self._inside else self._pending), ""
        return rest


class ConstrainedStream(TextModeStream):
    """A constrained answer is JSON until it ends: nothing is shown before it is parsed."""

    def feed(self, chunk: str) -> str:
        """Nothing yet: the chunk is kept in :attr:`raw`."""
        self.raw += chunk
        return ""

    def flush(self) -> str:
        """Nothing: the parsed answer is shown instead."""
        return ""


def _partial_tag_length(text: str, tag: str) -> int:
    """Length of the longest suffix of ``text`` that is a proper prefix of ``tag``."""
    for size in range(min(len(tag) - 1, len(text)), 0, -1):
        if text.endswith(tag[:size]):
            return size
    return 0
