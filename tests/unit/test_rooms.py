"""Who imports whom (CONTRIBUTING.md, "The rooms"), checked on the source, not on a run.

``runtime/`` and ``deployments/`` reach the actors only through the door
``raytroupe.actors.spawn``, and only for the names it exports; what crosses the line
(configuration models, file readers, wire types) lives in ``raytroupe.protocols``, which
imports nothing of ours but itself. Every import counts (module level, in a function, under
``TYPE_CHECKING``), and so does every string that names a module (a lazy-export table);
docstrings and other bare strings (documentation) do not.
"""

from __future__ import annotations

import ast
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOOR = "raytroupe.actors.spawn"
ACTORS = re.compile(r"\braytroupe\.actors(?:\.[A-Za-z_][\w.]*)?")
OURS = re.compile(r"\braytroupe\.(?:actors|runtime|deployments)(?:\.[A-Za-z_][\w.]*)?")


def _module_of(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(("raytroupe", *parts))


def _resolved(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    """The absolute module a ``from ... import`` names (a relative one resolved)."""
    if node.level == 0:
        return node.module or ""
    base = module.split(".")
    base = base if is_package else base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, *([node.module] if node.module else [])])


def _bare_strings(tree: ast.AST) -> set[int]:
    """Ids of string constants that are statements of their own: docstrings, notes."""
    return {
        id(node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
    }


def references(path: Path) -> Iterator[tuple[int, str, str | None]]:
    """``(line, module, name)`` for each module that ``path`` imports or names in a string.

    ``name`` is what a ``from module import name`` takes (None for ``import module`` and for
    a string); ``from raytroupe import actors`` is the module ``raytroupe.actors``.
    """
    module = _module_of(path)
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    bare = _bare_strings(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name, None
        elif isinstance(node, ast.ImportFrom):
            source = _resolved(node, module, path.name == "__init__.py")
            for alias in node.names:
                if source == "raytroupe":
                    yield node.lineno, f"raytroupe.{alias.name}", None
                else:
                    yield node.lineno, source, alias.name
        elif (
            isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in bare
        ):
            for found in OURS.findall(node.value):
                yield node.lineno, found.rstrip("."), None


def _sources(*folders: str) -> list[Path]:
    return sorted(p for folder in folders for p in (ROOT / folder).rglob("*.py"))


def _door_exports() -> frozenset[str]:
    """The names ``raytroupe.actors.spawn`` exports: its ``__all__``."""
    init = ROOT / "actors" / "spawn" / "__init__.py"
    if not init.is_file():  # not a package yet: no list of entry points
        return frozenset()
    for node in ast.parse(init.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
        ):
            return frozenset(ast.literal_eval(node.value))
    return frozenset()


def _offence(module: str, name: str | None, exports: frozenset[str]) -> str | None:
    """What is wrong with one reference of runtime/ or deployments/ (None: nothing)."""
    if name is not None and module == DOOR:
        return None if name in exports or name == "*" else f"{DOOR}.{name} (not an entry point)"
    if name is not None and module == "raytroupe.actors":
        return None if name == "spawn" else f"raytroupe.actors.{name}"
    if ACTORS.fullmatch(module) and module != DOOR:
        return module if name is None else f"{module} ({name})"
    return None


def test_runtime_and_deployments_reach_the_actors_only_through_the_door():
    exports = _door_exports()
    offenders = sorted(
        {
            f"{path.relative_to(ROOT)}:{line}: {offence}"
            for path in _sources("runtime", "deployments")
            for line, module, name in references(path)
            if (offence := _offence(module, name, exports)) is not None
        }
    )
    assert not offenders, f"actors reached past {DOOR}:\n" + "\n".join(offenders)


def test_protocols_import_nothing_of_ours_but_protocols():
    offenders = sorted(
        {
            f"{path.relative_to(ROOT)}:{line}: {module}"
            for path in _sources("protocols")
            for line, module, _ in references(path)
            if OURS.fullmatch(module)
        }
    )
    assert not offenders, "\n".join(offenders)


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("from raytroupe.actors.llm.config import LLMConfig", ["raytroupe.actors.llm.config"]),
        ("def f():\n    import raytroupe.actors.offload", ["raytroupe.actors.offload"]),
        (
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
            "    from raytroupe.actors.state import redact_url",
            ["raytroupe.actors.state"],
        ),
        ('HOMES = {"X": "raytroupe.actors.outbound"}', ["raytroupe.actors.outbound"]),
        ("from raytroupe import actors", ["raytroupe.actors"]),
        ("from raytroupe.actors import offload", ["raytroupe.actors.offload"]),
        ("from ..actors import offload", ["raytroupe.actors.offload"]),
        ("import raytroupe.actors.spawn.system", ["raytroupe.actors.spawn.system"]),
        ("from raytroupe.actors.spawn import NotAnEntryPoint", ["NotAnEntryPoint"]),
        ('"""See :mod:`raytroupe.actors.llm`."""\nfrom raytroupe.actors.spawn import *', []),
        ("from raytroupe.actors.spawn import NAMESPACE", []),
        ("from raytroupe.actors import spawn", []),
    ],
)
def test_the_check_sees_every_kind_of_reference(tmp_path, monkeypatch, source, expected):
    folder = tmp_path / "runtime"
    folder.mkdir()
    (folder / "probe.py").write_text(source + "\n")
    (tmp_path / "deployments").mkdir()
    spawn = tmp_path / "actors" / "spawn"
    spawn.mkdir(parents=True)
    (tmp_path / "actors" / "__init__.py").write_text("")
    (spawn / "__init__.py").write_text('__all__ = ["NAMESPACE"]\n')
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    if not expected:
        test_runtime_and_deployments_reach_the_actors_only_through_the_door()
        return
    with pytest.raises(AssertionError) as failed:
        test_runtime_and_deployments_reach_the_actors_only_through_the_door()
    for fragment in expected:
        assert fragment in str(failed.value)
