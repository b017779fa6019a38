"""Each side of a full restart: a deployment on a Ray of its own, used, then stopped.

``python -m tests.support.full_restart before|after CONFIG`` starts a local Ray with the
system actors on the state named in ``CONFIG`` (a JSON file: the root directory, the state
URL or none for SQLite files, the model servers' addresses), and

- ``before`` leaves six pieces of work where a restart must find them (a graph waiting at an
  interrupt, a tool call waiting for approval, a session with turns, an A/B experiment half
  way to its horizon, a half-ingested knowledge base, a job in the middle of a subtask), says
  where each one is, and stops Ray with the job still running: every process of the
  deployment ends;
- ``after`` starts everything again on the same state and takes each one on from there.

Each side writes what it saw to ``<root>/<side>.json`` for the test to compare. The model
servers run in the test's process: they outlive both sides and count every call.
"""

from __future__ import annotations

import contextlib
import json
import sys
import time
from pathlib import Path
from typing import Any

from examples.ab_experiment import notes_skill, request
from raytroupe import runtime
from raytroupe.actors.skills.config import SkillsConfig
from raytroupe.actors.tools.config import FunctionTool
from raytroupe.protocols import KnowledgeDocument, TeamSpec
from raytroupe.protocols.graph import GraphSpec
from tests.support.graph_specs import PAUSED
from tests.support.ledger import TOOL_NAME, TOOL_TARGET
from tests.support.mcp_servers import STDIO_COMMAND

FACT = "Please remember that my sister Marguerite lives in Lyon."
QUESTION = "In which city does my sister live?"
DOCUMENTS = 128  # two ingest requests of 64: the restart falls between them
EXPERIMENT = "restart-ab"
SLEEP_S = 30.0


def connect(config: dict[str, Any]) -> runtime.Runtime:
    root = Path(config["root"])
    return runtime.connect(
        address="local",
        num_cpus=2,
        log_level="warning",
        llm_config=runtime.LLMConfig(network=runtime.NetworkPolicy(allow=("127.0.0.1",))),
        tools_config=runtime.ToolsConfig(
            state_dir=root / "state",
            scratch_root=root / "scratch",
            mcp_servers=(runtime.MCPServerSpec(name="testmcp", command=STDIO_COMMAND),),
            approval_required=("echo",),  # a tool of that MCP server
            functions={TOOL_NAME: FunctionTool(target=TOOL_TARGET, side_effects=True)},
        ),
        memory_config=runtime.MemoryConfig(path=root / "memory"),
        config=runtime.SystemConfig(skills=SkillsConfig(directory=root / "skills")),
        journal=root / "state" / "journal.sqlite",
        state_url=config["state_url"],
    )


def wire_model(url: str, name: str) -> runtime.OpenAICompatibleModel:
    return runtime.OpenAICompatibleModel(base_url=url, model=name)


def graph_team(config: dict[str, Any], server: str = "graph") -> TeamSpec:
    """(a) A draft, then a pause before publishing; both roles on the graph's model server."""
    model = wire_model(config["wires"][server], "g")
    return TeamSpec(
        name=f"restart-{server}", planner_model="offline",
        agents=tuple(runtime.AgentSpec(name=f"restart-{server}-{role}", role=role,
                                       model=f"restart-{server}-g",
                                       memory=runtime.MemoryPolicy(recall=False))
                     for role in ("writer", "editor")),
        models={f"restart-{server}-g": model}, graph=GraphSpec.model_validate(PAUSED),
    )  # fmt: skip


def sleeping_team(config: dict[str, Any]) -> TeamSpec:
    """(g) A draft, then SLEEP_S before publishing: the restart falls in the wait."""
    spec = graph_team(config, "sleep").model_dump(mode="json")
    spec["name"], spec["graph"]["nodes"][1]["interrupt"] = "restart-sleep", None
    spec["graph"]["nodes"][1]["wait_s"] = SLEEP_S
    return TeamSpec.model_validate(spec)


def tool_team(config: dict[str, Any], name: str, server: str, tools: list[str]) -> runtime.Team:
    """One agent of a role, on model server ``server``, with ``tools``."""
    return runtime.Team(
        name=name,
        planner_model="offline",
        models={f"{name}-m": wire_model(config["wires"][server], "m")},
        agents=[runtime.AgentSpec(name=f"{name}-a", role="worker", model=f"{name}-m",
                                  tools=tools, memory=runtime.MemoryPolicy(recall=False))],
    )  # fmt: skip


def approval_team(config: dict[str, Any]) -> runtime.Team:
    """(b) A tool call a person must approve."""
    return tool_team(config, "restart-approve", "approval", ["echo"])


def subtask_team(config: dict[str, Any]) -> runtime.Team:
    """(e) A subtask of four model calls: a side effect, a 6 s tool call, a sum, the answer."""
    return tool_team(config, "restart-sub", "subtask", [TOOL_NAME, "python"])


def chat_team() -> runtime.Team:
    """(c) The session's assistant, on the offline model."""
    return runtime.Team(
        name="restart-chat", agents=[runtime.AgentSpec(name="restart-chat-a", role="assistant")]
    )


def document(k: int) -> KnowledgeDocument:
    """(f) The k-th document: one fact no other document holds."""
    text = f"# Shelf {k}\n\nShelf {k} holds the {k}th edition, catalogue mark QX-{k:04d}.\n"
    return KnowledgeDocument(source=f"shelf-{k:03d}.md", content=text, media_type="text/markdown")


def send(rt: runtime.Runtime, first: int, count: int) -> list[str]:
    """``count`` requests for the experiment's skill, waited for; their job ids."""
    jobs = [rt.submit(request(first + k), skill="restart-notes") for k in range(count)]
    for job in jobs:
        with contextlib.suppress(runtime.JobFailed):  # a wrong code fails its gate: measured
            job.result(timeout=120)
    return [job.job_id for job in jobs]


def until(check: Any, what: str, timeout: float = 120.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        seen = check()
        if seen:
            return seen
        time.sleep(0.2)
    raise AssertionError(f"never saw {what}")


def arms(info: Any) -> list[dict[str, Any]]:
    return [{"version": a.version, "assigned": a.assigned, "finished": a.finished,
             "sample": a.sample} for a in info.arms]  # fmt: skip


def graph_timer(job: Any) -> Any:
    points = job.checkpoints()
    return points[-1].timer if points else None


def before(rt: runtime.Runtime, config: dict[str, Any]) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    # (a) a graph waiting at its interrupt
    graph = rt.submit("a notice", team=graph_team(config))
    until(lambda: graph.status() == "awaiting_input", "the graph wait")
    seen["graph"] = {"job": graph.job_id, "checkpoints": len(graph.checkpoints())}
    # (b) a tool call waiting for a person
    held = rt.submit("Echo the release call.", team=approval_team(config))
    (pending,) = until(held.approvals, "the approval request")
    seen["approval"] = {"job": held.job_id, "approval_id": pending.approval_id}
    # (c) a session with two turns
    session = rt.session(title="before and after")
    team = chat_team()
    session.ask(FACT, team, timeout=120)
    session.ask("Actors in Ray keep state. What do actors in Ray keep?", team, timeout=120)
    seen["session"] = {"id": session.id, "turns": [t.job_id for t in session.turns()]}
    # (d) an experiment with half its samples, over the two versions of the skill of
    # examples/ab_experiment.py
    rt.put_skill(notes_skill("2", "Read the beta and delta notes.", "restart-notes"))
    rt.put_skill(notes_skill("1", "Read the alpha and beta notes.", "restart-notes"))
    info = rt.start_experiment({
        "name": EXPERIMENT, "skill": "restart-notes", "min_effect": 0.4,
        "arms": [{"version": "1"}, {"version": "2"}],
    })  # fmt: skip
    sent = send(rt, 0, info.samples_per_arm)  # about half of each arm's horizon
    info = rt.experiment(EXPERIMENT)
    seen["experiment"] = {"sent": len(sent), "samples_per_arm": info.samples_per_arm,
                          "status": info.status, "arms": arms(info)}  # fmt: skip
    # (f) a knowledge base with the first of its two requests ingested
    report = rt.ingest("shelves", [document(k) for k in range(DOCUMENTS // 2)])
    seen["knowledge"] = {"ingested": len(report.documents), "chunks": report.chunks}
    # (g) a graph asleep until its next node's time
    sleeper = rt.submit("a notice", team=sleeping_team(config))
    timer = until(lambda: graph_timer(sleeper), "the graph's sleep")
    seen["sleep"] = {"job": sleeper.job_id, "wake_at": timer.wake_at}
    # (e) a job in its subtask's 6 s tool call, after its side effect: then Ray stops
    busy = rt.submit("Record the token, then compute 6 * 7.", team=subtask_team(config))
    stop = Path(config["root"]) / "stop"  # the test writes it once the second call came
    until(stop.exists, "the test's word to stop", timeout=360)
    assert stop.read_text() == "now", "the subtask's second model call never came"
    time.sleep(1.0)  # its answer kept, and into the 6 s tool call it asks for
    seen["subtask"] = {"job": busy.job_id, "status": busy.status()}
    return seen


def after(rt: runtime.Runtime, config: dict[str, Any], was: dict[str, Any]) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    # (e) first: it runs on while the others are looked at
    busy = rt.job(was["subtask"]["job"])
    # (a) the graph waits where it was; answered, it goes on
    graph = rt.job(was["graph"]["job"])
    until(lambda: graph.status() == "awaiting_input", "the graph wait, again")
    paused = graph.checkpoints()
    graph.resume("approved")
    done = graph.result(timeout=120)
    seen["graph"] = {
        "interrupt": paused[-1].interrupt.id if paused[-1].interrupt else None,
        "state_at_pause": paused[-1].state,
        "status": done.status,
        "subtasks": [s.id for s in done.subtasks],
        "state": done.state,
    }
    # (b) the same call waits for the same approval; approved, it runs once
    held = rt.job(was["approval"]["job"])
    pending = until(held.approvals, "the approval request, again")
    approved = held.approve(was["approval"]["approval_id"])
    result = held.result(timeout=120)
    seen["approval"] = {"pending": [p.approval_id for p in pending], "approved": approved,
                        "status": result.status, "output": result.subtasks[0].output}  # fmt: skip
    # (c) the session goes on with the turns it had
    session = rt.session(was["session"]["id"], create=False)
    answer = session.ask(QUESTION, chat_team(), timeout=120)
    seen["session"] = {"turns": [t.job_id for t in session.turns()], "answer": str(answer)}
    # (d) the experiment goes on from the figures it had, and decides at its horizon
    info = rt.experiment(EXPERIMENT)
    seen["experiment"] = {"status_at_start": info.status, "arms_at_start": arms(info)}
    sent = 0
    while info.status == "running" and sent < 200:
        sent += len(send(rt, was["experiment"]["sent"] + sent, 8))
        info = rt.experiment(EXPERIMENT)
    seen["experiment"].update({"sent": sent, "status": info.status, "arms": arms(info),
                               "decided": info.decision is not None})  # fmt: skip
    # (f) the whole knowledge base again: the first half is found unchanged
    report = rt.ingest("shelves", [document(k) for k in range(DOCUMENTS)])
    stored = rt.documents("shelves")
    seen["knowledge"] = {
        "unchanged": sum(d.unchanged for d in report.documents),
        "written": sum(not d.unchanged for d in report.documents),
        "sources": len({d.source for d in stored}),
        "passages": sum(d.chunks for d in stored),
    }
    # (g) the graph woke at the time it was given before the restart, and published once
    sleeper = rt.job(was["sleep"]["job"])
    done = sleeper.result(timeout=120)
    events = list(sleeper.events(timeout=10))
    started = [e.at for e in events if e.type == "subtask_started" and e.subtask_id == "publish.2"]
    seen["sleep"] = {
        "status": done.status, "subtasks": [s.id for s in done.subtasks],
        "wake_at": sorted({e.data["wake_at"] for e in events if e.type == "graph_waiting"}),
        "publish_started": started,
    }  # fmt: skip
    # (e) the job cut short in its subtask
    result = busy.result(timeout=180)
    (sub,) = result.subtasks
    seen["subtask"] = {"status": result.status, "output": sub.output, "calls": sub.usage.calls,
                       "replayed": sum(bool(s.attributes.get("replayed")) for s in result.trace),
                       "usage_calls": sum(r.calls for r in rt.usage(result.job_id))}  # fmt: skip
    return seen


def main(side: str, config_file: str) -> None:
    config = json.loads(Path(config_file).read_text())
    root = Path(config["root"])
    rt = connect(config)
    if side == "before":
        seen = before(rt, config)
        (root / "before.json").write_text(json.dumps(seen))
        rt.shutdown()  # the job of (e) still runs: Ray and every actor stop under it
        return
    try:
        was = json.loads((root / "before.json").read_text())
        (root / "after.json").write_text(json.dumps(after(rt, config, was)))
    finally:
        rt.shutdown()


if __name__ == "__main__":
    main(*sys.argv[1:])
