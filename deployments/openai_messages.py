"""A chat request read as a troupe job: its task and images, the team or skill it names.

The last user message is the task; the other messages are the history the job is shown beside
it, turn by turn (see :func:`_task`); images, as data URLs or links, become the job's
attachments.
"""

from __future__ import annotations

import base64
import re
from typing import Any, Final

from raytroupe.protocols import Attachment, InvalidInput
from raytroupe.protocols.job_context import History, Turn

__all__ = ["AUTO"]

_DATA_URL: Final = re.compile(r"^data:(image/[a-z0-9.+-]+);base64,(.+)$", re.DOTALL)
AUTO: Final = "auto"
"""The model name that routes a chat among the skills and teams the key may run."""


def _target(model: str) -> tuple[str | None, str | None]:
    """(team, skill) that ``model`` names."""
    if model == AUTO:
        return None, None
    if model.startswith("skill:"):
        return None, model.removeprefix("skill:")
    return model, None


def _wants_json(response_format: dict[str, Any] | None) -> bool:
    return bool(response_format) and (response_format or {}).get("type") in {
        "json_object",
        "json_schema",
    }


def _task(
    messages: list[dict[str, Any]], *, in_session: bool = False, told_after: bool = False
) -> tuple[str, History, list[Attachment]]:
    """The job's task, history and images from OpenAI-style messages.

    The last user message is the task; the other messages are its history, each a turn of
    its role (only the system and developer messages ``in_session``: the session holds the
    conversation). Empty messages are left out. ``told_after``: the messages after the task
    are told with it (a caller's tool calls and results): checked, but not in the history.

    Raises:
        InvalidInput: no user message, or a message of a shape OpenAI does not define.
    """
    turns: list[tuple[str, str]] = []
    images: list[Attachment] = []
    for n, message in enumerate(messages):
        role = message.get("role")
        if not isinstance(role, str | None):  # a list or an object: no role, nor hashable
            raise InvalidInput(f"messages[{n}]: unknown role (a {type(role).__name__})")
        if role not in {"system", "developer", "user", "assistant", "tool"}:
            raise InvalidInput(f"messages[{n}]: unknown role {role!r}")
        text = _text(message.get("content"), n, images)
        turns.append((str(role), text))
    users = [i for i, (role, _) in enumerate(turns) if role == "user"]
    if not users:
        raise InvalidInput("messages: there is no user message to act on")
    last = users[-1]
    task = turns[last][1].strip() or ("See the attached image(s)." if images else "")
    if not task:
        raise InvalidInput(f"messages[{last}]: the last user message is empty")
    history = tuple(
        Turn(role=role, text=text)  # a role checked above
        for i, (role, text) in enumerate(turns)
        if i != last
        and text
        and not (in_session and role not in {"system", "developer"})
        and not (told_after and i > last)
    )
    return task, History(turns=history), images


def _text(content: Any, n: int, images: list[Attachment]) -> str:
    if content is None or isinstance(content, str):
        return content or ""
    if not isinstance(content, list):
        raise InvalidInput(f"messages[{n}].content must be a string or a list of parts")
    texts = []
    for part in content:
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text":
            texts.append(str(part.get("text", "")))
        elif kind == "image_url":
            images.append(_image(part.get("image_url"), n, len(images)))
        else:
            raise InvalidInput(f"messages[{n}]: unsupported content part {kind!r}")
    return "\n".join(texts)


def _image(spec: Any, n: int, index: int) -> Attachment:
    url = spec.get("url") if isinstance(spec, dict) else spec
    if not isinstance(url, str):
        raise InvalidInput(f"messages[{n}]: image_url needs a url")
    name = f"image-{index + 1}"
    found = _DATA_URL.match(url)
    try:
        if found is not None:
            data = found.group(2)
            base64.b64decode(data, validate=True)
            return Attachment(name=name, media_type=found.group(1), data_b64=data)
        return Attachment(name=name, media_type="image/png", url=url)
    except ValueError as exc:
        raise InvalidInput(f"messages[{n}]: unusable image: {exc}") from None
