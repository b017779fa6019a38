"""What a job is given besides its task text: files and images, and what agents look like."""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Collection, Iterable, Mapping
from typing import Final

from pydantic import BaseModel, ConfigDict, Field, model_validator

from raytroupe.protocols.addresses import Name
from raytroupe.protocols.job_context import JobContext, TextFile
from raytroupe.protocols.llm import ImagePart
from raytroupe.protocols.prompts import asked

__all__ = [
    "IMAGE_TYPES",
    "TEXT_TYPES",
    "AgentInfo",
    "Attachment",
    "text_files",
    "with_files",
    "with_load",
]

IMAGE_TYPES: Final = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
"""Image media types every supported provider accepts."""
TEXT_TYPES: Final = frozenset(
    {"application/json", "application/x-yaml", "application/yaml", "application/xml"}
)
"""Non-``text/*`` media types that are read as UTF-8 text."""
_MEDIA_TYPE = re.compile(r"^[a-z0-9][\w.+-]*/[a-z0-9][\w.+-]*$")


class Attachment(BaseModel):
    """A file given with a job's task.

    Text files (``text/*``, JSON, YAML, XML; UTF-8) are added to the task, so the planner
    and every agent read them; images (PNG, JPEG, GIF, WebP, as base64 data or an http(s)
    URL) are shown to every agent that works on the job. Other types are refused.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    name: str = Field(min_length=1, max_length=255, description="File name, shown to the model.")
    media_type: str = Field(description="MIME type, e.g. text/markdown or image/png.")
    data_b64: str | None = Field(
        default=None, max_length=16_000_000, description="The content, base64-encoded."
    )
    url: str | None = Field(
        default=None, max_length=4096, description="An http(s) URL (images only)."
    )

    @model_validator(mode="after")
    def _usable(self) -> Attachment:
        if not _MEDIA_TYPE.match(self.media_type):
            raise ValueError(f"{self.media_type!r} is not a media type")
        is_image = self.media_type in IMAGE_TYPES
        is_text = self.media_type.startswith("text/") or self.media_type in TEXT_TYPES
        if not (is_image or is_text):
            raise ValueError(
                f"unsupported media type {self.media_type!r}: send text (UTF-8) or an image "
                f"({', '.join(sorted(IMAGE_TYPES))})"
            )
        if (self.data_b64 is None) == (self.url is None):
            raise ValueError("an attachment needs exactly one of data_b64 or url")
        if self.url is not None:
            if not is_image:
                raise ValueError("only images may be given by URL; send text files as data_b64")
            if not self.url.startswith(("https://", "http://")):
                raise ValueError("an image URL must be http(s)")
            return self
        try:
            raw = base64.b64decode(self.data_b64 or "", validate=True)
        except binascii.Error as exc:
            raise ValueError(f"data_b64 of {self.name!r} is not base64: {exc}") from None
        if is_text:
            try:
                raw.decode("utf-8")
            except UnicodeDecodeError:
                raise ValueError(f"{self.name!r} is not UTF-8 text") from None
        return self

    def text(self) -> str | None:
        """The file's text, if it is a text file."""
        if self.media_type in IMAGE_TYPES or self.data_b64 is None:
            return None
        return base64.b64decode(self.data_b64).decode("utf-8")

    def text_file(self) -> TextFile | None:
        """The file as a job's context holds it, if it is a text file."""
        text = self.text()
        if text is None:
            return None
        return TextFile(name=self.name, media_type=self.media_type, text=text)

    def image(self) -> ImagePart | None:
        """The image as a message part, if it is an image."""
        if self.media_type not in IMAGE_TYPES:
            return None
        if self.url is not None:
            return ImagePart(url=self.url)
        return ImagePart(data_b64=self.data_b64, media_type=self.media_type)


def text_files(attachments: tuple[Attachment, ...]) -> tuple[TextFile, ...]:
    """The text attachments, as a job's context holds them (images are left out)."""
    return tuple(f for a in attachments if (f := a.text_file()) is not None)


def with_files(task: str, attachments: tuple[Attachment, ...]) -> str:
    """``task`` followed by the text of every text attachment, each under its name."""
    return asked(JobContext(request=task, files=text_files(attachments)))


class AgentInfo(BaseModel):
    """An agent of a registered team, as people and dashboards see it."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    name: Name
    team: str
    role: str
    model: str = Field(description="The model alias it calls.")
    tools: tuple[str, ...] = ()
    in_flight: int = Field(default=0, ge=0, description="Envelopes it is handling right now.")
    registered: bool | None = Field(
        default=None,
        description="Whether the router can reach it now (False: its actor is gone or not "
        "started yet); None where not asked.",
    )


def with_load(
    agents: Iterable[AgentInfo],
    in_flight: Mapping[str, int],
    registered: Collection[str] | None = None,
) -> list[AgentInfo]:
    """``agents`` with the router's in-flight counts (and whether it can reach each) filled in."""
    return [
        a.model_copy(
            update={
                "in_flight": in_flight.get(a.name, 0),
                "registered": None if registered is None else a.name in registered,
            }
        )
        for a in agents
    ]
