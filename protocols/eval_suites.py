"""Eval suite files: JSONL (one case per line) or YAML (a suite with its cases).

A JSONL suite is named after its file (``invoices.jsonl`` -> ``invoices``); its lines are
:class:`~raytroupe.protocols.evals.EvalCase` objects (blank lines and lines starting with ``//`` are
skipped). A YAML suite is a mapping: ``name``, ``description``, ``skill``, ``cases``. Every
problem names the file, the line and the field.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Final

import yaml
from pydantic import ValidationError

from raytroupe.protocols import ConfigError
from raytroupe.protocols.evals import EvalCase, EvalSuite
from raytroupe.protocols.skill_files import yaml_line

__all__ = ["MAX_SUITE_BYTES", "parse_suite", "read_suite"]

MAX_SUITE_BYTES: Final = 32 * 1024 * 1024
_NAME: Final = re.compile(r"[^A-Za-z0-9_.-]")


def read_suite(path: str | Path) -> EvalSuite:
    """The suite in the file at ``path`` (``.jsonl``, ``.yaml`` or ``.yml``).

    Raises:
        ConfigError: unreadable, too big, or not a valid suite (``detail['problems']``).
    """
    path = Path(path)
    try:
        if path.stat().st_size > MAX_SUITE_BYTES:
            raise ConfigError(f"{path}: a suite file is at most {MAX_SUITE_BYTES} bytes")
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"cannot read suite file {str(path)!r}: {e}") from None
    name = _NAME.sub("-", path.stem)[:64].strip("-.") or "suite"
    return parse_suite(text, str(path), jsonl=path.suffix == ".jsonl", name=name)


def _problems(source: str, line: int, error: ValidationError, where: Any = None) -> list[str]:
    errors = error.errors(include_url=False, include_input=False)
    locs = [tuple(e["loc"]) for e in errors]
    found = []
    for err in errors:
        loc = tuple(err["loc"])
        inner = any(len(o) > len(loc) and o[: len(loc)] == loc for o in locs)
        if err["type"] == "too_short" and inner:
            continue  # pydantic's echo of an item that failed: the item's own error says why
        at = line if where is None else yaml_line(where, loc)
        field = ".".join(str(p) for p in loc) or "<root>"
        found.append(f"{source}:{at}: {field}: {err['msg'].removeprefix('Value error, ')}")
    return found


def _raise(source: str, problems: list[str]) -> ConfigError:
    return ConfigError(f"invalid suite {source}: {'; '.join(problems[:10])}",
                       file=source, problems=problems)  # fmt: skip


def parse_suite(text: str, source: str, *, jsonl: bool, name: str = "suite") -> EvalSuite:
    """The suite that ``text`` (a file's contents, named ``source``) defines.

    Raises:
        ConfigError: as :func:`read_suite`.
    """
    if jsonl:
        return _jsonl(text, source, name)
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        raise _raise(source, [f"{source}:{mark.line + 1 if mark else 1}: not valid YAML"]) from None
    if not isinstance(data, dict):
        raise _raise(source, [f"{source}:1: <file>: a suite is a mapping with 'cases'"])
    try:
        return EvalSuite.model_validate({"name": name, **data})
    except ValidationError as e:
        raise _raise(source, _problems(source, 1, e, node)) from None


def _jsonl(text: str, source: str, name: str) -> EvalSuite:
    cases: list[EvalCase] = []
    problems: list[str] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line.lstrip().startswith("//"):
            continue
        try:
            cases.append(EvalCase.model_validate(json.loads(line)))
        except json.JSONDecodeError as e:
            problems.append(f"{source}:{number}: <line>: not JSON: {e.msg}")
        except ValidationError as e:
            problems += _problems(source, number, e)
    if problems:
        raise _raise(source, problems)
    try:
        return EvalSuite(name=name, cases=tuple(cases))
    except ValidationError as e:
        raise _raise(source, _problems(source, 1, e)) from None
