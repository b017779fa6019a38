"""The offline provider's extractive answers: the sentences that share the most words.

A text's statements are its sentences, questions left out; words are lowercased, stripped of
a plural ``s``, and stop words are ignored. Knowledge passages of the system messages join
the inputs with their citations, so that a sentence drawn from one keeps it.
"""

from __future__ import annotations

import functools
import re
from typing import Final

from raytroupe.protocols import ChatMessage
from raytroupe.protocols.prompts import KNOWLEDGE_HEADING

__all__ = ["SENTENCE_END", "extract", "statements", "with_passages", "words"]

SENTENCE_END: Final = re.compile(r"(?<=[.!?])\s+")
"""Where a sentence ends (and the whitespace after it)."""
_WORD: Final = re.compile(r"[a-z0-9]+")
_STOPWORDS: Final = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "by",
        "can",
        "do",
        "does",
        "for",
        "from",
        "how",
        "in",
        "is",
        "it",
        "its",
        "of",
        "on",
        "or",
        "the",
        "this",
        "to",
        "what",
        "when",
        "where",
        "which",
        "who",
        "why",
        "with",
        "you",
        "your",
    ]
)


def words(text: str) -> set[str]:
    """The content words of ``text``."""
    return {w.rstrip("s") for w in _WORD.findall(text.lower()) if w not in _STOPWORDS}


def with_passages(context: str, messages: tuple[ChatMessage, ...]) -> str:
    """``context`` and the knowledge passages of the system messages.

    Each sentence of a passage ends with its citation, so an answer drawn from it cites it.
    """
    lines = [context]
    for message in messages:
        if message.role != "system" or KNOWLEDGE_HEADING not in message.text:
            continue
        passages = message.text.partition(KNOWLEDGE_HEADING)[2].partition("\n\n")[0]
        for line in passages.splitlines():
            cite, _, text = line.partition("] ")
            if cite.startswith("[") and text:
                lines.extend(
                    f"{sentence.strip().rstrip('.')} {cite}]."
                    for sentence in SENTENCE_END.split(text)
                    if sentence.strip()
                )
    return "\n".join(lines)


def extract(instructions: str, context: str) -> str:
    """The (at most two) statements of ``context`` sharing the most words with ``instructions``."""
    asked = instructions.strip()
    stated = statements(context)
    scores: dict[int, int] = {}
    for word in words(instructions):
        for index in stated.by_word.get(word, ()):
            scores[index] = scores.get(index, 0) + 1
    found = [i for i in scores if stated.sentences[i] != asked]
    top = max((scores[i] for i in found), default=0)
    if top == 0:
        return f"My inputs hold no answer to: {asked}"
    best = sorted(i for i in found if scores[i] == top)[:2]
    return " ".join(stated.sentences[i] for i in best)


class _Statements:
    """The statements of a text (questions left out), and where each word occurs."""

    def __init__(self, context: str) -> None:
        self.sentences: list[str] = []
        self.by_word: dict[str, list[int]] = {}
        for block in context.splitlines():
            for sentence in SENTENCE_END.split(block):
                text = sentence.strip()
                if text and not text.endswith("?"):
                    for word in words(text):
                        self.by_word.setdefault(word, []).append(len(self.sentences))
                    self.sentences.append(text)


@functools.lru_cache(maxsize=64)
def statements(context: str) -> _Statements:
    """The statements of ``context``, cached.

    Every subtask of a job carries the same job text: a fan-out of N subtasks would
    otherwise split and score it N times (O(N^2) for the job).
    """
    return _Statements(context)
