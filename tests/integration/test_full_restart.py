"""A full stop and start of the deployment, with work at every kind of waiting point.

Ray and every actor stop (the driver's ``shutdown``, as ``troupe down`` does) while a graph
waits at an interrupt, a tool call waits for approval, a session has turns, an A/B
experiment is half way to its horizon, a knowledge base is half ingested, a job is in the
middle of its subtask and a graph sleeps until a time; a new Ray on the same state takes
each one on where it was, and nothing is lost or done twice. Once
with the state in SQLite files (one machine), once in PostgreSQL (a cluster). Each side runs
in a process of its own (``tests/support/full_restart.py``); the model servers run here and
count every call across both.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support.figures import record
from tests.support.ledger import TOOL_NAME, runs_by_token
from tests.support.wire_model import ToolCall as WireCall
from tests.support.wire_server import Reply, WireServer

ROOT = Path(__file__).resolve().parents[2]
TOKENS = {"prompt_tokens": 10, "completion_tokens": 2}


def _side(side: str, config: Path, *, stop_when: Callable[[], bool] | None = None) -> None:
    """Run one side in a process of its own; ``before`` stops once ``stop_when()`` says so."""
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    out = config.parent / f"{side}.out"
    with out.open("w") as output:
        process = subprocess.Popen(
            [sys.executable, "-m", "tests.support.full_restart", side, str(config)],
            cwd=ROOT, env=env, stdout=output, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
        try:
            if stop_when is not None:
                ready = stop_when()
                (config.parent / "stop").write_text("now" if ready else "never came")
            code = process.wait(timeout=600)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
    assert code == 0, f"{side}:\n{out.read_text()[-8000:]}"


def _tool(name: str, **arguments) -> Reply:
    return Reply(tool_calls=(WireCall(name, arguments),), **TOKENS)


@dataclass(frozen=True)
class Restarted:
    """What each side saw, and the calls each model server had, before and after."""

    before: dict[str, Any]
    after: dict[str, Any]
    calls_before: dict[str, int]
    calls: dict[str, int]
    ledger: Path
    token: str
    store: str

    def record(self, situation: str, server: str | None = None) -> None:
        """The situation continued (the test's asserts passed): a row of RELIABILITY.md."""
        calls = "" if server is None else f"{self.calls[server]} model calls, each made once"
        record("full_restart", f"{situation} ({self.store})", "continued", note=calls)


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def restarted(request, tmp_path_factory) -> Restarted:
    """The deployment stopped and started again with every piece of work at its waiting point."""
    root = tmp_path_factory.mktemp(f"restart-{request.param}")
    state_url = None
    if request.param == "postgresql":
        state_url = request.getfixturevalue("postgres").database()
    ledger, token = root / "effects.log", f"tok-restart-{request.param}"
    names = ("graph", "approval", "subtask", "sleep")
    with WireServer() as graph, WireServer() as approval, WireServer() as subtask, \
            WireServer() as sleep:  # fmt: skip
        servers = dict(zip(names, (graph, approval, subtask, sleep), strict=True))
        graph.script(Reply(text="draft v1", **TOKENS), Reply(text="published v1", **TOKENS))
        sleep.script(Reply(text="draft v1", **TOKENS), Reply(text="published late", **TOKENS))
        approval.script(_tool("echo", text="ship it"), Reply(text="Echoed.", **TOKENS))
        subtask.script(
            _tool(TOOL_NAME, ledger=str(ledger), token=token),
            _tool("python", code="import time; time.sleep(6); print('slept')"),
            _tool("python", code="print(6 * 7)"),
            Reply(text="Done: 42.", **TOKENS),
        )
        config = root / "config.json"
        config.write_text(json.dumps({
            "root": str(root), "state_url": state_url,
            "wires": {name: server.base_url_openai for name, server in servers.items()},
        }))  # fmt: skip
        # the job of (e) is stopped once its second model call has come (into the 6 s tool
        # call it asks for)
        _side("before", config, stop_when=lambda: subtask.wait_for_requests(2, timeout_s=300))
        calls_before = {name: server.request_count for name, server in servers.items()}
        _side("after", config)
        calls = {name: server.request_count for name, server in servers.items()}
    return Restarted(
        before=json.loads((root / "before.json").read_text()),
        after=json.loads((root / "after.json").read_text()),
        calls_before=calls_before, calls=calls, ledger=ledger, token=token, store=request.param,
    )  # fmt: skip


# system tier: its own Ray, started and stopped twice per backend
pytestmark = [pytest.mark.system, pytest.mark.timeout(1200)]


def test_a_graph_at_an_interrupt_waits_there_again_and_goes_on_when_resumed(restarted):
    before, after = restarted.before["graph"], restarted.after["graph"]
    assert before["checkpoints"] >= 2
    assert after["interrupt"] == "2/publish/before"
    assert after["state_at_pause"] == {"text": "draft v1"}
    assert after["status"] == "succeeded"
    assert after["subtasks"] == ["draft.1", "publish.2"]
    assert after["state"] == {"text": "published v1", "verdict": "approved"}
    assert (restarted.calls_before["graph"], restarted.calls["graph"]) == (1, 2)  # draft once
    restarted.record("(a) a graph waiting at an interrupt", "graph")


def test_a_tool_call_waiting_for_approval_waits_under_the_same_id_and_runs_once(restarted):
    before, after = restarted.before["approval"], restarted.after["approval"]
    assert after["pending"] == [before["approval_id"]]
    assert after["approved"] is True
    assert (after["status"], after["output"]) == ("succeeded", "Echoed.")
    assert (restarted.calls_before["approval"], restarted.calls["approval"]) == (1, 2)
    restarted.record("(b) a tool call waiting for approval", "approval")


def test_a_session_keeps_its_turns_and_the_next_one_sees_them(restarted):
    before, after = restarted.before["session"], restarted.after["session"]
    assert after["turns"][:2] == before["turns"]
    assert len(after["turns"]) == 3
    assert "Marguerite lives in Lyon" in after["answer"]  # shown the first turn
    restarted.record("(c) a session with turns")


def test_an_experiment_goes_on_from_its_figures_and_decides_at_its_horizon(restarted):
    before, after = restarted.before["experiment"], restarted.after["experiment"]
    assert before["status"] == after["status_at_start"] == "running"
    assert after["arms_at_start"] == before["arms"]  # nothing lost, nothing counted again
    assert after["decided"] is True
    arms = after["arms"]
    assert all(a["sample"] == before["samples_per_arm"] for a in arms)
    assert all(a["finished"] == a["assigned"] for a in arms)
    sent = before["sent"] + after["sent"]
    assert sum(a["assigned"] for a in arms) <= sent  # none twice (after the decision: none)
    restarted.record("(d) an A/B experiment at half its horizon")


def test_a_half_ingested_knowledge_base_is_completed_with_one_copy_of_each(restarted):
    before, after = restarted.before["knowledge"], restarted.after["knowledge"]
    assert before["ingested"] == 64
    assert (after["unchanged"], after["written"]) == (64, 64)
    assert after["sources"] == after["passages"] == 128
    restarted.record("(f) a knowledge base half ingested")


def test_a_job_mid_subtask_goes_on_at_the_turn_it_reached(restarted):
    before, after = restarted.before["subtask"], restarted.after["subtask"]
    assert before["status"] == "running"
    assert after["status"] == "succeeded"
    assert after["output"] == "Done: 42."
    assert runs_by_token(restarted.ledger) == {restarted.token: 1}
    assert (restarted.calls_before["subtask"], restarted.calls["subtask"]) == (2, 4)
    assert after["replayed"] == 2  # turns 1 and 2: from the record
    assert after["calls"] == after["usage_calls"] == 4  # and counted once
    restarted.record("(e) a job mid-subtask", "subtask")


def test_a_graph_asleep_wakes_at_the_time_it_was_given_before_the_restart(restarted):
    before, after = restarted.before["sleep"], restarted.after["sleep"]
    assert after["status"] == "succeeded"
    assert after["subtasks"] == ["draft.1", "publish.2"]
    assert after["wake_at"] == [before["wake_at"]]  # set once, kept
    assert after["publish_started"][0] >= before["wake_at"]
    assert (restarted.calls_before["sleep"], restarted.calls["sleep"]) == (1, 2)
    restarted.record("(g) a graph asleep until a time", "sleep")
