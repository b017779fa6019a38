"""The `troupe` command against a real Ray Serve on 127.0.0.1, over HTTP with an API key.

Each command runs as its own process (``python -m raytroupe.runtime.cli``), as a person or a
script would run it; the key is passed in ``$TROUPE_API_KEY`` (or a profile), never checked
by anything but the deployment.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest
import yaml

from raytroupe import runtime
from raytroupe.protocols import JobEvent, JobResult, SkillSpec
from raytroupe.protocols.evals import EvalRun
from raytroupe.runtime.http_client import Client
from tests.support.http_api import ADMIN_KEY, OTHER_KEY, USER_KEY, register, wire_team
from tests.support.wire_server import Default, Reply, WireServer

# system tier: the CLI's commands, each a process of its own, against Serve
pytestmark = pytest.mark.system

WRONG_KEY = "rt-not-a-key-of-this-deployment"
TROUPE = [sys.executable, "-m", "raytroupe.runtime.cli"]
AT_A_TERMINAL = [
    sys.executable,
    "-c",
    "import runpy, signal; signal.signal(signal.SIGINT, signal.default_int_handler); "
    "runpy.run_module('raytroupe.runtime.cli', run_name='__main__', alter_sys=True)",
]
"""`troupe` as a terminal's foreground job starts it: Ctrl-C interrupts it. A process started
in the background by a shell without job control (``cmd &`` in a script, as CI runners may
start the suite) inherits SIGINT ignored, and Python then installs no handler for it."""


@pytest.fixture(scope="module")
def wire():
    with WireServer() as server:
        yield server


@pytest.fixture
def environment(api, tmp_path):
    """The environment of a `troupe` process that calls the deployment with ``key``."""

    def env(key=USER_KEY, **more):
        found = {k: v for k, v in os.environ.items() if not k.startswith("TROUPE_")}
        found.update(TROUPE_URL=api.url, TROUPE_CONFIG_DIR=str(tmp_path / "config"))
        found.update(COLUMNS="250", TROUPE_API_KEY=key)  # tables as wide as their ids
        found.update(more)
        return {k: v for k, v in found.items() if v is not None}

    return env


@pytest.fixture
def troupe(environment):
    """Run `troupe ARGS...` against the deployment with ``key``; the finished process."""

    def run(*args, key=USER_KEY, timeout=180, env=None):
        return subprocess.run(
            [*TROUPE, *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=environment(key, **(env or {})),
            check=False,
        )

    return run


def _one_agent(name, *, latency_s=0.0):
    models = {f"{name}-m": runtime.OfflineModel(latency_s=latency_s)} if latency_s else {}
    agents = [runtime.AgentSpec(name=f"{name}-a", role="worker",
                                model=f"{name}-m" if latency_s else "default")]  # fmt: skip
    return runtime.Team(name=name, planner_model="offline", agents=agents, models=models)


def _ok(done):
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def _one_error_line(done, status=1):
    assert done.returncode == status, done.stdout + done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("error: "), line
    assert "Traceback" not in done.stderr
    return line


def _held(api, job_id, key=USER_KEY):
    """Wait (bounded: the stream ends at the job's end) until the job holds a tool call."""
    with Client(api.url, key) as client:
        for event in client.events(job_id, timeout=120):
            if event.type == "approval_requested":
                return
    raise AssertionError(f"job {job_id} ended without holding a call")


def test_run_a_job_then_get_its_result_and_its_usage(api, troupe):
    team = register(api, _one_agent("cli-run"))

    shown = _ok(troupe("run", team, "List: - red. - blue."))
    ran = JobResult.model_validate_json(_ok(troupe("run", team, "List: - one.", "--json")))
    again = JobResult.model_validate_json(_ok(troupe("result", ran.job_id, "--json")))
    human = _ok(troupe("result", ran.job_id))
    listed = _ok(troupe("jobs", "--search", ran.job_id))
    usage = _ok(troupe("usage", "--job", ran.job_id))
    daily = _ok(troupe("usage", "--daily"))
    stolen = troupe("result", ran.job_id, key=OTHER_KEY)

    assert "answer" in shown
    assert "succeeded in" in shown
    assert ran.status == "succeeded"
    assert ran.answer
    assert again == ran
    assert ran.answer.splitlines()[0] in human
    assert "succeeded in" in human
    assert ran.job_id in listed
    assert "1 job(s)" in listed
    assert ran.job_id in usage
    assert re.search(rf"total\s.*\s{ran.usage.calls}\s", usage)
    assert time.strftime("%Y-%m-%d", time.gmtime()) in daily
    assert "acme" in daily
    assert ran.job_id in _one_error_line(stolen)  # another tenant's job: not found


def test_a_detached_job_is_followed_event_by_event_to_its_end(api, troupe):
    team = register(api, _one_agent("cli-events"))

    job_id = _ok(troupe("run", team, "Steps: 1) a 2) b", "--detach")).strip()
    lines = _ok(troupe("events", job_id, "--follow", "--json")).splitlines()
    followed = [JobEvent.model_validate_json(line) for line in lines]
    so_far = _ok(troupe("events", job_id))  # the job has ended: every event, then stop
    no_result = troupe("result", "job-that-is-not-there", "--no-wait")

    assert re.fullmatch(r"[\w-]+", job_id)
    assert [e.seq for e in followed] == list(range(1, len(followed) + 1))
    assert followed[0].type == "job_submitted"
    assert followed[-1].type == "job_succeeded"
    assert all(e.job_id == job_id for e in followed)
    rows = so_far.splitlines()
    assert len(rows) == len(followed)
    assert rows[-1].split()[2] == "job_succeeded"
    assert "job-that-is-not-there" in _one_error_line(no_result)


def test_a_running_job_is_cancelled_and_says_so_after(api, troupe):
    team = register(api, _one_agent("cli-cancel", latency_s=30))

    job_id = _ok(troupe("run", team, "Slowly: 1) one 2) two", "--detach")).strip()
    waiting = troupe("result", job_id, "--no-wait")
    cancelled = _ok(troupe("cancel", job_id))
    again = troupe("cancel", job_id)
    outcome = troupe("result", job_id)

    assert "has no result yet" in _one_error_line(waiting)
    assert cancelled.strip() == f"job {job_id} cancelled (cancelled)"
    assert "already finished" in _one_error_line(again)
    assert outcome.returncode == 1
    assert f"job {job_id} was cancelled" in outcome.stderr


def _interrupted(process):
    """Ctrl-C the process, as a terminal would; its exit status and what it said."""
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=60)
    return process.returncode, out, err


def test_ctrl_c_stops_following_and_cancels_a_job_run_in_the_foreground(api, environment, troupe):
    team = register(api, _one_agent("cli-ctrl-c", latency_s=600))  # cancelled long before
    job_id = _ok(troupe("run", team, "Slowly: 1) one 2) two", "--detach")).strip()
    follower = subprocess.Popen(
        [*AT_A_TERMINAL, "events", job_id, "--follow"],
        env=environment(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    first = follower.stdout.readline()  # the job's first event: it is following
    status, _, err = _interrupted(follower)
    still = _ok(troupe("jobs", "--status", "live"))
    _ok(troupe("cancel", job_id))

    task = f"Slowly, in the foreground {os.getpid()}: 1) one 2) two"
    runner = subprocess.Popen(
        [*AT_A_TERMINAL, "run", team, task],
        env=environment(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    with Client(api.url, USER_KEY) as client:
        for _ in range(600):  # bounded: the job is submitted within seconds
            started = client.jobs(q=task)
            if started:
                break
            time.sleep(0.1)
        (line,) = started
        for event in client.events(line.id, timeout=60):
            if event.type == "subtask_started":
                break
        run_status, _, run_err = _interrupted(runner)
        after = client.job(line.id)

    assert first.split()[:3] == ["1", first.split()[1], "job_submitted"]
    assert status == 130
    assert err.strip() == f"stopped following job {job_id} (it goes on)"
    assert job_id in still  # following stopped; the job did not
    assert run_status == 130
    assert run_err.strip().splitlines()[-1] == f"error: interrupted: job {line.id} cancelled"
    assert "Traceback" not in run_err
    assert after.status == "cancelled"


def test_held_tool_calls_are_listed_approved_and_rejected(api, troupe, wire):
    team = register(api, wire_team(wire, "cli-held", ["echo"]))
    decided = {}
    for verdict in ("approve", "reject"):
        wire.reset()
        wire.script(Reply.tool("echo", {"text": f"ship it ({verdict})"}), Default())
        job_id = _ok(troupe("run", team, "Echo the release.", "--detach")).strip()
        _held(api, job_id)
        listed = _ok(troupe("approvals"))
        (row,) = [line for line in listed.splitlines() if job_id in line]
        approval_id = re.search(r"│\s*(\S+)\s*│\s*cli-held-agent", row).group(1)
        assert approval_id in _ok(troupe("approvals", job_id))
        assert f'"ship it ({verdict})"' in row
        assert approval_id not in _ok(troupe("approvals", key=OTHER_KEY))  # another tenant's
        args = ["--reason", "checked"] if verdict == "approve" else ["--reason", "not today"]
        said = _ok(troupe(verdict, job_id, approval_id, *args))
        twice = troupe(verdict, job_id, approval_id, *args)
        result = JobResult.model_validate_json(_ok(troupe("result", job_id, "--json")))
        seen = wire.requests[1].body["messages"][-1]["content"]
        decided[verdict] = (said, f"job {job_id}: call {approval_id}", twice, result, seen)

    said, call, twice, result, seen = decided["approve"]
    assert said.strip() == f"{call} approved"
    assert "has no tool call waiting" in _one_error_line(twice)
    assert result.status == "succeeded"
    assert seen == "ship it (approve)"  # the tool ran: its output went back to the model
    said, call, twice, result, seen = decided["reject"]
    assert said.strip() == f"{call} rejected"
    assert "has no tool call waiting" in _one_error_line(twice)
    assert "not today" in seen  # the agent was told why
    assert "ship it" not in seen


def test_teams_are_applied_listed_shown_and_deleted_by_an_admin_only(api, troupe, tmp_path):
    spec = _one_agent("cli-teams").spec().model_dump(mode="json", exclude_defaults=True)
    team_file = tmp_path / "cli-teams.yaml"
    team_file.write_text(yaml.safe_dump(spec))

    refused = troupe("teams", "apply", str(team_file))  # a tenant's key
    applied = _ok(troupe("teams", "apply", str(team_file), key=ADMIN_KEY))
    listed = _ok(troupe("teams", "list", key=ADMIN_KEY))
    shown = yaml.safe_load(_ok(troupe("teams", "show", "cli-teams", key=ADMIN_KEY)))
    ran = JobResult.model_validate_json(_ok(troupe("run", "cli-teams", "List: - x.", "--json")))
    deleted = _ok(troupe("teams", "delete", "cli-teams", key=ADMIN_KEY))
    gone = troupe("teams", "delete", "cli-teams", key=ADMIN_KEY)
    after = _ok(troupe("teams", "list", key=ADMIN_KEY))

    assert "admin" in _one_error_line(refused).lower()
    assert applied.strip() == "team cli-teams: applied"
    assert "cli-teams-a (worker)" in listed
    assert shown["name"] == "cli-teams"
    assert shown["agents"][0]["name"] == "cli-teams-a"
    assert ran.status == "succeeded"
    assert deleted.strip() == "team cli-teams: deleted (1 agent(s) stopped)"
    assert "cli-teams" in _one_error_line(gone)
    assert "cli-teams-a" not in after


def test_dead_letters_are_shown_to_an_admin_and_refused_to_a_tenant(troupe):
    shown = _ok(troupe("dead-letters", "--limit", "5", key=ADMIN_KEY))
    refused = troupe("dead-letters")

    assert re.search(r"\d+ dead letter\(s\)", shown)
    line = _one_error_line(refused)
    assert "admin" in line.lower()


def test_a_wrong_or_missing_key_is_one_clear_line_and_the_key_is_never_printed(troupe):
    wrong = troupe("jobs", key=WRONG_KEY)
    on_line = troupe("--key", WRONG_KEY, "agents", key=None)
    missing = troupe("jobs", key=None)

    for done in (wrong, on_line, missing):
        line = _one_error_line(done)
        assert "key" in line.lower(), line
        assert WRONG_KEY not in done.stdout + done.stderr
    assert done.stdout == ""


def test_a_profile_with_a_private_key_file_reaches_the_deployment(api, troupe, tmp_path):
    folder = tmp_path / "config"
    folder.mkdir()
    key_file = folder / "acme.key"
    key_file.write_text(ADMIN_KEY + "\n")
    key_file.chmod(0o600)
    (folder / "profiles.toml").write_text(
        f'[profiles.acme]\nurl = "{api.url}"\nkey_file = "acme.key"\n'
    )
    env = {"TROUPE_URL": None}  # the profile names the deployment

    agents = _ok(troupe("--profile", "acme", "agents", key=None, env=env))
    key_file.chmod(0o644)
    refused = troupe("--profile", "acme", "agents", key=None, env=env)

    assert "agent(s)" in agents
    assert "chmod 600" in _one_error_line(refused, status=2)
    assert ADMIN_KEY not in refused.stdout + refused.stderr


def test_skills_knowledge_and_sessions_work_over_http(api, troupe, tmp_path):
    notes = tmp_path / "notes.md"
    notes.write_text("# Launch\n\nThe launch code word is HELIOTROPE.\n")
    kb = f"cli-kb-{os.getpid()}"

    added = _ok(troupe("kb", "add", kb, str(notes)))
    bases = _ok(troupe("kb", "list"))
    documents = _ok(troupe("kb", "list", kb))
    found = _ok(troupe("kb", "search", kb, "code word", "--k", "1"))
    removed = _ok(troupe("kb", "rm", kb))
    missing = troupe("kb", "search", kb, "code word")
    skills = _ok(troupe("skills", "list"))
    chat = f"cli-chat-{os.getpid()}"
    made = _ok(troupe("sessions", "new", chat, "--title", "tea"))
    sessions = _ok(troupe("sessions", "list"))
    shown = _ok(troupe("sessions", "show", chat))
    deleted = _ok(troupe("sessions", "delete", chat))
    gone = troupe("sessions", "show", chat)
    checkpoints = troupe("checkpoints", "no-such-job")

    assert str(notes) in added
    assert "added" in added
    assert kb in bases
    assert str(notes) in documents
    assert "HELIOTROPE" in found
    assert removed.strip() == f"removed knowledge base {kb}"
    assert missing.returncode == 1
    assert "skill" in skills
    assert made.strip() == chat
    assert chat in sessions
    assert "tea" in sessions
    assert "turn" in shown
    assert deleted.strip() == f"deleted session {chat}"
    assert chat in _one_error_line(gone)
    assert "no-such-job" in _one_error_line(checkpoints)


def test_an_unknown_job_is_one_line_for_every_job_command(troupe):
    for command in (["events", "job-nope", "--follow"], ["result", "job-nope"],
                    ["cancel", "job-nope"], ["approvals", "job-nope"],
                    ["approve", "job-nope", "a-1"], ["fork", "job-nope", "0"]):  # fmt: skip
        done = troupe(*command)
        assert "job-nope" in _one_error_line(done), command
        assert done.stdout == "", command


def test_an_eval_suite_runs_over_http_and_its_runs_are_listed(api, troupe, tmp_path):
    team = register(api, _one_agent("cli-evals"))
    suite = tmp_path / "cli-suite.yaml"
    expect = [{"kind": "contains", "values": ["item"]}]
    cases = [{"id": f"c{k}", "task": f"List: - item {k}.", "expect": expect} for k in (1, 2)]
    suite.write_text(yaml.safe_dump({"name": "cli-suite", "cases": cases}))

    run = EvalRun.model_validate_json(_ok(troupe("eval", str(suite), "--team", team, "--json")))
    listed = _ok(troupe("evals", "list"))
    shown = _ok(troupe("evals", "show", run.id))
    experiments = _ok(troupe("experiments", "list", key=ADMIN_KEY))
    refused = troupe("experiments", "list")

    assert (run.suite, run.status, run.total) == ("cli-suite", "finished", 2)
    assert sorted(c.case_id for c in run.cases) == ["c1", "c2"]
    assert run.id in listed
    assert "c1" in shown
    assert f"{run.id} · suite cli-suite" in shown
    assert "experiment" in experiments
    assert "admin" in _one_error_line(refused).lower()


def test_every_skill_command_runs_over_http_as_on_ray(rt, troupe, tmp_path):
    """promote and history had no HTTP route: the CLI refused them with --url."""
    for version, words in (("1", "Say one."), ("2", "Say two.")):
        rt.put_skill(SkillSpec.model_validate({
            "name": "cli-sk", "version": version, "description": "CLI over HTTP.",
            "execution_mode": "direct", "prompt": {"instructions": words},
        }))  # fmt: skip

    refused = troupe("skills", "promote", "cli-sk", "1")  # a tenant's key
    back = _ok(troupe("skills", "rollback", "cli-sk", key=ADMIN_KEY))
    promoted = _ok(troupe("skills", "promote", "cli-sk", "2", key=ADMIN_KEY))
    shown = json.loads(_ok(troupe("skills", "show", "cli-sk", key=ADMIN_KEY)))
    history = _ok(troupe("skills", "history", key=ADMIN_KEY))  # every skill's
    missing = troupe("skills", "promote", "cli-sk", "9", key=ADMIN_KEY)
    lessons = _ok(troupe("skills", "lessons", "cli-sk", key=ADMIN_KEY))  # none learned yet
    forget = troupe("skills", "forget", "cli-sk", "0" * 32, key=ADMIN_KEY)
    deleted = _ok(troupe("skills", "delete", "cli-sk", key=ADMIN_KEY))

    assert "admin" in _one_error_line(refused).lower()
    assert back.strip() == "cli-sk: version 1 is current"
    assert promoted.strip() == "cli-sk: version 2 is current"
    assert (shown["version"], shown["prompt"]["instructions"]) == ("2", "Say two.")
    assert re.search(r"cli-sk\W+2\W+promoted\W+api:acme-admin", history), history
    assert "9" in _one_error_line(missing)
    assert "lesson" in lessons
    assert "has no lesson" in _one_error_line(forget)
    assert deleted.strip() == "cli-sk: deleted (2 versions)"


def test_policies_are_set_listed_read_and_dropped_over_http(rt, troupe, tmp_path):
    policy_file = tmp_path / "policy.yaml"
    policy_file.write_text("inline_teams: false\ntools: []\n")

    refused = troupe("policies", "set", "cli-pol", str(policy_file))  # a tenant's key
    put = _ok(troupe("policies", "set", "cli-pol", str(policy_file), key=ADMIN_KEY))
    listed = _ok(troupe("policies", "list", key=ADMIN_KEY))
    mine = yaml.safe_load(_ok(troupe("policies", "mine")))  # acme-user's own: the default
    in_driver = rt.as_tenant("cli-pol").policy()
    dropped = _ok(troupe("policies", "delete", "cli-pol", key=ADMIN_KEY))
    with pytest.warns(DeprecationWarning, match="as_tenant"):
        after = rt.tenant_policy("cli-pol")  # the name before 0.3, still answering

    assert "admin" in _one_error_line(refused).lower()
    assert put.strip() == "policy of cli-pol: set"
    assert "# cli-pol\ninline_teams: false\ntools: []\n" in listed
    assert isinstance(mine, dict)
    assert (in_driver.inline_teams, in_driver.tools) == (False, ())
    assert dropped.strip() == "policy of cli-pol: dropped (the default binds it)"
    assert after == rt.as_tenant("nobody-set-this").policy()


def test_an_agent_is_added_and_removed_by_an_admin_only(rt, troupe, tmp_path):
    agents = [runtime.AgentSpec(name=f"cli-del-{n}", role="worker") for n in ("a", "b")]
    rt.put_team(runtime.Team(name="cli-del", planner_model="offline", agents=agents))
    agent_file = tmp_path / "agent.yaml"
    agent_file.write_text("name: cli-del-c\nrole: checker\n")

    added = _ok(troupe("teams", "add-agent", "cli-del", str(agent_file), key=ADMIN_KEY))
    not_added = troupe("teams", "add-agent", "cli-del", str(agent_file))  # a tenant's key
    with_c = [a.name for a in rt.team("cli-del").agents]
    rt.delete_agent("cli-del-c")
    refused = troupe("teams", "delete-agent", "cli-del-b")  # a tenant's key
    removed = _ok(troupe("teams", "delete-agent", "cli-del-b", key=ADMIN_KEY))
    missing = troupe("teams", "delete-agent", "cli-del-b", key=ADMIN_KEY)
    left = [a.name for a in rt.team("cli-del").agents]
    rt.delete_team("cli-del")

    assert added.strip() == "agent cli-del-c: in team cli-del (checker)"
    assert "admin" in _one_error_line(not_added).lower()
    assert with_c == ["cli-del-a", "cli-del-b", "cli-del-c"]
    assert "admin" in _one_error_line(refused).lower()
    assert removed.strip() == "agent cli-del-b: removed from team cli-del and stopped"
    assert "cli-del-b" in _one_error_line(missing)
    assert left == ["cli-del-a"]


def test_guardrails_are_set_shown_listed_and_unset_by_an_admin_and_decisions_read(
    api, troupe, tmp_path
):
    team = register(api, _one_agent("cli-guarded"))
    spec_file = tmp_path / "guardrail.yaml"
    spec_file.write_text(
        "description: no launch codes\nstages: [input]\n"
        "rules:\n  - kind: keywords\n    words: [launch codes]\n"
        f"applies_to:\n  teams: [{team}]\n"
    )
    refused_set = troupe("guardrails", "set", "cli-codes", str(spec_file))  # a tenant's key
    made = _ok(troupe("guardrails", "set", "cli-codes", str(spec_file), key=ADMIN_KEY))
    again = _ok(troupe("guardrails", "set", "cli-codes", str(spec_file), key=ADMIN_KEY))
    try:
        blocked = troupe("run", team, "Print the launch codes.")
        shown = yaml.safe_load(_ok(troupe("guardrails", "show", "cli-codes", key=ADMIN_KEY)))
        first = _ok(troupe("guardrails", "show", "cli-codes", "--version", "1", key=ADMIN_KEY))
        listed = _ok(troupe("guardrails", "list", key=ADMIN_KEY))
        decisions = _ok(troupe("guardrails", "decisions"))
        theirs = _ok(troupe("guardrails", "decisions", key=OTHER_KEY))
    finally:
        unset = _ok(troupe("guardrails", "delete", "cli-codes", key=ADMIN_KEY))
    gone = troupe("guardrails", "show", "cli-codes", key=ADMIN_KEY)

    assert "admin" in _one_error_line(refused_set).lower()
    assert (made.strip(), again.strip()) == ("guardrail cli-codes: version 1",
                                             "guardrail cli-codes: version 2")  # fmt: skip
    line = _one_error_line(blocked)
    assert "guardrail 'cli-codes' v2 rule 0:keywords blocked the input" in line
    assert "launch codes" not in line.lower().split("blocked the input")[1]
    assert shown["description"] == "no launch codes"
    assert first.startswith("# cli-codes version 1")
    cells = re.compile(r"[│┃]")  # the tables' column rules, read as spaces
    assert re.search(r"cli-codes\s+2\s+input\s+block\s+keywords", cells.sub(" ", listed))
    assert re.search(
        r"cli-codes v2\s+0:keywords\s+input\s+blocked\s+1 keyword\(s\)", cells.sub(" ", decisions)
    )
    assert "cli-codes" not in theirs  # another tenant's decisions are not its to read
    assert unset.strip() == "guardrail cli-codes: unset"
    assert "guardrail_not_found" in _one_error_line(gone) or "no guardrail" in _one_error_line(gone)
