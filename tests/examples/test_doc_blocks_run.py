"""The Python blocks of ``docs/`` run as written, each page's in order, as one reader's session.

A page's blocks are fragments of one session (``rt``, a ``team``), so each page runs as one
script: a prelude that connects, then every block of the page as the page writes it. The
script is a second driver of the tests' own Ray (``RAY_ADDRESS``, as ``ray job submit`` and
cluster drivers join one), which spares it a Ray of its own. The OpenAI client of the HTTP
page runs against the tests' Serve application. The README's ``curl`` command that registers
a team and its Python quick start run as the README writes them, in its order, against the
tests' deployment. ``tests/unit/test_doc_blocks.py`` checks
every block against the code; it also holds that each Python block is run here, by the
README's test, or shown with a reason.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import ray

from raytroupe import runtime
from tests.support.drivers import ROOT, block_after, readme, run_script
from tests.support.http_api import ADMIN_KEY, team_kept
from tests.support.inline import agent_actor

PRELUDE = (
    "from raytroupe import runtime\n"
    "rt = runtime.connect()\n"
    'team = runtime.Team.from_yaml("examples/teams/research.yaml")\n'
)

RUN_HERE = {"docs/driver.md": "", "docs/memory.md": PRELUDE, "docs/http-api.md": None}
"""Pages whose Python blocks run here, with the prelude each gets (None: a test of its own)."""

RUN_ELSEWHERE = {
    "README.md:Quick start in Python": "run and compared below, in the README's order",
}
SHOWN_NOT_RUN = {
    "README.md:A real model": "four providers' real endpoints and keys",
    "docs/llm-gateway.md": "the README's real-model block, by snippet",
    "docs/local-models.md": "a GGUF file of the reader's; test_local_model_ray.py runs LocalModel",
}
"""Python blocks that need what a test cannot have (a provider's key, a reader's model file)."""


def python_blocks(page: str) -> list[str]:
    text = (ROOT / page).read_text(encoding="utf-8")
    return re.findall(r"^```python\n(.*?)^```$", text, re.MULTILINE | re.DOTALL)


@pytest.mark.parametrize("page", [p for p, prelude in RUN_HERE.items() if prelude is not None])
def test_the_python_blocks_of_a_page_run_in_order(page, tmp_path, rt):
    blocks = python_blocks(page)
    assert blocks, page
    prelude = RUN_HERE[page] or ""
    # each block's last expression is printed, as a reader at a prompt would see it
    shown = "".join(_printing_last(b) for b in blocks)
    epilogue = EPILOGUES.get(page, "") + ("rt.shutdown()\n" if prelude else "")
    done = run_script(prelude + shown + epilogue, tmp_path, ray.get_runtime_context().gcs_address)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Started a local Ray instance" not in done.stderr  # it joined the tests' Ray
    out = done.stdout.splitlines()
    if page == "docs/memory.md":
        _first, second, turns, ingested, passages, spec, recalled = out
        assert "billing service" in second  # the session's second job saw the first turn
        assert turns.count("SessionTurn(") == 2
        assert "source='ray_basics.md'" in ingested
        assert "replicas" in passages  # the two best passages on Serve's replicas
        assert "knowledge=('ray-docs',)" in spec
        assert recalled == "Grace wants reports as bullet points."  # acme's memory, best first


EPILOGUES = {"docs/memory.md": "print(hits[0].text)\n"}
"""What a test reads back after a page's blocks (the blocks keep some results in names)."""


def _printing_last(block: str) -> str:
    """The block, with each top-level line that is an expression statement printed."""
    tree = ast.parse(block)
    lines = block.splitlines(keepends=True)
    out = list(lines)
    for node in tree.body:
        if isinstance(node, ast.Expr) and not isinstance(node.value, ast.Constant):
            start, end = node.lineno - 1, (node.end_lineno or node.lineno) - 1
            expression = "".join(lines[start : end + 1]).split("#", 1)[0].strip()
            out[start] = f"print(repr({expression}))\n"
            for i in range(start + 1, end + 1):
                out[i] = ""
    return "".join(out)


def test_the_openai_client_block_talks_to_a_registered_team(api, tmp_path):
    (block,) = python_blocks("docs/http-api.md")
    code = f"KEY = {ADMIN_KEY!r}\n" + block.replace("http://127.0.0.1:18200", api.url)
    assert api.url in code  # the block's URL was found and pointed at the tests' application
    team = runtime.Team.from_yaml(ROOT / "examples/teams/research.yaml").spec()
    with api.client(ADMIN_KEY) as admin, team_kept(admin, "research"):
        put = admin.put("/v1/teams/research", json=team.model_dump(mode="json"))
        assert put.status_code in (200, 201), put.text
        done = run_script(code, tmp_path)
    assert done.returncode == 0, done.stderr
    out = done.stdout.splitlines()
    text = (ROOT / "docs/http-api.md").read_text(encoding="utf-8")
    shown = text.split(block, 1)[1].split("```text\n", 1)[1].split("```", 1)[0].splitlines()
    assert "'research'" in out[0]  # the models: the registered teams this key may run
    assert out[1:-1] == shown[1:-1], done.stdout  # the answer, as the page shows it
    assert out[-1].startswith("CompletionUsage(completion_tokens=")


def test_the_readmes_blocks_run_in_order_against_one_deployment(api, rt, tmp_path):
    """The README's blocks, in its order, against the tests' deployment.

    Its ``curl`` command registers ``research`` over HTTP (an ``ada`` who is a researcher);
    then its Python quick start, a second driver of the same Ray, defines an inline team
    whose ``ada`` is an analyst, runs it, and prints what the README shows. A driver's
    inline team runs under its tenant's names, so it takes none of a registered team's:
    the registered ``ada`` is left as the operator put it.
    """
    text = readme()
    command = (
        "python -c 'import raytroupe; print(raytroupe.Team.from_yaml"
        + (text.split("$ python -c 'import raytroupe; print(raytroupe.Team.from_yaml", 1)[1])
    )
    command = command.split("\n201\n", 1)[0]  # the command, up to its shown answer
    assert command.endswith("-w '%{http_code}\\n'"), command
    code = block_after(text, "## Quick start in Python", "python")
    shown = block_after(text, code, "text")
    skill = "invoice-reader"  # the quick start registers it; the test takes it away again
    assert skill not in {s.name for s in rt.skills().skills}
    with api.client(ADMIN_KEY) as admin, team_kept(admin, "research") as before:
        try:
            registered = _curl(command, api.url)
            team = admin.get("/v1/teams/research")
            done = run_script(code, tmp_path, ray.get_runtime_context().gcs_address)
            after = admin.get("/v1/teams/research")
            researcher = ray.get(rt.actor("agent/ada").spec.remote())  # the registered one
            analyst = ray.get(rt.actor(agent_actor("ada")).spec.remote())  # the quick start's
        finally:
            if skill in {s.name for s in rt.skills().skills}:
                rt.delete_skill(skill)
    assert registered.returncode == 0, registered.stderr
    assert registered.stdout == ("200\n" if before.status_code == 200 else "201\n")
    assert team.status_code == 200
    agents = {a["name"]: a for a in team.json()["agents"]}
    assert set(agents) == {"ada", "grace", "alan"}
    assert agents["alan"]["tools"] == ["calculator"]
    assert agents["ada"]["role"] == "researcher"
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Started a local Ray instance" not in done.stderr  # it joined the tests' Ray
    assert done.stdout == shown
    assert after.json() == team.json()  # the registered ada is the researcher it was
    assert (researcher.role, analyst.role) == ("researcher", "analyst")


def _curl(command: str, url: str) -> subprocess.CompletedProcess[str]:
    """The README's ``curl`` command, run by bash with its ``$URL`` and ``$KEY`` set."""
    return subprocess.run(
        ["/bin/bash", "-c", command],
        cwd=ROOT,
        env={
            **os.environ,
            "URL": url,
            "KEY": ADMIN_KEY,
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        },
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
