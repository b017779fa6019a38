"""The two tiers of tests, as the README gives them and CI runs them.

CI (``.ci/run``) runs the README's two test commands exactly: the quick tier, then the system
tier. Each test is in one tier: a module or folder of the system tier is marked (``-m
system``), the rest is the quick tier (the default). The durations snapshots name the tiers'
commands.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"


def _bash_blocks(text: str) -> list[str]:
    return [b.strip() for b in re.findall(r"^```bash\n(.*?)^```$", text, re.M | re.S)]


def test_ci_runs_the_readmes_quick_and_system_commands_exactly_in_that_order():
    commands = [
        line
        for line in (ROOT / ".ci" / "run").read_text().splitlines()
        if line and not line.startswith(("#", "set ", "cd "))
    ]
    blocks = _bash_blocks(README.read_text(encoding="utf-8"))
    quick, system = commands
    assert quick in blocks
    assert system in blocks
    assert blocks.index(quick) < blocks.index(system)
    assert quick.endswith("&& .venv/bin/pytest -q")
    assert system == ".venv/bin/pytest -q -m system -n0"  # one process: its Rays one at a time


def test_the_default_is_the_quick_tier_spread_over_the_cores():
    options = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]
    addopts = options["ini_options"]["addopts"]
    assert "-m 'not system'" in addopts
    assert "-n auto" in addopts
    assert options["ini_options"]["testpaths"][0] == "tests/cluster"  # `ray up` before any Ray
    assert "system" in " ".join(options["ini_options"]["markers"])


def test_each_tiers_durations_snapshot_is_kept_with_its_command():
    for tier in ("quick", "system"):
        snapshot = (ROOT / "tests" / "durations" / f"{tier}.txt").read_text()
        first = snapshot.splitlines()[0]
        assert first.startswith("# pytest -q"), first  # the command that measured it
        assert ("-m system" in first) == (tier == "system"), first
        assert "--durations-file" in first
        assert re.search(r"; wall \d+ s;", snapshot)
        assert "## by file (seconds)" in snapshot


def test_every_example_script_is_run_as_a_script_by_a_test_in_ci():
    testpaths = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"][
        "ini_options"
    ]["testpaths"]
    assert "tests/examples" in testpaths  # the system tier, which CI runs
    tests = (ROOT / "tests" / "examples" / "test_examples.py").read_text()
    run = set(re.findall(r'run_example\(\s*"(\w+)"', tests))
    # research_team.py is the README's first command: the wheel test runs it, installed
    wheel = (ROOT / "tests" / "cluster" / "test_wheel_install.py").read_text()
    assert '"examples" / "research_team.py"' in wheel
    helpers = {"mcp_server"}  # the MCP server that mcp_tools.py starts
    scripts = {p.stem for p in (ROOT / "examples").glob("*.py")}
    assert scripts - helpers - {"research_team"} == run, sorted(scripts ^ run)


def test_every_test_on_the_sessions_ray_goes_to_one_worker_the_rest_one_by_one():
    from tests.conftest import RAY_TESTS, scope  # noqa: PLC0415

    ray_tests = ["tests/integration/test_jobs.py::test_a", "tests/integration/test_x.py::t[1]"]
    assert {scope(nodeid) for nodeid in ray_tests} == {RAY_TESTS}
    assert scope("tests/unit/test_cli.py::test_b") == "tests/unit/test_cli.py::test_b"
