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
    # the `ray up` cluster alone (it needs Ray's default ports), then two workers: the tests on
    # the session's Ray in one, the rest beside it (tests/conftest.py)
    assert system == (
        ".venv/bin/pytest -q -m cluster -n0 && .venv/bin/pytest -q -m 'system and not cluster' -n 2"
    )


def test_the_default_is_the_quick_tier_spread_over_the_cores():
    options = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]
    addopts = options["ini_options"]["addopts"]
    assert "-m 'not system'" in addopts
    assert "-n auto" in addopts
    assert options["ini_options"]["testpaths"][0] == "tests/cluster"
    assert "system" in " ".join(options["ini_options"]["markers"])


CORE = (
    "test_jobs", "test_cancel", "test_router", "test_http_api", "test_security",
    "test_fair_shares", "test_llm_pool", "test_tools_jobs", "test_guardrails_ray",
    "test_sessions_ray", "test_skills", "test_memory_actor", "test_http_openai",
    "test_console_api", "test_sandbox_escapes", "test_wire_server", "test_llm_llmock",
)  # fmt: skip
"""The integration files the quick tier keeps: a file per surface on the session's Ray, and
the sandbox escapes and a model server's wire protocol without it (docs/testing.md)."""


def test_the_quick_tier_keeps_a_real_ray_test_of_each_core_surface():
    from tests.conftest import _on_session_ray  # noqa: PLC0415

    files = [ROOT / "tests" / "integration" / f"{name}.py" for name in CORE]
    for path in files:
        assert "pytest.mark.system" not in path.read_text(encoding="utf-8"), path.name
    on_ray = [path.name for path in files if _on_session_ray(path)]
    assert len(on_ray) >= 12, on_ray  # most of them on the session's real Ray


def test_each_tiers_durations_snapshot_is_kept_with_its_command():
    for tier in ("quick", "cluster", "system"):  # the system tier's two commands
        snapshot = (ROOT / "tests" / "durations" / f"{tier}.txt").read_text()
        first = snapshot.splitlines()[0]
        assert first.startswith("# pytest -q"), first  # the command that measured it
        assert ("-m " in first) == (tier != "quick"), first  # the quick tier is the default
        assert tier == "quick" or tier in first, first
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
    # the MCP server that mcp_tools.py starts; what the HTTP examples share (they run it)
    helpers = {"mcp_server", "http_app"}
    scripts = {p.stem for p in (ROOT / "examples").glob("*.py")}
    assert scripts - helpers - {"research_team"} == run, sorted(scripts ^ run)


def test_every_file_on_the_sessions_ray_goes_to_one_worker_and_the_rest_spread(tmp_path):
    from tests.conftest import SESSION_RAY, scope  # noqa: PLC0415

    for name, text in {
        "tests/integration/test_a.py": "def test_a(rt, tmp_path):\n",
        "tests/integration/test_b.py": "@pytest.fixture\ndef served(\n    api,\n):\n",
        "tests/integration/test_c.py": "def test_c(tmp_path):\n    prompt = apis = 1\n",
        "tests/examples/test_d.py": "def test_d(postgres): ...\ndef test_e(api, x): ...\n",
        "tests/unit/test_e.py": "def test_e(): ...\n",
    }.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)

    def of(nodeid: str) -> str:
        return scope(nodeid, tmp_path)

    assert of("tests/integration/test_a.py::test_a") == SESSION_RAY
    assert of("tests/integration/test_b.py::test_x[1]") == SESSION_RAY
    assert of("tests/examples/test_d.py::test_d") == SESSION_RAY
    assert of("tests/integration/test_c.py::test_c") == "tests/integration/test_c.py"
    assert of("tests/unit/test_e.py::test_e") == "tests/unit/test_e.py::test_e"
    # the repository's own: the quick tier's router tests, the system tier's full restarts
    assert scope("tests/integration/test_router.py::test_router_client_from_the_driver") == (
        SESSION_RAY
    )
    assert scope("tests/integration/test_full_restart.py::t[sqlite]") == (
        "tests/integration/test_full_restart.py"
    )
