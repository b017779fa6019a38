"""Worked tool exchanges shown to small local models before their first turn of work.

A small model offered the calculator mostly answers arithmetic from memory, and wrongly (Qwen
2.5 Coder 1.5B wrote "17 * 23 + 4 = 417" with the tool at hand). One worked exchange before
the task (a question, the calculator called with the expression, its result, the answer)
shows it what a call looks like in its own family's form:

- families whose chat template renders tool calls (Qwen's ``<tool_call>`` blocks, Llama 3's
  JSON, Mistral's, Hermes') get the exchange as structured turns, which the template (or, in
  text mode, ``raytroupe.actors.llm.textmode``) writes as that family writes calls;
- families whose template knows no tools (SmolLM2's, and any unrecognised one) get it the
  same way only in text mode, where raytroupe itself writes the calls; with native tools the
  exchange would reach the model as turns its template drops, so none is added.

The exchange goes right after the system prompt of every model call of a subtask whose tools
include the calculator, its later turns included: shown it only before its first turn, Qwen
2.5 Coder 1.5B answered a calculator result with the call again (with doubled braces) or an
apology ("I cannot assist with that request") in 3 of 4 word problems; the same text every
turn also keeps the server's prompt cache warm across turns.
"""

from __future__ import annotations

import re
from typing import Final

from raytroupe.protocols import ChatMessage, LLMRequest, ToolCall

__all__ = ["EXAMPLE_EXPRESSION", "EXAMPLE_RESULT", "FAMILIES", "family_of", "with_tool_examples"]

FAMILIES: Final[dict[str, re.Pattern[str]]] = {
    "qwen": re.compile(r"qwen", re.IGNORECASE),
    "llama": re.compile(r"llama-?3|meta-llama", re.IGNORECASE),
    "mistral": re.compile(r"mistral|mixtral|ministral", re.IGNORECASE),
    "hermes": re.compile(r"hermes", re.IGNORECASE),
    "smollm": re.compile(r"smollm", re.IGNORECASE),
}
"""Model families by file or model name, in the order tried."""

_TOOL_TEMPLATES: Final = frozenset({"qwen", "llama", "mistral", "hermes"})
"""Families whose chat templates render tool calls and tool results."""

_QUESTION: Final = (
    "A box holds 24 pens and a shop orders 37 boxes plus 15 loose pens. How many pens?"
)
EXAMPLE_EXPRESSION: Final = "24 * 37 + 15"
"""The worked exchange's calculator call: a small model was seen making it for other tasks."""
EXAMPLE_RESULT: Final = 903
"""The worked exchange's result: a small model was seen answering it to other tasks."""
_RESULT: Final = str(EXAMPLE_RESULT)
_ANSWER: Final = "903 pens."


def family_of(name: str) -> str | None:
    """The family of a model from its file or model name (None: not one we know)."""
    return next((f for f, pattern in FAMILIES.items() if pattern.search(name)), None)


def with_tool_examples(
    request: LLMRequest, family: str | None, *, native_tools: bool
) -> LLMRequest:
    """``request`` with the worked calculator exchange after its system prompt, where it helps.

    Only a work call offering the calculator, of a family the exchange can be written for
    (see the module's docstring).
    """
    if request.purpose != "work" or request.tool_choice == "none":
        return request
    if not any(t.name == "calculator" for t in request.tools):
        return request
    if native_tools and family not in _TOOL_TEMPLATES:
        return request
    call = ToolCall(
        call_id="example-1", tool="calculator", arguments={"expression": EXAMPLE_EXPRESSION}
    )
    exchange = (
        ChatMessage(role="user", content=_QUESTION),
        ChatMessage(role="assistant", content="", tool_calls=(call,)),
        ChatMessage(role="tool", tool_call_id=call.call_id, content=_RESULT),
        ChatMessage(role="assistant", content=_ANSWER),
    )
    head = 1 if request.messages and request.messages[0].role == "system" else 0
    messages = (*request.messages[:head], *exchange, *request.messages[head:])
    return request.model_copy(update={"messages": messages})
