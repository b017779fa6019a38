"""Fixtures of the Ray suites (integration, reliability): one real local Ray per session."""

from __future__ import annotations

import functools
import os
import re
import secrets
import shutil
import tempfile
from pathlib import Path

import pytest

from raytroupe import runtime
from raytroupe.actors.skills.config import SkillsConfig
from raytroupe.actors.tools.config import FunctionTool
from tests.support.guardrail_checks import NO_CODENAME, RAISES
from tests.support.host_guard import NOTES_ENV, HostState, read_notes
from tests.support.keys import (
    FRUGAL_BUDGET,
    FRUGAL_TENANT,
    TEST_KEY,
    TEST_KEY_ENV,
    WINDOWED_LIMITS,
)
from tests.support.ledger import TOOL_NAME, TOOL_TARGET
from tests.support.mcp_servers import STDIO_COMMAND

ROOT = Path(__file__).resolve().parents[1]

SESSION_RAY = "the session's Ray"
"""The xdist unit of work of every test file on the session's Ray (the ``rt``/``api``
fixtures): one worker runs them all."""

_SESSION_FIXTURES = re.compile(r"\bdef \w+\([^)]*\b(?:rt|api)\b")
"""A function (test or fixture) that takes the session's ``rt`` or ``api``."""

METRICS_INTERVAL_MS = 5000
"""How often the session's Ray exports metrics (``RAY_metrics_report_interval_ms``)."""

SESSION_AGENTS_IDLE_S = 30.0
"""The session's default ``TenantPolicy.agents_idle_s``."""

SYSTEM_FOLDERS = ("tests/cluster/", "tests/examples/", "tests/reliability/")
"""Folders whose every test is of the system tier (``-m system``); a module elsewhere joins it
with ``pytestmark = pytest.mark.system``."""


def _session_ray_token() -> Path | None:
    """Give the session's Rays a token file of their own; the folder made here, if any.

    Ray 2.60 turns token auth on for every new local cluster and, finding no token, writes one
    to ``~/.ray/auth_token``: the tests' Rays (and drivers, ``troupe up`` heads) read and keep
    it in a folder that the session removes instead. Set when the module loads, so xdist's
    workers, and every process the tests start, inherit it from the first process.
    """
    if "RAY_AUTH_TOKEN" in os.environ or "RAY_AUTH_TOKEN_PATH" in os.environ:
        return None
    folder = Path(tempfile.mkdtemp(prefix="raytroupe-tests-ray-token-"))
    token = folder / "auth_token"
    token.write_text(secrets.token_hex(32), encoding="utf-8")
    token.chmod(0o600)
    os.environ["RAY_AUTH_TOKEN_PATH"] = str(token)
    return folder


_TOKEN_FOLDER = _session_ray_token()


def pytest_addoption(parser):
    parser.addoption(
        "--durations-file",
        metavar="PATH",
        help="write every test's time, by file and by test, to PATH (tests/durations/)",
    )


def pytest_configure(config):
    if path := config.getoption("--durations-file"):
        from tests.support.durations import Durations  # noqa: PLC0415

        command = " ".join(["pytest", *config.invocation_params.args])
        config.pluginmanager.register(Durations(Path(path), command), "troupe-durations")


_HOST_AT_START = pytest.StashKey[HostState]()


def pytest_sessionstart(session):
    """The host as the session found it: once, in the process that runs the rest (not xdist's
    workers), and only in the outermost session (not one that a test started)."""
    if hasattr(session.config, "workerinput") or os.environ.get(NOTES_ENV):
        return
    handle, notes = tempfile.mkstemp(prefix="raytroupe-host-guard-")
    os.close(handle)
    os.environ[NOTES_ENV] = notes  # every process started from here on inherits it
    session.config.stash[_HOST_AT_START] = HostState.take()


def pytest_sessionfinish(session):
    """The session fails if its tests left the home or the accounts otherwise than they found
    them (:mod:`tests.support.host_guard`); under xdist, once every worker has ended."""
    before = session.config.stash.get(_HOST_AT_START, None)
    if before is None:
        return
    if _TOKEN_FOLDER is not None:
        shutil.rmtree(_TOKEN_FOLDER, ignore_errors=True)
    notes = Path(os.environ.pop(NOTES_ENV))
    installed = read_notes(notes)
    notes.unlink(missing_ok=True)
    changes = HostState.take().changes_since(before, installed)
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None and installed:
        reporter.section("made by the packages the tests installed", sep="-")
        for name, purpose in sorted(installed.items()):
            reporter.line(f"{name}: {purpose}")
    if not changes:
        return
    if reporter is not None:
        reporter.section("the tests changed the host", sep="=", red=True, bold=True)
        for line in changes:
            reporter.line(line, red=True)
    session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_xdist_make_scheduler(config, log):
    """Spread tests over the workers, every test on the session's Ray to the same one.

    A Ray per worker cost more CPU than the second core gave back (on 2 cores: 727 s against
    522 s for the quick tier); in the system tier, the tests that start Rays, clusters and
    servers of their own wait much of the time, beside those on the session's Ray. xdist's own
    ``--dist loadgroup`` no longer groups on pytest 9.2 (pytest-dev/pytest-xdist#1386), hence
    a scheduler of ours over :func:`scope` (the largest unit first).
    """
    from xdist.scheduler import LoadScopeScheduling  # noqa: PLC0415 - only with -n

    class ByScope(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return scope(nodeid)

    return ByScope(config, log)


def scope(nodeid: str, root: Path = ROOT) -> str:
    """A test's unit of work under xdist.

    Every file on the session's Ray is one unit (:data:`SESSION_RAY`); a unit test is one by
    itself; any other file is one (its module's fixtures are set up once). The ``ray up``
    cluster (tests/cluster) needs the machine to itself: the system tier runs it first, alone.
    """
    path = nodeid.split("::", 1)[0]
    if _on_session_ray(root / path):
        return SESSION_RAY
    return nodeid if path.startswith("tests/unit/") else path


@functools.cache
def _on_session_ray(path: Path) -> bool:
    try:
        return bool(_SESSION_FIXTURES.search(path.read_text(encoding="utf-8")))
    except OSError:
        return False


def pytest_itemcollected(item):
    """Each test's tier: the system tier's folders are marked as their tests are collected."""
    path = str(item.path).replace("\\", "/")
    if "tests/integration/" in path:
        item.add_marker(pytest.mark.integration)
    if any(folder in path for folder in SYSTEM_FOLDERS):
        item.add_marker(pytest.mark.system)
    if "tests/cluster/" in path:
        item.add_marker(pytest.mark.cluster)


@pytest.fixture(scope="session")
def skills_dir(tmp_path_factory):
    """The session orchestrator's skills directory (empty at start; tests write files in it)."""
    return tmp_path_factory.mktemp("skills")


@pytest.fixture(scope="session")
def troupe_root(tmp_path_factory):
    """Where the session's raytroupe keeps its files: state, journal, scratch, memories."""
    return tmp_path_factory.mktemp("troupe")


@pytest.fixture(scope="session")
def a2a_agent():
    """A real A2A agent (the SDK's server) on 127.0.0.1, the session's tool ``a2a_shouter``."""
    from tests.support.a2a_agents import running_agent  # noqa: PLC0415 - uvicorn only if used

    with running_agent() as agent:
        yield agent


@pytest.fixture(scope="session")
def rt(troupe_root, postgres, skills_dir, a2a_agent):
    """The session's raytroupe, its durable state in a real PostgreSQL (as on a cluster).

    SQLite, the embedded default, is what `troupe up`, the examples, the ``ray up`` tier and
    the node-loss drill run on; the store contract suite runs both.
    """
    from tests.support.postgres import SESSION_DATABASE  # noqa: PLC0415

    os.environ[TEST_KEY_ENV] = TEST_KEY
    root = troupe_root
    tools = runtime.ToolsConfig(
        state_dir=root / "state",
        scratch_root=root / "scratch",
        mcp_servers=(runtime.MCPServerSpec(name="testmcp", command=STDIO_COMMAND),),
        # a remote A2A agent on loopback, which the operator of this session allows
        a2a_agents=(runtime.A2AAgentSpec(name="shouter", url=a2a_agent.url, timeout_s=30.0),),
        network=runtime.NetworkPolicy(allow=("127.0.0.1",)),
        limits=runtime.Limits(wall_s=10.0, memory_mb=256),
        approval_required=("echo",),
        # side-effecting, appends a line per run: the chaos suite counts real executions
        functions={TOOL_NAME: FunctionTool(target=TOOL_TARGET, side_effects=True)},
    )
    # Ray's default is 10 s; at 1 s its dashboard agent took ~3 s of CPU a minute more than at
    # 5 s, and every process with a gauge sets it again each half interval
    os.environ.setdefault("RAY_metrics_report_interval_ms", str(METRICS_INTERVAL_MS))
    # memories of this session only: the default lives in ~/.raytroupe and outlasts the run
    memory = runtime.MemoryConfig(path=root / "memory")
    # the operator of this session runs its model servers on loopback, keyed by TEST_KEY_ENV
    llm = runtime.LLMConfig(
        replicas=2,  # every test runs on two pool replicas: one ledger, one configuration
        network=runtime.NetworkPolicy(allow=("127.0.0.1",)),
        keys={TEST_KEY_ENV: ("127.0.0.1",)},
        tenant_budgets={FRUGAL_TENANT: FRUGAL_BUDGET},
        spend_limits=WINDOWED_LIMITS,
    )
    troupe = runtime.connect(
        address="local",
        num_cpus=2,
        log_level="warning",
        llm_config=llm,
        tools_config=tools,
        memory_config=memory,
        # every envelope goes through one of two router shards, which share the registry, and
        # jobs run on two orchestrator shards in turn
        config=runtime.SystemConfig(
            scale=runtime.ScaleConfig(router_shards=2, orchestrator_shards=2),
            # orchestrator/0 loads and watches this directory (tests/integration/test_skills.py)
            skills=SkillsConfig(directory=skills_dir),
            # webhooks to receivers on loopback, which this session's operator allows; tried
            # again soon, so a test sees a retry within seconds
            webhooks=runtime.WebhooksConfig(
                network=runtime.NetworkPolicy(allow=("127.0.0.1",)),
                attempts=4,
                retry_s=0.2,
                max_retry_s=1.0,
                poll_s=0.5,
            ),
            # the callables this session's guardrails may name (tests/support/guardrail_checks)
            guardrails=runtime.GuardrailsConfig(callables=(NO_CODENAME, RAISES)),
        ),
        journal=root / "state" / "journal.sqlite",
        state_url=postgres.database(SESSION_DATABASE),
    )
    # a test's inline agents stop soon after its last job (the default keeps them 5 minutes):
    # left running, a session's hundred idle agent processes took a third of its CPU
    troupe.put_policy("*", runtime.TenantPolicy(agents_idle_s=SESSION_AGENTS_IDLE_S))
    yield troupe
    troupe.shutdown()


@pytest.fixture(scope="session")
def api(rt):
    """The HTTP application, deployed with Ray Serve on 127.0.0.1 (once per session)."""
    from tests.support.http_api import deploy  # noqa: PLC0415 - imports Serve only if used

    return deploy()


@pytest.fixture(scope="session")
def postgres():
    """A real PostgreSQL on 127.0.0.1, started on first use, stopped at the session's end."""
    from tests.support.postgres import postgres_server  # noqa: PLC0415

    with postgres_server() as server:
        yield server


@pytest.fixture(params=["sqlite", "postgresql"])
def state_at(request, tmp_path):
    """Where a store keeps its state, on each backend: ``state_at("journal")``.

    SQLite: a file per store under ``tmp_path``; PostgreSQL: one fresh database per test,
    which every store of the test shares (as a cluster's actors do).
    """
    if request.param == "sqlite":
        return lambda name: tmp_path / f"{name}.sqlite"
    url = request.getfixturevalue("postgres").database()
    return lambda _name: url
