import io
import json
import os
import socket
import subprocess
import sys
import time

import pytest
import yaml
from rich.console import Console
from typer.testing import CliRunner

from raytroupe.deployments.config import APIConfig
from raytroupe.deployments.keys import hash_key
from raytroupe.protocols import ConfigError, Conflict, JobEvent
from raytroupe.protocols.graph_checkpoints import GraphCheckpoint, GraphInterrupt, GraphTask
from raytroupe.protocols.http import Forked, Resumed
from raytroupe.runtime.cli import _connect, _graphs, _local, _show, app
from raytroupe.runtime.cli._app import _GROUPS

runner = CliRunner()

GOOD_TEAM = """\
name: research
agents:
  - name: ada
    role: researcher
    instructions: Answer from the material.
"""


@pytest.fixture
def state_dir(tmp_path, monkeypatch):
    state = tmp_path / "state"
    monkeypatch.setenv("TROUPE_STATE_DIR", str(state))
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    return state


def _state(state_dir, pid, start):
    state = _local.UpState(
        pid=pid,
        pid_start=start,
        address="127.0.0.1:1",
        dashboard_url="http://127.0.0.1:2",
        temp_dir=state_dir / "ray",
        log_file=state_dir / "ray.log",
        started_at=time.time(),
    )
    _local.write_state(state_dir, state)
    return state


def _exited_process():
    """The PID and start time of a process that has exited."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    start = _local.process_start(child.pid)
    child.wait(timeout=30)
    return child.pid, start


def test_help_lists_every_command():
    result = runner.invoke(app, ["--help"])
    assert result.exit_code == 0
    for command in ("up", "down", "run", "jobs", "agents", "serve", "key", "checkpoints",
                    "resume", "fork"):  # fmt: skip
        assert command in result.stdout
    result = runner.invoke(app, ["key", "--help"])
    assert result.exit_code == 0
    assert "new" in result.stdout


def test_run_without_its_task_is_a_usage_error():
    result = runner.invoke(app, ["run", "team.yaml"])
    assert result.exit_code == 2
    assert "Missing argument 'task'" in result.output


def test_run_with_a_missing_team_file_exits_2_before_any_ray(tmp_path):
    missing = tmp_path / "nope.yaml"
    result = runner.invoke(app, ["run", str(missing), "a task"])
    assert result.exit_code == 2
    assert result.stderr.strip() == f"error: team file {str(missing)!r} does not exist"
    assert "Traceback" not in result.output


def test_run_with_an_invalid_team_file_names_each_problem(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: t\nagents:\n  - name: x\n    role: 3\n    colour: blue\n")
    result = runner.invoke(app, ["run", str(bad), "a task"])
    assert result.exit_code == 2
    assert "agents.0.role" in result.stderr
    assert "agents.0.colour" in result.stderr
    assert "Traceback" not in result.output


def test_run_with_a_file_that_is_not_yaml(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("agents: [unclosed\n")
    result = runner.invoke(app, ["run", str(bad), "a task"])
    assert result.exit_code == 2
    assert "not valid YAML" in result.stderr


def test_key_new_prints_a_key_once_and_the_entry_with_its_hash():
    result = runner.invoke(app, ["key", "new", "--tenant", "acme", "--admin"])
    assert result.exit_code == 0, result.output
    out = result.stdout
    key = next(w for w in out.split() if w.startswith("rt-"))
    assert f"Authorization: Bearer {key}" in out
    entry = yaml.safe_load(out[out.index("api_keys:") :])
    config = APIConfig.model_validate(entry)
    (api_key,) = config.api_keys
    assert api_key.hash == hash_key(key)
    assert api_key.tenant == "acme"
    assert api_key.admin is True
    assert out.count(key) == 3  # the panel and the two usage lines; the entry holds the hash


def test_key_new_makes_a_different_key_each_time():
    keys = set()
    for _ in range(2):
        out = runner.invoke(app, ["key", "new"]).stdout
        keys.add(next(w for w in out.split() if w.startswith("rt-")))
    assert len(keys) == 2


def test_key_new_refuses_an_invalid_tenant():
    result = runner.invoke(app, ["key", "new", "--tenant", "no spaces"])
    assert result.exit_code == 2
    assert "tenant" in result.stderr
    assert "rt-" not in result.output


def test_down_with_nothing_up(state_dir):
    result = runner.invoke(app, ["down"])
    assert result.exit_code == 0
    assert "nothing is up" in result.stdout


def test_down_with_a_stale_state_removes_it(state_dir):
    _state(state_dir, *_exited_process())
    result = runner.invoke(app, ["down"])
    assert result.exit_code == 0, result.output
    assert "was not running" in result.stdout
    assert not (state_dir / "up.json").exists()


def test_down_with_a_corrupt_state_file_names_it(state_dir):
    state_dir.mkdir()
    (state_dir / "up.json").write_text("{not json")
    result = runner.invoke(app, ["down"])
    assert result.exit_code == 1
    assert str(state_dir / "up.json") in result.stderr
    assert "Traceback" not in result.output


def test_up_refuses_when_the_recorded_head_is_alive(state_dir):
    me = os.getpid()
    _state(state_dir, me, _local.process_start(me))
    before = (state_dir / "up.json").read_text()
    result = runner.invoke(app, ["up"])
    assert result.exit_code == 1
    assert "already up" in result.stderr
    assert "Traceback" not in result.output
    assert (state_dir / "up.json").read_text() == before
    assert not (state_dir / "ray.log").exists()  # nothing was started


def test_up_refuses_a_port_in_use(state_dir):
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        busy = listener.getsockname()[1]
        result = runner.invoke(app, ["up", "--http-port", str(busy)])
    assert result.exit_code == 1
    assert f"{busy} (--http-port)" in result.stderr
    assert not (state_dir / "up.json").exists()
    assert not (state_dir / "ray.log").exists()


def test_up_forgets_a_head_that_died_before_checking_its_ports(state_dir):
    _state(state_dir, *_exited_process())
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        busy = listener.getsockname()[1]
        result = runner.invoke(app, ["up", "--ray-port", str(busy)])
    assert result.exit_code == 1
    assert "already up" not in result.stderr
    assert f"{busy} (--ray-port)" in result.stderr
    assert not (state_dir / "up.json").exists()


def test_up_refuses_an_invalid_api_config(state_dir, tmp_path):
    config = tmp_path / "api.yaml"
    config.write_text("api_keys:\n  - name: k\n    hash: plaintext-key\n    tenant: t\n")
    result = runner.invoke(app, ["up", "--api-config", str(config)])
    assert result.exit_code == 2
    assert "api_keys.0.hash" in result.stderr
    assert not (state_dir / "ray.log").exists()


def test_a_troupe_error_is_one_line_and_exit_1(state_dir):
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    result = runner.invoke(app, ["jobs", "--address", f"127.0.0.1:{port}"])
    assert result.exit_code == 1
    assert result.stderr.splitlines() == [f"error: no Ray answers at 127.0.0.1:{port}"]
    assert result.stdout == ""


def test_commands_that_need_a_ray_say_how_to_get_one(state_dir):
    for command in ("jobs", "agents", "serve", "checkpoints job-1", "resume job-1", "fork job-1 0"):
        result = runner.invoke(app, command.split())
        assert result.exit_code == 1, command
        assert "troupe up" in result.stderr
        assert "Traceback" not in result.output


def test_errors_are_red(monkeypatch):
    out = io.StringIO()
    monkeypatch.setattr(
        _show, "ERR", Console(file=out, force_terminal=True, color_system="standard")
    )
    _show.error(str(ConfigError("bad thing")))
    assert out.getvalue() == "\x1b[1;31merror: bad thing\x1b[0m\n"


def _event(seq, kind, subtask=None, at=100.0, **data):
    return JobEvent(job_id="job-1", seq=seq, at=at, type=kind, subtask_id=subtask, data=data)


def _rendered(board, now):
    console = Console(file=io.StringIO(), width=120, color_system=None)
    console.print(board.render(now))
    return console.file.getvalue()


def test_job_board_follows_subtasks_through_their_events():
    board = _show.JobBoard("job-1", "team research")
    plan = [{"id": "s1", "role": "researcher"}, {"id": "s2", "role": "analyst"}]
    board.apply(_event(1, "job_submitted"))
    board.apply(_event(2, "plan_ready", subtasks=plan))
    board.apply(_event(3, "subtask_started", "s1", at=100.0, role="researcher", attempt=1))
    view = _rendered(board, now=102.0)
    assert "job job-1 · team research · running" in view
    rows = {line.split("│")[1].strip(): line for line in view.splitlines() if "│" in line}
    assert "running" in rows["s1"]
    assert "2.0" in rows["s1"]
    assert "pending" in rows["s2"]

    board.apply(_event(4, "subtask_finished", "s1", at=103.5, status="succeeded", agent="ada"))
    board.apply(_event(5, "subtask_started", "s2", at=101.0, role="analyst", attempt=2))
    board.apply(_event(6, "subtask_finished", "s2", at=104.0, status="failed", agent="alan"))
    board.apply(_event(7, "job_aggregating"))
    assert "aggregating" in _rendered(board, now=200.0)
    board.apply(_event(8, "job_failed", error="boom"))
    view = _rendered(board, now=200.0)
    rows = {line.split("│")[1].strip(): line for line in view.splitlines() if "│" in line}
    assert "team research · failed" in view
    assert "ada" in rows["s1"]
    assert "succeeded" in rows["s1"]
    assert "3.5" in rows["s1"]  # finished, not counted to "now"
    assert "alan" in rows["s2"]
    assert "failed (attempt 2)" in rows["s2"]
    assert "3.0" in rows["s2"]


def test_state_round_trips_and_a_reused_pid_is_not_the_head(tmp_path):
    me = os.getpid()
    state = _state(tmp_path, me, _local.process_start(me))
    assert _local.read_state(tmp_path) == state
    assert _local.is_running(me, state.pid_start)
    assert not _local.is_running(me, state.pid_start + 1)
    _local.remove_state(tmp_path)
    assert _local.read_state(tmp_path) is None


def test_stop_signals_nothing_when_the_pid_was_reused(tmp_path):
    me = os.getpid()
    state = _state(tmp_path, me, _local.process_start(me) + 1)  # another process, same PID
    report = _local.stop_head(state, grace=0.1)
    assert not report.was_running
    assert report.killed == ()


LEADER = """
import subprocess, sys, time
# like Ray's processes: in the leader's session, surviving the leader's SIGTERM
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
print(child.pid, flush=True)
time.sleep(60)
"""


def test_stop_kills_what_outlives_sigterm_in_the_session_and_nothing_else(tmp_path):
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    leader = subprocess.Popen(
        [sys.executable, "-c", LEADER], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        orphan = int(leader.stdout.readline())
        state = _state(tmp_path, leader.pid, _local.process_start(leader.pid))
        assert sorted(_local.session_members(leader.pid)) == sorted([leader.pid, orphan])

        report = _local.stop_head(state, grace=0.5)

        assert report.was_running
        assert report.killed == (orphan,)  # the leader died of SIGTERM, its child did not
        assert report.left == ()
        assert _local.session_members(leader.pid) == []
        assert leader.wait(timeout=10) == -15
        assert bystander.poll() is None
    finally:
        for p in (leader, bystander):
            p.kill()
            p.wait(timeout=10)


def test_default_temp_dir_is_short_and_per_state_dir(tmp_path):
    a = _local.default_temp_dir(tmp_path / "a" / ("x" * 80))
    b = _local.default_temp_dir(tmp_path / "b")
    assert a != b
    assert len(str(a)) < 40
    # Ray's deepest socket path under it must fit in a Unix socket address (107 bytes)
    assert len(f"{a}/session_2026-11-29_15-02-44_600537_16491/sockets/plasma_store") <= 107


def test_up_refuses_a_bad_state_url_or_config_file_before_starting_anything(tmp_path):
    state = tmp_path / "state"
    result = runner.invoke(app, ["up", "--state-dir", str(state), "--state-url", "sqlite:///x"])
    assert result.exit_code == 1
    assert "--state-url: 'sqlite:///x' is not a PostgreSQL URL" in result.stderr
    bad = tmp_path / "troupe.yaml"
    bad.write_text("tools: {sandboxes: 0}\n")
    result = runner.invoke(app, ["up", "--state-dir", str(state), "--config", str(bad)])
    assert result.exit_code == 1
    assert "tools.sandboxes" in result.stderr
    assert not state.exists()  # no Ray started, nothing written
    assert "Traceback" not in result.output


def test_config_check_says_what_a_troupe_yaml_configures_without_its_password(tmp_path):
    path = tmp_path / "troupe.yaml"
    path.write_text(
        "state: {url: 'postgresql://ops:s3cret-pw@db:5432/rt'}\nmemory: {server: 'db:8001'}\n"
    )
    result = runner.invoke(app, ["config", "check", str(path)])
    assert result.exit_code == 0, result.output
    assert "state: postgresql://ops:***@db:5432/rt" in result.stdout
    assert "memory: db:8001" in result.stdout
    assert "s3cret" not in result.output


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["resume", "job-1", "--value", "{nope"], "error: --value is not JSON: "),
        (["resume", "job-1", "--state", "n=1"], "error: --state is not JSON: "),
        (["resume", "job-1", "--state", "[1, 2]"], "error: --state must be a JSON object"),
        (["fork", "job-1", "2", "--state", "{'n': 1}"], "error: --state is not JSON: "),
        (["fork", "job-1", "2", "--state", "3"], "error: --state must be a JSON object"),
    ],
)
def test_graph_commands_refuse_bad_json_before_any_ray(state_dir, args, said):
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith(said)
    assert "troupe up" not in result.stderr  # refused before connecting
    assert "Traceback" not in result.output


def test_fork_refuses_a_negative_step():
    result = runner.invoke(app, ["fork", "job-1", "-1"])
    assert result.exit_code == 2
    assert "Traceback" not in result.output


def test_the_checkpoints_table_shows_namespace_step_next_runs_and_interrupt():
    paused = GraphInterrupt(id="/2/review/before", node="review", when="before")
    points = [
        GraphCheckpoint(job_id="job-1", step=0, at=1.0, state={}, next=(GraphTask(node="plan"),)),
        GraphCheckpoint(job_id="job-1", step=2, at=2.0, state={}, interrupt=paused,
                        next=(GraphTask(node="review"),)),
        GraphCheckpoint(job_id="job-1", namespace="research", step=1, at=3.0, state={},
                        next=(GraphTask(node="dig", item="a", index=0),
                              GraphTask(node="dig", item="b", index=1))),
        GraphCheckpoint(job_id="job-1", step=3, at=4.0, state={}, next=()),
    ]  # fmt: skip
    console = Console(file=io.StringIO(), width=120, color_system=None)
    console.print(_graphs.checkpoints_table(points))
    view = console.file.getvalue()
    assert "4 checkpoint(s)" in view
    rows = [line.split("│")[1:-1] for line in view.splitlines() if "│" in line]
    cells = [[cell.strip() for cell in row] for row in rows]  # the header is drawn with ┃
    assert [row[:2] for row in cells] == [["(graph)", "0"], ["(graph)", "2"], ["research", "1"],
                                          ["(graph)", "3"]]  # fmt: skip
    assert [row[3:] for row in cells] == [
        ["plan", ""], ["review", "/2/review/before"], ["dig[0], dig[1]", ""], ["(end)", ""],
    ]  # fmt: skip


def test_job_board_shows_a_graph_waiting_for_input():
    board = _show.JobBoard("job-1", "team graph")
    board.apply(_event(1, "job_submitted"))
    board.apply(_event(2, "graph_interrupted", interrupt={"id": "/1/review/before"}))
    assert "team graph · awaiting input" in _rendered(board, now=101.0)
    board.apply(_event(3, "graph_resumed", interrupt="/1/review/before"))
    assert "team graph · running" in _rendered(board, now=102.0)


class _FakeRuntime:
    """The driver (or a tenant's view of it) as the graph commands use it; ``job-1`` waits at
    two interrupts."""

    def __init__(self, calls, tenant=None):
        self.calls, self.tenant = calls, tenant

    def checkpoints(self, job_id):
        return [GraphCheckpoint(job_id=job_id, step=0, at=1.0, state={"n": 1}, next=())]

    def resume(self, job_id, value=None, *, state=None, interrupt=None):
        self.calls.append(("resume", job_id, self.tenant, value, state, interrupt))
        waiting = ["/1/a/before", "/1/b/before"]
        if interrupt not in waiting:
            raise Conflict(f"job {job_id} waits at 2 interrupts: name one", waiting=waiting)
        answered = GraphInterrupt(id=interrupt, node=interrupt.split("/")[2], when="before")
        return Resumed(job_id=job_id, interrupt=answered)

    def fork(self, job_id, step, *, state=None):
        self.calls.append(("fork", job_id, self.tenant, step, state))
        return Forked(job_id="job-2", forked_from=job_id, step=step)

    def as_tenant(self, tenant):
        return _FakeRuntime(self.calls, tenant)


@pytest.fixture
def graph_calls(monkeypatch):
    calls = []
    monkeypatch.setattr(_connect, "connect_from", lambda *_a, **_k: _FakeRuntime(calls))
    monkeypatch.setattr(_connect, "close", lambda _rt: calls.append(("closed",)))
    return calls


def test_graph_commands_call_the_job_as_asked_and_say_what_happened(graph_calls):
    result = runner.invoke(app, ["checkpoints", "job-1", "--json"])
    assert result.exit_code == 0, result.output
    (point,) = json.loads(result.stdout)
    assert point["state"] == {"n": 1}

    args = ["resume", "job-1", "--value", '{"ok": true}', "--state", '{"n": 2}',
            "--interrupt", "/1/b/before", "--tenant", "acme"]  # fmt: skip
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "job job-1 resumed at /1/b/before (before node b)" in result.stdout

    result = runner.invoke(app, ["fork", "job-1", "0", "--state", '{"n": 0}'])
    assert result.exit_code == 0, result.output
    assert result.stdout == "job-2\n"  # the id alone, for scripts
    assert [c for c in graph_calls if c[0] != "closed"] == [
        ("resume", "job-1", "acme", {"ok": True}, {"n": 2}, "/1/b/before"),
        ("fork", "job-1", None, 0, {"n": 0}),
    ]
    assert graph_calls.count(("closed",)) == 3


def test_resume_without_naming_one_of_several_interrupts_lists_them(graph_calls):
    result = runner.invoke(app, ["resume", "job-1"])
    assert result.exit_code == 1
    assert result.stderr.strip() == (
        "error: job job-1 waits at 2 interrupts: name one (waiting: /1/a/before, /1/b/before)"
    )
    assert graph_calls[-1] == ("closed",)


def test_troupe_agents_shows_an_inline_teams_agents_as_written_and_whose_they_are():
    from raytroupe.protocols import scoped_name, tenant_scope  # noqa: PLC0415

    scope = tenant_scope("default")
    running = {
        scoped_name("default", "ada"): (f"{scope}.research.researcher", 1),
        "stray": ("elsewhere.x", 0),  # not in a tenant's scope: shown as it is
    }
    console = Console(file=io.StringIO(), width=200, color_system=None)
    console.print(_show.agents_table([], running))
    rows = [
        [cell.strip() for cell in line.split("│")[1:-1]]
        for line in console.file.getvalue().splitlines()
        if line.startswith("│")
    ]
    assert rows == [
        ["ada", f"research ({scope})", "researcher", "", "", "1"],
        ["stray", "(not registered)", "elsewhere.x", "", "", "0"],
    ]


def test_every_command_of_every_group_reports_an_error_as_one_line():
    """A raytroupe error is one red line, in every group (a group left out showed tracebacks)."""
    one_line = _show.reported(lambda: None).__code__
    commands = [
        (name, info.name, info.callback)
        for group, name, _ in _GROUPS
        for info in group.registered_commands
    ]
    assert len(commands) > 40
    unreported = [(group, command) for group, command, callback in commands
                  if getattr(callback, "__code__", None) is not one_line]  # fmt: skip
    assert unreported == []
    top = [c.callback for c in app.registered_commands if c.callback is not None]
    assert all(c.__code__ is one_line for c in top)
