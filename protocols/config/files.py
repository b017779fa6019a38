"""Loading configuration models from mappings and YAML files, with one kind of error."""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from raytroupe.protocols import ConfigError

__all__ = ["read_yaml", "validated"]

M = TypeVar("M", bound=BaseModel)


def validated(cls: type[M], data: Any, *, source: str, what: str, article: str = "a") -> M:
    """``data`` as a ``cls``.

    Raises:
        ConfigError: not a mapping, or not valid; ``detail['problems']`` lists each problem
            as ``field.path: message``.
    """
    if not isinstance(data, dict):
        raise ConfigError(
            f"{source}: {article} {what} must be a mapping, got {type(data).__name__}"
        )
    try:
        return cls.model_validate(data)
    except ValidationError as e:
        problems = [
            f"{'.'.join(str(p) for p in err['loc']) or '<root>'}: {err['msg']}"
            for err in e.errors(include_url=False, include_input=False)
        ]
        raise ConfigError(f"{source}: invalid {what}: {'; '.join(problems)}",
                          problems=problems) from None  # fmt: skip


def read_yaml(path: str | Path, *, what: str) -> Any:
    """The parsed contents of a YAML file.

    Raises:
        ConfigError: the file is missing, unreadable or not YAML.
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as e:
        raise ConfigError(f"cannot read {what} file {str(path)!r}: {e.strerror}") from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise ConfigError(f"{path}: not valid YAML: {e}") from None
