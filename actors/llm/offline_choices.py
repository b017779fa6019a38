"""The offline provider's choices: a request's target (classify), a candidate (judge), merging.

Each answers JSON (or lines, for ``merge``) from the request's messages, deterministically:
see :mod:`raytroupe.actors.llm.offline` for what each purpose reads.
"""

from __future__ import annotations

import json

from raytroupe.actors.llm.offline_extractive import words
from raytroupe.protocols import ChatMessage, LLMRequest
from raytroupe.protocols.resolution import normalize, parse_candidates

__all__ = ["classify", "judge", "last_of", "merge"]


def last_of(messages: tuple[ChatMessage, ...], role: str) -> ChatMessage | None:
    """The last message of ``role``."""
    return next((m for m in reversed(messages) if m.role == role), None)


def classify(request: LLMRequest) -> str:
    """JSON choosing the schema's ``target`` enum value that best matches the last user message.

    A value scores the words its name and description (a ``- <name>: <description>`` line
    of a system message) share with the message; the first of the best wins.
    """
    try:
        enum = request.response_format["properties"]["target"]["enum"]  # type: ignore[index]
    except (KeyError, TypeError):
        enum = None
    names = [str(n) for n in enum] if isinstance(enum, list) else []
    described: dict[str, str] = {}
    for message in request.messages:
        for line in message.text.splitlines() if message.role == "system" else ():
            name, found, text = line.strip().removeprefix("- ").partition(": ")
            if found and name in names:
                described.setdefault(name, text)
    if not names:
        return json.dumps({"target": "", "rationale": "no targets were offered"})
    prompt = last_of(request.messages, "user")
    wanted = words(prompt.text if prompt else "")
    shared = [sorted(wanted & words(f"{n} {described.get(n, '')}")) for n in names]
    best = max(range(len(names)), key=lambda i: (len(shared[i]), -i))
    why = ", ".join(shared[best]) or "nothing; the first target"
    return json.dumps({"target": names[best], "rationale": f"shares with the task: {why}"})


def _candidates(request: LLMRequest) -> list[tuple[int, str]]:
    prompt = last_of(request.messages, "user")
    return parse_candidates(prompt.text if prompt else "")


def judge(request: LLMRequest) -> str:
    """JSON choosing the first candidate whose normalized answer is the most common."""
    candidates = _candidates(request)
    if not candidates:
        return json.dumps({"choice": 0, "rationale": "no candidates were listed"})
    keys = [normalize(text) for _, text in candidates]
    votes = {k: keys.count(k) for k in keys}
    best = max(range(len(keys)), key=lambda i: (votes[keys[i]], -i))
    why = f"{votes[keys[best]]} of {len(keys)} candidates give this answer"
    return json.dumps({"choice": candidates[best][0], "rationale": why})


def merge(request: LLMRequest) -> str:
    """The candidates' distinct (normalized) answers, in order, one per line."""
    merged: dict[str, str] = {}
    for _, text in _candidates(request):
        merged.setdefault(normalize(text), text.strip())
    return "\n".join(merged.values())
