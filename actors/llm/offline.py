"""The deterministic offline provider: no network, no keys, the same answer every time.

What it does, by ``LLMRequest.purpose``:

- ``plan``: splits the last user message into subtasks, by list items (``-``, ``*``, ``1.``,
  ``1)``) when there are at least two, else by non-empty lines, else by sentences. Roles come
  from the ``role`` of the request's ``response_format`` schema (``oneOf`` of ``const`` with a
  ``description``, or ``enum``): a subtask with an arithmetic expression goes to a role whose
  description mentions the calculator, the others round-robin over the remaining roles (all
  roles, if none remain). It plans the first user message (the task, without the session
  history or examples that may follow it), merges consecutive
  items when there are more than the schema's ``maxItems``, and answers with the plan as JSON
  text, as a real model constrained by that schema would. Subtasks are independent.
- ``work``: if a ``calculator`` tool is offered and the instructions contain an arithmetic
  expression (``17 * 23 + 4``), it calls the calculator; once a tool result is in the
  conversation it answers with it. Otherwise it answers extractively: the (at most two)
  sentences of its inputs, questions excepted, that share the most words with the
  instructions, or it says that its inputs hold no answer. Its inputs are the rest of the
  user turn and the knowledge passages of the system messages (``[source#position] text``
  lines); a sentence drawn from a passage keeps its citation.
- ``aggregate``: returns the lines under ``Subtask results:`` in the last user message.
- ``summarize``: the first sentence of each ``role: text`` line of the last user message
  (the whole text of a ``summary: text`` line: an earlier summary being extended).
- ``chat``: the same as ``work``.
- ``classify``: answers JSON ``{"target": ..., "rationale": ...}``: of the values of the
  ``target`` property's ``enum`` in the ``response_format`` schema, the one whose name or
  description shares the most words with the last user message (the first on a tie, or
  when none shares any). Descriptions are read from ``- <name>: <description>`` lines of
  the system messages, as :func:`raytroupe.actors.desk.intent.classify_request` writes them.
- ``judge``: reads the candidates of the last user message (lines ``[<index>] "<answer as a
  JSON string>"`` under ``Candidates:``, as :func:`raytroupe.protocols.resolution.format_candidates`
  writes them for :func:`raytroupe.actors.orchestrator.resolve.judge`) and answers JSON
  ``{"choice": <index>, "rationale": ...}``: the index of the first candidate whose
  normalized answer (:func:`raytroupe.protocols.resolution.normalize`) is the most common one.
- ``merge``: the same candidates' answers, each normalized answer once (its first text, in
  order), joined with newlines.
- ``grade``: scores an answer against a rubric (:func:`raytroupe.actors.llm.offline_shaped.grade`).
- ``optimize``: variants of the skill's instructions, each adding one failed case's problem.
- ``reflect``: a lesson naming the request, its outcome and its first problems (or error).
- ``skill`` (a direct skill's one call): the (at most two) sentences of the first user
  message (the request; later ones are a gate's feedback) that share the most words with
  the system prompt (its first two when none shares any), shaped to the
  ``response_format`` schema when there is one (:func:`raytroupe.actors.llm.offline_shaped.shaped`,
  from the whole request), as constrained decoding would.

``latency_s`` sleeps before each answer (asynchronously), to simulate a model's latency.
Usage is counted in whitespace tokens; cost is zero.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from typing import Any, Final

from raytroupe.actors.llm.offline_choices import classify, judge, last_of, merge
from raytroupe.actors.llm.offline_extractive import (
    SENTENCE_END,
    extract,
    statements,
    with_passages,
    words,
)
from raytroupe.actors.llm.offline_shaped import grade, shaped
from raytroupe.actors.llm.provider import DeltaSink, word_tokens
from raytroupe.protocols import (
    ChatMessage,
    LLMDelta,
    LLMRequest,
    LLMResponse,
    OfflineModel,
    ToolCall,
    Usage,
)
from raytroupe.protocols.prompts import CONTEXT_HEADINGS, RESULTS_HEADING

__all__ = ["OfflineProvider", "split_task"]

_LIST_ITEM: Final = re.compile(r"^\s*(?:[-*\u2022]|\d{1,3}[.)])\s+(\S.*)$")
_NUMBER: Final = r"\(?\s*-?\d+(?:\.\d+)?\s*\)?"
_OPERATOR: Final = r"(?:\s*(?:\*\*|[-+*/%^\u00d7\u00f7])\s*|\s[xX]\s)"
_ARITHMETIC: Final = re.compile(rf"{_NUMBER}(?:{_OPERATOR}{_NUMBER})+")


def _asked_in(prompt: str) -> str:
    """What a job's prompt asks, as a model reads it: the text before its context.

    The history and the examples come after it, under their headings (``prompts.job_prompt``).
    """
    cut = len(prompt)
    for heading in CONTEXT_HEADINGS:
        at = prompt.find(f"\n\n{heading}\n")
        if at != -1:
            cut = min(cut, at)
    return prompt[:cut]


def split_task(text: str) -> tuple[str, list[str]]:
    """Split ``text`` into (preface, items): list items, else lines, else sentences."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    items: list[str] = []
    preface: list[str] = []
    for line in lines:
        match = _LIST_ITEM.match(line)
        if match:
            items.append(match.group(1).strip())
        elif not items:
            preface.append(line)
    if len(items) >= 2:  # noqa: PLR2004 - one item is not a list
        return " ".join(preface), items
    if len(lines) >= 2:  # noqa: PLR2004 - nor is one line
        return "", lines
    sentences = [s.strip() for s in SENTENCE_END.split(text.strip()) if s.strip()]
    return "", sentences or [text.strip()]


def _plan_roles(response_format: dict[str, Any] | None) -> dict[str, str]:
    """Role -> description, from the plan schema's ``role`` property."""
    try:
        role = response_format["properties"]["subtasks"]["items"]["properties"]["role"]  # type: ignore[index]
    except (KeyError, TypeError):
        return {"worker": ""}
    if isinstance(role, dict) and isinstance(role.get("oneOf"), list):
        return {str(o["const"]): str(o.get("description", "")) for o in role["oneOf"]}
    if isinstance(role, dict) and isinstance(role.get("enum"), list):
        return {str(r): "" for r in role["enum"]}
    return {"worker": ""}


def _max_items(response_format: dict[str, Any] | None) -> int | None:
    try:
        limit = response_format["properties"]["subtasks"]["maxItems"]  # type: ignore[index]
    except (KeyError, TypeError):
        return None
    return int(limit) if isinstance(limit, int) and limit > 0 else None


def _merged(items: list[str], limit: int | None) -> list[str]:
    """At most ``limit`` items: consecutive ones joined with '; ' when there are more."""
    if limit is None or len(items) <= limit:
        return items
    size = -(-len(items) // limit)
    return ["; ".join(items[i : i + size]) for i in range(0, len(items), size)]


class OfflineProvider:
    """See the module docstring for its behaviour."""

    name = "offline"

    def __init__(self, spec: OfflineModel | None = None) -> None:
        self._latency_s = (spec or OfflineModel()).latency_s

    async def complete(
        self, request: LLMRequest, *, on_delta: DeltaSink | None = None
    ) -> LLMResponse:
        """Answer deterministically after the configured latency; stream it word by word."""
        start = time.perf_counter()
        if self._latency_s:
            await asyncio.sleep(self._latency_s)
        text, calls = self._answer(request)
        if request.stream and on_delta is not None:
            for i, word in enumerate(text.split(" ") if text else ()):
                await on_delta(LLMDelta(text=word if i == 0 else f" {word}"))
            for index, call in enumerate(calls):
                await on_delta(
                    LLMDelta(
                        tool_call_index=index,
                        tool_call_id=call.call_id,
                        tool_name=call.tool,
                        arguments=json.dumps(call.arguments),
                    )
                )
        return LLMResponse(
            text=text,
            tool_calls=calls,
            finish_reason="tool_calls" if calls else "stop",
            usage=Usage(
                prompt_tokens=word_tokens(request.messages),
                completion_tokens=word_tokens(text),
                calls=1,
            ),
            model=request.model,
            provider=self.name,
            latency_s=time.perf_counter() - start,
        )

    async def close(self) -> None:
        """Nothing to release."""

    def _answer(self, request: LLMRequest) -> tuple[str, tuple[ToolCall, ...]]:
        """(text, tool calls) by the request's purpose."""
        match request.purpose:
            case "work" | "chat":
                return self._work(request)
            case "plan":
                text = self._plan(request)
            case "aggregate":
                text = self._aggregate(request)
            case "summarize":
                text = self._summarize(request)
            case "classify":
                text = classify(request)
            case "judge":
                text = judge(request)
            case "merge":
                text = merge(request)
            case "grade":
                prompt = last_of(request.messages, "user")
                text = grade(prompt.text if prompt else "")
            case "skill":
                text = _skill(request)
            case "reflect":
                text = _reflect(request)
            case "optimize":
                text = _optimize(request)
        return text, ()

    def _plan(self, request: LLMRequest) -> str:
        task = next((m for m in request.messages if m.role == "user"), None)  # not a re-ask
        _, items = split_task(_asked_in(task.text) if task else "")
        items = _merged(items, _max_items(request.response_format))
        roles = _plan_roles(request.response_format)
        counting = [r for r, d in roles.items() if "calculator" in d] or list(roles)
        others = [r for r in roles if r not in counting] or list(roles)
        subtasks: list[dict[str, str]] = []
        for i, item in enumerate(items):
            pool = counting if _ARITHMETIC.search(item) else others
            turn = sum(s["role"] in pool for s in subtasks)
            subtasks.append(
                {"id": f"s{i + 1}", "role": pool[turn % len(pool)], "instructions": item}
            )
        return json.dumps({"subtasks": subtasks})

    def _summarize(self, request: LLMRequest) -> str:
        prompt = last_of(request.messages, "user")
        firsts = []
        for line in (prompt.text if prompt else "").splitlines():
            role, _, said = line.partition(": ")
            if role == "summary":  # an earlier summary: kept whole
                firsts.append(said.strip())
                continue
            sentence = SENTENCE_END.split(said.strip() or line.strip())[0].strip()
            if sentence:
                firsts.append(sentence)
        return " ".join(firsts)[:1000]

    def _aggregate(self, request: LLMRequest) -> str:
        prompt = last_of(request.messages, "user")
        content = prompt.text if prompt else ""
        _, _, results = content.partition(RESULTS_HEADING)
        return results.strip() or content.strip()

    def _work(self, request: LLMRequest) -> tuple[str, tuple[ToolCall, ...]]:
        last = request.messages[-1]
        if last.role == "tool":
            return self._answer_from_tools(request.messages), ()
        prompt = last_of(request.messages, "user")
        instructions, _, context = (prompt.text if prompt else "").partition("\n\n")
        tools = {t.name for t in request.tools}
        expression = _ARITHMETIC.search(instructions)
        if expression and "calculator" in tools and request.tool_choice != "none":
            call = ToolCall(
                call_id=f"call_{len(request.messages)}",
                tool="calculator",
                arguments={"expression": expression.group(0).strip()},
            )
            return "", (call,)
        return extract(instructions, with_passages(context, request.messages)), ()

    def _answer_from_tools(self, messages: tuple[ChatMessage, ...]) -> str:
        turn = max((i for i, m in enumerate(messages) if m.role == "assistant"), default=-1)
        calls = {c.call_id: c for c in messages[turn].tool_calls} if turn >= 0 else {}
        parts = []
        for message in messages[turn + 1 :]:
            call = calls.get(message.tool_call_id or "")
            expression = call.arguments.get("expression") if call else None
            parts.append(f"{expression} = {message.text}" if expression else message.text)
        return "; ".join(parts)


def _optimize(request: LLMRequest) -> str:
    """Variants that add each failed case's problem to the instructions, as a constraint."""
    prompt = last_of(request.messages, "user")
    text = prompt.text if prompt else ""
    instructions = text.partition("Instructions:\n")[2].partition("\n\n")[0].strip()
    problems = [
        line.rpartition("; ")[2].strip()
        for line in text.partition("Failed cases:\n")[2].splitlines()
        if line.startswith("- case ")
    ]
    wanted = max(1, int(text.rpartition("Propose ")[2].split(" ")[0] or 1))
    variants = [
        {"instructions": f"{instructions} Avoid this: {problem}.", "rationale": problem}
        for problem in dict.fromkeys(p for p in problems if p)
    ][:wanted] or [{"instructions": instructions, "rationale": "no failure to learn from"}]
    return json.dumps({"variants": variants})


def _reflect(request: LLMRequest) -> str:
    """A lesson from a reflection request's request, outcome and problems."""
    prompt = last_of(request.messages, "user")
    text = prompt.text if prompt else ""
    asked = text.partition("Request:\n")[2].partition("\n\nAnswer:")[0].strip()
    outcome = text.partition("\nOutcome: ")[2].partition("\n")[0].strip() or "unknown"
    why = text.partition("\nProblems: ")[2].partition("\n")[0].strip()
    why = why or text.partition("\nError: ")[2].partition("\n")[0].strip()
    lesson = f"A request like {asked[:80]!r} ended {outcome}"
    return f"{lesson}: {why}. Next time, check for that before answering." if why else f"{lesson}."


def _skill(request: LLMRequest) -> str:
    """The material's sentences that best fit the system prompt, shaped to the schema."""
    # the request is the first user message (later ones: a gate's feedback on a retry), what
    # is wanted the first system message (the skill's prompt; recalled lessons may follow)
    system = next((m for m in request.messages if m.role == "system"), None)
    prompt = next((m for m in request.messages if m.role == "user"), None)
    wanted = words(system.text if system else "")
    sentences = statements(prompt.text if prompt else "").sentences
    scored = sorted(range(len(sentences)), key=lambda i: (-len(wanted & words(sentences[i])), i))
    text = " ".join(sentences[i] for i in sorted(scored[:2]))
    if request.response_format is not None:  # fields are looked for in the whole request
        return shaped(request.response_format, prompt.text if prompt else text)
    return text
