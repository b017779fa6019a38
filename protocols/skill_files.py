"""Skill files: YAML, or Markdown with YAML front matter, read into :class:`SkillSpec`.

A Markdown file is ``---``, the YAML, ``---``, then the body, which is the prompt's
instructions (``prompt.instructions`` may not be given twice). Every problem is reported as
``<file>:<line>: <field>: <message>``, the line that of the field (or of the mapping that
lacks it), so that an operator can go straight to it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import yaml
from pydantic import ValidationError

from raytroupe.protocols import ConfigError
from raytroupe.protocols.skill import SkillSpec

__all__ = [
    "MAX_DEPTH",
    "MAX_NODES",
    "MAX_SKILL_BYTES",
    "SKILL_SUFFIXES",
    "SkillProblem",
    "parse_skill",
    "read_skill",
    "yaml_line",
]

SKILL_SUFFIXES: Final = (".yaml", ".yml", ".md")
"""Files of a skill directory that hold skills; others are ignored."""

MAX_SKILL_BYTES: Final = 256 * 1024
"""A skill file is a prompt and some settings: a bigger one is a mistake."""
MAX_DEPTH: Final = 64
"""Nesting of a skill file, at most."""
MAX_NODES: Final = 100_000
"""Values of a skill file with its YAML aliases expanded: a few ``&a [*b, *b, ...]`` lines
(a "billion laughs") would otherwise have validation walk billions of them."""


@dataclass(frozen=True)
class SkillProblem:
    """One problem of a skill file: where it is and what it is."""

    file: str
    line: int
    field: str
    message: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.field}: {self.message}"


def read_skill(path: str | Path) -> SkillSpec:
    """The skill in the file at ``path``.

    Raises:
        ConfigError: unreadable, too big, not YAML, or not a valid skill;
            ``detail['problems']`` lists every problem as ``file:line: field: message``.
    """
    path = Path(path)
    try:
        size = path.stat().st_size
        if size > MAX_SKILL_BYTES:
            raise ConfigError(f"{path}: a skill file is at most {MAX_SKILL_BYTES} bytes")
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"cannot read skill file {str(path)!r}: {e}") from None
    return parse_skill(text, str(path), markdown=path.suffix == ".md")


def parse_skill(text: str, source: str, *, markdown: bool = False) -> SkillSpec:
    """The skill that ``text`` (a file's contents, named ``source``) defines.

    Raises:
        ConfigError: as :func:`read_skill`.
    """
    offset, body = 0, ""
    if markdown:
        text, body, offset = _front_matter(text, source)
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        if node is not None and _expanded_size(node) > MAX_NODES:
            said = f"more than {MAX_NODES} values once aliases are expanded"
            raise _error(source, [SkillProblem(source, 1 + offset, "<file>", said)])
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        line = (mark.line + 1 + offset) if mark is not None else 1
        problem = SkillProblem(source, line, "<file>", f"not valid YAML: {_yaml_reason(e)}")
        raise _error(source, [problem]) from None
    except RecursionError:  # the parser recurses per level: "[[[[..." runs it out of stack
        said = f"nested deeper than {MAX_DEPTH} levels"
        raise _error(source, [SkillProblem(source, 1 + offset, "<file>", said)]) from None
    except (ValueError, OverflowError) as e:  # a scalar its constructor cannot make
        said = f"not valid YAML: {e}"  # (an integer of 5000 digits, a 13th month)
        raise _error(source, [SkillProblem(source, 1 + offset, "<file>", said)]) from None
    if not isinstance(data, dict):
        got = type(data).__name__ if data is not None else "nothing"
        problem = SkillProblem(source, 1 + offset, "<file>", f"a skill is a mapping, got {got}")
        raise _error(source, [problem])
    if body.strip():
        prompt = data.get("prompt")
        if isinstance(prompt, dict) and prompt.get("instructions"):
            line = yaml_line(node, ("prompt", "instructions")) + offset
            problem = SkillProblem(source, line, "prompt.instructions",
                                   "given twice: in the front matter and as the body")  # fmt: skip
            raise _error(source, [problem])
        data["prompt"] = {**(prompt if isinstance(prompt, dict) else {}), "instructions": body}
    try:
        return SkillSpec.model_validate(data)
    except ValidationError as e:
        problems = [
            SkillProblem(
                source,
                yaml_line(node, tuple(err["loc"])) + offset,
                ".".join(str(p) for p in err["loc"]) or "<root>",
                err["msg"].removeprefix("Value error, "),
            )
            for err in e.errors(include_url=False, include_input=False)
        ]
        raise _error(source, problems) from None


def _error(source: str, problems: list[SkillProblem]) -> ConfigError:
    listed = "; ".join(str(p) for p in problems)
    return ConfigError(
        f"invalid skill file {source}: {listed}",
        file=source,
        problems=[str(p) for p in problems],
    )


def _front_matter(text: str, source: str) -> tuple[str, str, int]:
    """(front matter, body, lines before the front matter) of a Markdown skill."""
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].strip() != "---":
        said = "a Markdown skill starts with '---' front matter"
        problem = SkillProblem(source, 1, "<file>", said)
        raise _error(source, [problem])
    for i, line in enumerate(lines[1:], start=1):
        if line.strip() == "---":
            return "".join(lines[1:i]), "".join(lines[i + 1 :]).strip(), 1
    problem = SkillProblem(source, 1, "<file>", "the front matter is not closed by '---'")
    raise _error(source, [problem])


def _expanded_size(node: yaml.Node) -> int:
    """How many values the document holds with every alias expanded (stops past the limit)."""
    sizes: dict[int, int] = {}

    def size(n: yaml.Node, depth: int) -> int:
        if id(n) in sizes:
            return sizes[id(n)]
        if depth > MAX_DEPTH:
            return MAX_NODES + 1
        total = 1
        if isinstance(n, yaml.MappingNode):
            for key, value in n.value:
                total += size(key, depth + 1) + size(value, depth + 1)
                if total > MAX_NODES:
                    break
        elif isinstance(n, yaml.SequenceNode):
            for item in n.value:
                total += size(item, depth + 1)
                if total > MAX_NODES:
                    break
        sizes[id(n)] = total
        return total

    return size(node, 0)


def yaml_line(node: yaml.Node | None, loc: tuple[Any, ...]) -> int:
    """The 1-based line of the value at ``loc``, or of the deepest mapping on the way to it."""
    if node is None:
        return 1
    line = node.start_mark.line + 1
    for part in loc:
        child = _child(node, part)
        if child is None:
            break
        key, node = child
        line = (key or node).start_mark.line + 1
    return line


def _child(node: yaml.Node, part: Any) -> tuple[yaml.Node | None, yaml.Node] | None:
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            if isinstance(key, yaml.ScalarNode) and key.value == str(part):
                return key, value
    elif (
        isinstance(node, yaml.SequenceNode)
        and isinstance(part, int)
        and 0 <= part < len(node.value)
    ):
        return None, node.value[part]
    return None


def _yaml_reason(error: yaml.YAMLError) -> str:
    problem = getattr(error, "problem", None)
    return str(problem) if problem else str(error).splitlines()[0]
