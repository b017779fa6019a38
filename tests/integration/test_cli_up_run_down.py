"""The installed `troupe` script against a Ray of its own, next to the suite's session Ray."""

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from raytroupe.deployments.keys import hash_key
from raytroupe.protocols import tenant_scope
from tests.support.sessions import free_ports, live_in_session

pytestmark = pytest.mark.system  # system tier: `troupe up` Rays of its own

TROUPE = Path(sys.executable).parent / "troupe"
ROOT = Path(__file__).resolve().parents[2]
TEAM = ROOT / "examples" / "teams" / "research.yaml"
TASK = """\
Actors in Ray are stateful workers, each living in its own process.
Ray Serve exposes Python code over HTTP with autoscaling replicas.
Questions:
1. What are Ray actors?
2. What does Ray Serve do?
3. How many requests are 17 * 23 + 4 requests?
"""


def _troupe(*args, env, timeout):
    return subprocess.run(
        [str(TROUPE), *args],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def _env(state_dir):
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    env["TROUPE_STATE_DIR"] = str(state_dir)
    env["COLUMNS"] = "200"
    return env


@pytest.fixture
def troupe_up(tmp_path):
    """`troupe up` on free ports; whatever `down` leaves behind is killed by PID afterwards."""
    state_dir = tmp_path / "state"
    env = _env(state_dir)
    ports = dict(zip(("http", "dashboard", "ray"), free_ports(3), strict=True))
    up = _troupe(
        "up", "--http-port", str(ports["http"]), "--dashboard-port", str(ports["dashboard"]),
        "--ray-port", str(ports["ray"]), "--num-cpus", "2", "--state-dir", str(state_dir),
        env=env, timeout=300,
    )  # fmt: skip
    state_file = state_dir / "up.json"
    state = json.loads(state_file.read_text()) if state_file.exists() else None
    yield up, state, state_dir, ports
    if state is not None:
        for pid in live_in_session(state["pid"]):
            os.kill(pid, signal.SIGKILL)


def _check_up(up, state, state_dir, ports):
    assert up.returncode == 0, up.stdout + up.stderr
    assert state is not None
    assert state["address"] == f"127.0.0.1:{ports['ray']}"
    assert state["http_url"] == f"http://127.0.0.1:{ports['http']}"
    assert state["dashboard_url"] == f"http://127.0.0.1:{ports['dashboard']}"
    assert state["address"] in up.stdout
    assert "its login token: `ray get-auth-token`" in up.stdout  # the dashboard asks for it
    key = next(w for w in up.stdout.split() if w.startswith("rt-"))
    assert f"Authorization: Bearer {key}" in up.stdout
    recorded = (state_dir / "up.json").read_text()
    assert key not in recorded
    assert hash_key(key) not in recorded


def _check_run(state, env):
    run = _troupe("run", str(TEAM), TASK, "--address", state["address"], env=env, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "17 * 23 + 4 = 395" in run.stdout
    assert "Actors in Ray are stateful workers, each living in its own process." in run.stdout
    rows = [line for line in run.stdout.splitlines() if line.startswith("│ s")]
    assert len(rows) == 3
    assert all("succeeded" in row for row in rows)
    assert any("alan" in row and "analyst" in row for row in rows)
    return run.stdout.split("job ", 1)[1].split()[0]


def _check_skills(env, tmp_path):
    skills = ROOT / "examples" / "skills"
    applied = _troupe("skills", "apply", str(skills / "summarize.md"),
                      str(skills / "sentiment.yaml"), env=env, timeout=120)  # fmt: skip
    assert applied.returncode == 0, applied.stdout + applied.stderr
    assert "summarize 1: registered" in applied.stdout
    assert "sentiment 1: registered" in applied.stdout
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: bad\nversion: '1'\ndescription: d\nexecution_mode: sideways\n")
    refused = _troupe("skills", "apply", str(bad), env=env, timeout=120)
    assert refused.returncode == 1
    assert f"{bad}:4: execution_mode: 'sideways' is not" in refused.stderr
    listed = _troupe("skills", "list", env=env, timeout=120)
    assert listed.returncode == 0, listed.stdout + listed.stderr
    assert "summarize" in listed.stdout
    assert "sentiment" in listed.stdout
    review = "A negative review: the app crashes on start."
    asked = _troupe("ask", review, "--skill", "sentiment", "--json", env=env, timeout=300)
    assert asked.returncode == 0, asked.stdout + asked.stderr
    output = json.loads(asked.stdout)["output"]
    assert (output["skill"], output["data"]["sentiment"]) == ("sentiment", "negative")
    routed = _troupe("ask", "Please summarize: Ray is fast. It scales Python.", "--json",
                     env=env, timeout=300)  # fmt: skip
    assert routed.returncode == 0, routed.stdout + routed.stderr
    route = json.loads(routed.stdout)["route"]
    assert (route["target"], route["kind"], route["method"]) == ("summarize", "skill", "keyword")
    suite = ROOT / "examples" / "evals" / "sentiment.jsonl"
    scored = _troupe("eval", str(suite), "--skill", "sentiment", "--min-score", "0.9",
                     env=env, timeout=300)  # fmt: skip
    assert scored.returncode == 1, scored.stdout + scored.stderr  # 5 of 6: below 0.9
    assert "score 0.833" in scored.stdout
    assert "money-back" in scored.stdout
    assert scored.stderr.strip() == "error: score 0.833 is below --min-score 0.9"
    listed = _troupe("evals", "list", env=env, timeout=120)
    assert "sentiment" in listed.stdout
    back = _troupe("skills", "rollback", "summarize", env=env, timeout=120)
    assert back.returncode == 1
    assert back.stderr.strip() == "error: skill 'summarize' has no earlier version to roll back to"


def _check_experiment(state, env):
    """A driver script joins `up`'s Ray by ``RAY_ADDRESS`` alone (nothing in its environment
    says to stay on loopback: the suite's own Ray set that here) and runs the README's A/B
    experiment; the CLI shows the decision."""
    driver_env = {k: v for k, v in env.items() if k != "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"}
    driver_env["RAY_ADDRESS"] = state["address"]
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "ab_experiment.py"), "--name", "notes-ab-up"],
        env=driver_env, cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    assert "experiment notes-ab-up: 25 jobs per arm" in done.stdout
    assert "decision: 2 beats 1 on success" in done.stdout
    assert "current version of notes-code: 1" in done.stdout  # not promoted: nobody asked
    shown = _troupe("experiments", "show", "notes-ab-up", env=env, timeout=120)
    assert shown.returncode == 0, shown.stdout + shown.stderr
    assert "notes-ab-up · skill notes-code · decided · metric success" in shown.stdout
    assert "decision: 2 beats 1 on success" in shown.stdout


@pytest.mark.timeout(900)
def test_up_run_jobs_agents_http_down(troupe_up, rt, tmp_path):
    up, state, state_dir, ports = troupe_up
    _check_up(up, state, state_dir, ports)
    env = _env(state_dir)
    head = state["pid"]
    session = live_in_session(head)
    assert head in session
    assert len(session) > 5  # GCS, raylet, dashboard, the system actors, Serve ...

    again = _troupe("up", env=env, timeout=120)  # the state dir from the environment
    assert again.returncode == 1
    assert "already up" in again.stderr

    job_id = _check_run(state, env)
    jobs = _troupe("jobs", env=env, timeout=120)
    assert jobs.returncode == 0, jobs.stdout + jobs.stderr
    (line,) = [line for line in jobs.stdout.splitlines() if job_id in line]
    assert "succeeded" in line

    agents = _troupe("agents", env=env, timeout=120)
    assert agents.returncode == 0, agents.stdout + agents.stderr
    listed = {line.split("│")[1].strip() for line in agents.stdout.splitlines() if "│" in line}
    # the run's inline team: its agents as it wrote them, its team in its tenant's scope
    assert {"ada", "grace", "alan"} <= listed
    assert f"research ({tenant_scope('default')})" in agents.stdout

    assert httpx.get(f"{state['http_url']}/healthz", timeout=30).status_code == 200

    _check_skills(env, tmp_path)
    _check_experiment(state, env)

    failed = _troupe("run", "nosuchteam", "a task", env=env, timeout=120)
    assert failed.returncode == 1
    assert failed.stderr.strip() == "error: no team is registered as 'nosuchteam'"

    down = _troupe("down", "--state-dir", str(state_dir), env=env, timeout=120)
    assert down.returncode == 0, down.stdout + down.stderr
    assert "stopped Ray" in down.stdout
    assert live_in_session(head) == set()  # every PID of the session: exited (or a zombie)
    assert not (state_dir / "up.json").exists()
    assert not Path(state["temp_dir"]).exists()
    assert rt.router_stats().registered  # the suite's own Ray was not touched


def test_run_with_a_broken_team_file_exits_2_with_the_problem(tmp_path):
    bad = tmp_path / "team.yaml"
    bad.write_text("name: broken\nagents:\n  - name: x\n    role: writer\n    temperature: hot\n")
    result = _troupe("run", str(bad), "a task", env=_env(tmp_path / "state"), timeout=120)
    assert result.returncode == 2
    assert result.stderr.startswith(f"error: {bad}: invalid team: agents.0.temperature")
    assert "Traceback" not in result.stderr
    assert result.stdout == ""
