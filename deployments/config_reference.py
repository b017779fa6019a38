"""The configuration reference, ``docs/configuration.md``, written from the pydantic models.

Usage: ``python -m raytroupe.deployments.config_reference [FILE]`` (default
``docs/configuration.md``).

One section per model: its docstring, then each field as a file spells it (name, type,
default, description). The models a field's type names get sections of their own, linked
from the type, in the part of the reference that reaches them first. Defaults that depend on
the machine (the home directory, the temp directory, the user id) are written as ``~``,
``<temp dir>`` and ``<uid>``, so the text is the same wherever it is made: a unit test
renders it and compares it with the committed file.
"""

from __future__ import annotations

import enum
import inspect
import json
import os
import re
import sys
import tempfile
import types
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final, Literal, NamedTuple

from pydantic import BaseModel
from pydantic.fields import FieldInfo

from raytroupe.deployments.config import APIConfig
from raytroupe.protocols import (
    AnthropicModel,
    LocalModel,
    OfflineModel,
    OpenAICompatibleModel,
    OpenAIModel,
    RouteSpec,
    ScriptedModel,
    SkillSpec,
    TeamSpec,
)
from raytroupe.protocols.config.system import SystemConfig

__all__ = ["PARTS", "Part", "main", "render"]

DEFAULT_OUT: Final = Path("docs/configuration.md")


class Part(NamedTuple):
    """A part of the reference: a title, what it configures, the models it starts from."""

    title: str
    intro: str
    roots: tuple[type[BaseModel], ...]


PARTS: Final = (
    Part(
        "troupe.yaml: the system actors",
        "`SystemConfig`: one file for every entry point (`raytroupe.connect(config=...)`, "
        "`troupe up --config`, `TROUPE_CONFIG`, the Serve application's `system_config`). "
        "Its sections are also the arguments of `connect()` (`llm_config=`, "
        "`tools_config=`, `memory_config=`, `skills=`).",
        (SystemConfig,),
    ),
    Part(
        "Models",
        "What a model alias stands for, in `LLMConfig.models`, `Team.models` and "
        "`raytroupe.connect(llm=...)`; `provider` chooses the kind. Keys are never here: "
        "`api_key_env` names the variable that holds one.",
        (
            OpenAICompatibleModel,
            OpenAIModel,
            AnthropicModel,
            LocalModel,
            RouteSpec,
            OfflineModel,
            ScriptedModel,
        ),
    ),
    Part(
        "The HTTP application",
        "`APIConfig`: the Serve application's `args` (`deployments/serve_config.yaml`), or "
        "`troupe up --api-config FILE`.",
        (APIConfig,),
    ),
    Part(
        "Teams",
        "A team file (`raytroupe.Team.from_yaml`), `raytroupe.Team(...)` in Python, or the "
        "body of `PUT /v1/teams/{name}`.",
        (TeamSpec,),
    ),
    Part(
        "Skills",
        "A skill file (YAML, or Markdown with a YAML front matter), `rt.put_skill(...)`, or "
        "`PUT /v1/skills/{name}`.",
        (SkillSpec,),
    ),
)

_HEADER: Final = """\
# Configuration reference

Generated from the pydantic models by `python -m raytroupe.deployments.config_reference`: do
not edit it by hand (`tests/unit/test_config_reference.py` fails when it is out of date).
Every model refuses keys it does not know. JSON Schemas of the same files, for editors:
`troupe config schema DIR` (also in `deployments/schemas/`).
"""

_ROLE: Final = re.compile(r":[a-z]+:`~?([^`]+)`")
_LISTED_VALUES: Final = 12
"""An enumeration with more values is named, not listed (ErrorCode has about fifty)."""


def render() -> str:
    """The whole reference, as Markdown."""
    placed = _place()
    out = [_HEADER, "Contents:\n"]
    for part in PARTS:
        out.append(f"- [{part.title}](#{_anchor(part.title)})")
        out.extend(f"  - [{m.__name__}](#{_anchor(m.__name__)})" for m in placed[part.title])
    for part in PARTS:
        out += ["", f"## {part.title}", "", part.intro]
        for model in placed[part.title]:
            out += ["", *_section(model)]
    return "\n".join(out) + "\n"


def _place() -> dict[str, list[type[BaseModel]]]:
    """Each model reached from the parts' roots, under the first part that reaches it.

    Roots first (a part's own roots are its own even if another part reaches them), then,
    breadth first, the models their fields name.
    """
    owner: dict[type[BaseModel], str] = {}
    for part in PARTS:
        for root in part.roots:
            owner.setdefault(root, part.title)
    placed: dict[str, list[type[BaseModel]]] = {part.title: [] for part in PARTS}
    names: dict[str, type[BaseModel]] = {}
    for part in PARTS:
        queue = list(part.roots)
        while queue:
            model = queue.pop(0)
            if owner.setdefault(model, part.title) != part.title or model in placed[part.title]:
                continue
            other = names.setdefault(model.__name__, model)
            if other is not model:  # their anchors would collide
                raise ValueError(f"two models named {model.__name__}: {other} and {model}")
            placed[part.title].append(model)
            for field in model.model_fields.values():
                queue.extend(_models_in(field.annotation))
    return placed


def _models_in(annotation: Any) -> Iterator[type[BaseModel]]:
    """The models a type names, anywhere inside it."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        yield annotation
        return
    for argument in typing.get_args(annotation):
        yield from _models_in(argument)


def _section(model: type[BaseModel]) -> list[str]:
    lines = [f"### {model.__name__}", "", _markdown(inspect.getdoc(model) or ""), ""]
    lines += ["| field | type | default | description |", "|---|---|---|---|"]
    tags = {"provider", "kind"}  # what tells the members of a union apart
    fields = sorted(model.model_fields.items(), key=lambda item: item[0] not in tags)
    for name, field in fields:  # the tag first, then in the model's order
        key = field.alias or name
        cells = (
            f"`{key}`",
            _type_of(field),
            _default_of(field),
            _markdown(_description_of(model, name)),
        )
        lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    return lines


def _markdown(docstring: str) -> str:
    """The docstring with reStructuredText's literals and roles as Markdown code."""
    return _ROLE.sub(r"`\1`", docstring.replace("``", "`"))


def _cell(text: str) -> str:
    """``text`` fit for one cell of a Markdown table."""
    return " ".join(text.split()).replace("|", "\\|")


def _description_of(model: type[BaseModel], name: str) -> str:
    """The field's description: its own, a base class's (a default overridden), its model's."""
    for owner in model.__mro__:
        field = getattr(owner, "__pydantic_fields__", {}).get(name)
        if field is not None and field.description:
            return str(field.description)
    annotation = model.model_fields[name].annotation
    if typing.get_origin(annotation) is Literal and len(typing.get_args(annotation)) == 1:
        return "Always the value shown: it says which kind of entry this is."
    models = list(_models_in(annotation))
    if len(models) == 1:  # a section of its own: its summary
        return (inspect.getdoc(models[0]) or "").split("\n\n")[0]
    return ""


# -- types ----------------------------------------------------------------------------------

_SCALARS: Final[dict[Any, str]] = {
    str: "string",
    int: "integer",
    float: "number",
    bool: "boolean",
    Path: "path",
    type(None): "null",
    Any: "any",
    object: "any",
}


def _type_of(field: FieldInfo) -> str:
    bounds = _bounds(field.metadata)
    shown = _type(field.annotation)
    return f"{shown} ({bounds})" if bounds else shown


def _type(annotation: Any) -> str:  # noqa: PLR0911 - one return per kind of type
    if annotation in _SCALARS:
        return _SCALARS[annotation]
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return f"[{annotation.__name__}](#{_anchor(annotation.__name__)})"
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        if len(annotation) > _LISTED_VALUES:
            return f"a `{annotation.__module__}.{annotation.__name__}` value"
        return " | ".join(f"`{m.value}`" for m in annotation)
    origin, arguments = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Annotated:
        inner = _type(arguments[0])
        bounds = _bounds(arguments[1:])
        return f"{inner} ({bounds})" if bounds else inner
    if origin is Literal:
        return " | ".join(f"`{json.dumps(a)}`" for a in arguments)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_type(a) for a in arguments)
    if origin in (tuple, list, set, frozenset):
        items = [a for a in arguments if a is not Ellipsis]
        if origin is tuple and len(items) == len(arguments) and len(items) > 1:  # fixed length
            return f"[{', '.join(_type(a) for a in items)}]"
        return f"list of {_type(items[0]) if items else 'any'}"
    if origin is dict:
        return f"map of {_type(arguments[0])} to {_type(arguments[1])}" if arguments else "map"
    if origin is type:
        return "a pydantic model class"
    raise TypeError(f"no words for the type {annotation!r}: teach config_reference._type")


def _bounds(metadata: Any) -> str:
    """Numeric and length constraints, in words (a ``Field`` inside ``Annotated`` included)."""
    said = []
    for item in metadata:
        if isinstance(item, FieldInfo):
            said.append(_bounds(item.metadata))
            continue
        for attribute, words in (
            ("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<"),
            ("min_length", "length >="), ("max_length", "length <="),
        ):  # fmt: skip
            value = getattr(item, attribute, None)
            if value is not None:
                said.append(f"{words} {value}")
    return ", ".join(s for s in said if s)


# -- defaults -------------------------------------------------------------------------------


def _default_of(field: FieldInfo) -> str:
    if field.is_required():
        return "required"
    if field.default_factory is not None:
        if field.default_factory_takes_validated_data:
            return "computed"
        value = field.default_factory()  # type: ignore[call-arg]
    else:
        value = field.default
    if isinstance(value, BaseModel):
        return "its defaults"
    return f"`{_value(value)}`"


def _value(value: Any) -> str:
    if isinstance(value, Path):
        return _portable(str(value))
    if isinstance(value, enum.Enum):
        return str(value.value)
    if isinstance(value, str):
        return json.dumps(value)
    return json.dumps(value, default=str)


def _portable(path: str) -> str:
    """``path`` with this machine's home, temp directory and user id as placeholders."""
    path = path.replace(f"raytroupe-{os.getuid()}", "raytroupe-<uid>")
    home, temp = str(Path.home()), tempfile.gettempdir()
    if path.startswith(temp + os.sep):
        return "<temp dir>" + path[len(temp) :]
    if path.startswith(home + os.sep):
        return "~" + path[len(home) :]
    return path


def _anchor(title: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces as dashes."""
    kept = re.sub(r"[^\w\- ]", "", title.lower())
    return kept.replace(" ", "-")


def main(argv: list[str] | None = None) -> int:
    """Write the reference; the exit status."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) > 1:
        sys.stderr.write("usage: python -m raytroupe.deployments.config_reference [FILE]\n")
        return 2
    out = Path(args[0]) if args else DEFAULT_OUT
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render(), encoding="utf-8")
    sys.stdout.write(f"{out}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
