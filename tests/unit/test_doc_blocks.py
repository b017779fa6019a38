"""Every code block of the README and of ``docs/`` is checked against the code it describes.

The blocks are read from the Markdown itself, so a renamed command, option, route, function
or field fails here rather than in a reader's shell. By kind:

- ``python``: compiles; every ``raytroupe.X``/``runtime.X`` it names is exported, every
  ``rt.method(`` is a method of :class:`Runtime` and every ``job.method(`` of
  :class:`JobHandle`; ``from raytroupe... import`` imports.
- a shell command (a ``bash`` block's lines; the ``$ `` lines of a ``text`` block): ``troupe``
  is parsed by the real command line (its command path, options and arguments, as click
  parses them before running anything); ``curl`` names a route of the HTTP application's
  OpenAPI document with its method; ``python FILE`` and ``ray up FILE`` name a file of the
  repository; ``python -c CODE`` compiles; ``pip install -e '.[extra]'`` names an extra.
- ``yaml`` (a skill): its keys are the skill model's fields; ``toml`` (CLI profiles): its
  keys are those the CLI reads.
- anything else is output or a picture, shown as it came.

Blocks that also run in full, their output compared: the README's quick start, its HTTP
session's first command (``tests/examples/test_doc_blocks_run.py``), the set-up and test commands
(``.ci/run``), the cluster commands (``tests/cluster/test_ray_up.py``).
"""

from __future__ import annotations

import glob
import re
import shlex
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest
import typer
import yaml
from typer._click.exceptions import ClickException  # typer's own click (0.27)

import raytroupe
from raytroupe.deployments.api import create_api
from raytroupe.deployments.config import APIConfig
from raytroupe.protocols import SkillSpec
from raytroupe.runtime.cli import app as cli_app
from raytroupe.runtime.cli._remote import _PROFILE_FIELDS  # the keys the CLI reads
from raytroupe.runtime.driver import Runtime
from raytroupe.runtime.handle import JobHandle

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
_BLOCK = re.compile(r"^```(\w*)\n(.*?)^```$", re.MULTILINE | re.DOTALL)


@dataclass(frozen=True)
class Block:
    doc: str
    line: int
    lang: str
    text: str

    def __str__(self) -> str:
        return f"{self.doc}:{self.line}"


def _blocks() -> list[Block]:
    found = []
    for doc in DOCS:
        text = doc.read_text(encoding="utf-8")
        for m in _BLOCK.finditer(text):
            line = text[: m.start()].count("\n") + 1
            found.append(Block(str(doc.relative_to(ROOT)), line, m.group(1), m.group(2)))
    return found


BLOCKS = _blocks()


def _commands(block: Block) -> list[str]:
    """The shell commands of a block: every line of a bash block, the ``$`` lines of others,
    each with its continuations (a trailing backslash, a quote left open)."""
    lines = block.text.splitlines()
    commands: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if block.lang == "bash":
            command = line
        elif line.startswith("$ "):
            command = line[2:]
        else:
            continue
        while command.endswith("\\") or _open_quote(command):
            if i >= len(lines):
                break
            command = command.removesuffix("\\") + ("\n" if _open_quote(command) else " ")
            command += lines[i]
            i += 1
        command = re.sub(r"(?<!['\"])\s#\s.*$", "", command).strip()  # a trailing comment
        if command and not command.startswith("#"):
            commands.append(command)
    return commands


def _open_quote(command: str) -> bool:
    try:
        shlex.split(command, comments=True)
    except ValueError:
        return True
    return False


def _routes() -> set[tuple[str, str]]:
    paths = create_api(object(), APIConfig()).openapi()["paths"]
    return {
        (method.upper(), re.sub(r"\{[^}]+\}", "{}", path))
        for path, item in paths.items()
        for method in item
    }


ROUTES = _routes()
TROUPE = typer.main.get_command(cli_app)


def check_troupe(args: list[str]) -> None:
    """Parse ``troupe ARGS`` as the command line would, down to the leaf command; run nothing."""
    expanded: list[str] = []
    for arg in args:  # the shell expands a glob before troupe sees it
        matches = sorted(glob.glob(arg, root_dir=ROOT)) if "*" in arg else []
        expanded.extend(matches or [arg])
    command = TROUPE
    context = command.make_context("troupe", expanded, resilient_parsing=False)
    rest = [*context._protected_args, *context.args]  # click's own split
    while hasattr(command, "resolve_command") and rest:  # a group: on to its command
        name, sub, rest = command.resolve_command(context, rest)
        assert sub is not None, f"troupe has no command {name!r}"
        command = sub
        context = command.make_context(name or "", rest, parent=context)
        rest = [*context._protected_args, *context.args]
    assert not rest, f"left over: {rest}"


def check_curl(args: list[str]) -> None:
    method = "GET"
    urls = [a for a in args if "/v1/" in a or a.endswith(("/healthz", "/readyz"))]
    assert len(urls) == 1, args
    if "-X" in args:
        method = args[args.index("-X") + 1]
    elif "-d" in args:
        method = "POST"
    path = "/" + urls[0].split("/", 3)[3] if "://" in urls[0] else urls[0].split("URL", 1)[1]
    path = path.split("?", 1)[0]
    shape = re.sub(r"/(job-[0-9a-f]+|research|[0-9a-f-]{36})(?=/|$)", "/{}", path)
    assert (method, shape) in ROUTES, f"{method} {path}: no such route"


def _check_python(words: list[str]) -> None:
    if words[:1] == ["-c"]:
        compile(words[1], "<python -c>", "exec")
    elif words[:2] == ["-m", "venv"]:
        return
    elif words[:1] == ["-m"]:
        module = words[1].removeprefix("raytroupe.")
        assert (ROOT / module.replace(".", "/")).with_suffix(".py").is_file(), words[1]
    else:
        assert (ROOT / words[0]).is_file(), f"no script {words[0]}"


def _check_ray(words: list[str]) -> None:
    if words[0] == "job":  # Ray's job server: what it is to run
        assert words[1] in {"submit", "logs", "status", "stop", "list"}, words
        if "--" in words:
            check_command(shlex.join(words[words.index("--") + 1 :]))
        return
    # Ray's own command line, on a cluster config of this repository
    assert words[0] in {"up", "down", "exec", "rsync-up", "attach", "get-auth-token"}, words
    config = next(w for w in words[1:] if not w.startswith("-"))  # then its own files
    assert (ROOT / config).is_file(), f"no cluster config {config}"


def _check_install(words: list[str]) -> None:
    if "-e" not in words:
        return
    extras = re.findall(r"\[([^\]]+)\]", words[words.index("-e") + 1])
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    for extra in ",".join(extras).split(",") if extras else []:
        assert extra in declared["optional-dependencies"], extra


CHECKS = {
    "troupe": check_troupe,
    "curl": check_curl,
    "python": _check_python,
    "python3": _check_python,
    "ray": _check_ray,
    "pip": _check_install,
    "uv": _check_install,
}
UNCHECKED = {"export", "unset", "cut", "cd", "pytest", "ruff", "mypy"}
"""Commands of the shell or of the tests' own tools, whose use the pages show as is."""


def check_command(command: str) -> str:
    """Check one shell command (each of a pipeline or a list); what kind it was."""
    for part in re.split(r"\s*(?:&&|;|\|)\s*(?=(?:[^'\"]|'[^']*'|\"[^\"]*\")*$)", command):
        words = shlex.split(part, comments=True)
        while words and re.fullmatch(r"[A-Z_]+=\S*", words[0]):
            words = words[1:]  # VAR=value before a command
        if not words:
            continue
        tool = words[0].removeprefix(".venv/bin/")
        if tool in CHECKS:
            CHECKS[tool](words[1:])
        else:
            assert tool in UNCHECKED, f"no check for {tool!r}: teach this test, or show it as text"
    return "shell"


def _names(code: str, prefix: str) -> set[str]:
    return set(re.findall(rf"(?<![\w.]){prefix}\.(\w+)", code))


def check_python(block: Block) -> str:
    compile(block.text, str(block), "exec")
    exported = set(dir(raytroupe))
    for name in _names(block.text, "raytroupe") | _names(block.text, "runtime"):
        assert name in exported, f"raytroupe.{name} is not exported"
    for name in _names(block.text, "rt"):
        assert hasattr(Runtime, name), f"Runtime has no {name}"
    for name in _names(block.text, "job"):
        assert hasattr(JobHandle, name), f"JobHandle has no {name}"
    for module, names in re.findall(r"^from (raytroupe[\w.]*) import (.+)$", block.text, re.M):
        imported = __import__(module, fromlist=["_"])
        for name in re.findall(r"\w+", names):
            assert hasattr(imported, name), f"{module}.{name}"
    return "python"


def check_block(block: Block) -> str:
    if block.lang == "python":
        return check_python(block)
    if block.lang == "yaml":
        keys = set(yaml.safe_load(block.text))
        assert keys <= set(SkillSpec.model_fields), keys - set(SkillSpec.model_fields)
        return "yaml"
    if block.lang == "toml":
        for fields in tomllib.loads(block.text)["profiles"].values():
            assert set(fields) <= _PROFILE_FIELDS, fields
        return "toml"
    commands = _commands(block)
    for command in commands:
        check_command(command)
    if block.lang == "bash" or commands:
        assert commands, f"{block}: a bash block with no command"
        return "shell"
    return "output"


@pytest.mark.parametrize("block", BLOCKS, ids=str)
def test_every_code_block_is_checked_against_the_code(block):
    check_block(block)


def test_the_blocks_of_every_kind_are_found():
    kinds = [check_block(b) for b in BLOCKS]
    for kind, at_least in {"python": 8, "shell": 12, "yaml": 1, "toml": 1, "output": 10}.items():
        assert kinds.count(kind) >= at_least, (kind, kinds.count(kind))
    assert sum(len(_commands(b)) for b in BLOCKS) >= 30


@pytest.mark.parametrize(
    "bad",
    [
        "troupe run examples/teams/research.yaml --no-such-option 1",
        "troupe no-such-command",
        "troupe skills no-such-verb",
        "curl -s $URL/v1/no-such-route -H 'Authorization: Bearer k'",
        "curl -s -X DELETE $URL/v1/usage",
        "python examples/no_such_example.py",
        "python -c 'print('",
        "pip install -e '.[no-such-extra]'",
        "rm -rf build",
        "ray up -y deployments/no-such-cluster.yaml",
    ],
)
def test_a_command_that_does_not_match_the_code_is_refused(bad):
    with pytest.raises((AssertionError, ClickException, SyntaxError)):
        check_command(bad)


def test_a_python_block_naming_what_is_not_there_is_refused():
    for code in ("rt = raytroupe.conect()\n", "rt.submt('x')\n", "job.reslt()\n", "x = (\n"):
        with pytest.raises((AssertionError, SyntaxError)):
            check_python(Block("t.md", 1, "python", code))


def _heading(block: Block) -> str:
    text = (ROOT / block.doc).read_text(encoding="utf-8")
    above = "\n".join(text.splitlines()[: block.line])
    found = re.findall(r"^## (.+)$", _BLOCK.sub("", above + "\n```\n"), re.MULTILINE)
    return found[-1] if found else ""


def test_every_python_block_runs_in_a_test_or_says_why_not():
    from tests.examples.test_doc_blocks_run import (  # noqa: PLC0415
        RUN_ELSEWHERE,
        RUN_HERE,
        SHOWN_NOT_RUN,
    )

    for block in [b for b in BLOCKS if b.lang == "python"]:
        keys = {block.doc, f"{block.doc}:{_heading(block)}"}
        accounted = keys & {*RUN_HERE, *RUN_ELSEWHERE, *SHOWN_NOT_RUN}
        assert accounted, f"{block} ({_heading(block)}) is run by no test and says not why"
