"""No tenant stalls the shared control plane (issue 41): real Ray, real Serve on 127.0.0.1.

A tenant's worst documents (backtracking patterns against its graph's state, a team of
thousands of agents) are refused with typed problems, checked off the replica's event loop
in the tenant's share; a flood of them gets 429 ``busy`` past the share, while another
tenant's requests are all served. The work a running job does on the tenant's patterns
(graph ``when`` edges, eval expectations) is bounded per unit and fails the job typed.
Latency ratios are the bench's (``bench/fairness.py``), not asserted here.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from raytroupe import runtime
from raytroupe.protocols import (
    AgentSpec,
    ErrorCode,
    JobFailed,
    ScriptedModel,
    ScriptedTurn,
    TeamSpec,
)
from raytroupe.protocols.evals import MAX_EXPECTATIONS, EvalSuite
from raytroupe.protocols.graph import GraphSpec
from raytroupe.protocols.team import MAX_AGENTS
from tests.support.http_api import FUZZ_KEY, OTHER_KEY

EVIL = r"^(a|aa)+$"
EVIL_TEXT = "a" * 64 + "!"
ANSWER = "The answer is that Ray actors are stateful workers in their own processes."
ANSWER_EVIL = r"^(.|..)+a$"
"""Backtracks exponentially on ``ANSWER`` (which has an 'a', but does not end with one)."""


def _evil_graph_team(name: str) -> dict[str, object]:
    props = {f"k{i}": {"type": "string", "pattern": EVIL} for i in range(8)}
    graph = {
        "nodes": [{"id": "n", "role": "r", "instructions": "x"}],
        "start": "n",
        "state": {
            "json_schema": {"type": "object", "properties": props},
            "initial": {f"k{i}": EVIL_TEXT for i in range(8)},
        },
    }
    return {"name": name, "agents": [{"name": "a", "role": "r"}], "graph": graph}


def _crowd_team() -> dict[str, object]:
    # ~7,000 agents fit the test app's 256 KiB body limit; the production limit is 8 MiB
    return {"name": "crowd", "agents": [{"name": f"a{i}", "role": "r"} for i in range(7_000)]}


def test_the_worst_documents_are_refused_typed_and_a_flood_waits_for_itself(api):
    with api.client(FUZZ_KEY) as attacker:
        pattern = attacker.post("/v1/jobs", json={"task": "t", "team": _evil_graph_team("evil")})
        crowd = attacker.post("/v1/jobs", json={"task": "t", "team": _crowd_team()})
    assert pattern.status_code == 422, pattern.text
    assert pattern.json()["code"] in {"invalid_request", "work_limit"}
    assert "took over" in pattern.text
    assert crowd.status_code == 422, crowd.text
    assert crowd.json()["code"] == "invalid_request"
    assert any(f"at most {MAX_AGENTS} items" in p for p in crowd.json()["problems"])

    flood = 40
    gate = threading.Barrier(flood)

    def attack(n: int) -> tuple[int, dict[str, object], str | None]:
        with api.client(FUZZ_KEY) as attacker:
            gate.wait(timeout=60)
            body = {"task": "t", "team": _evil_graph_team(f"evil{n}")}
            response = attacker.post("/v1/jobs", json=body)
            return response.status_code, response.json(), response.headers.get("retry-after")

    served: list[int] = []
    with ThreadPoolExecutor(flood) as pool, api.client(OTHER_KEY) as bystander:
        attacks = [pool.submit(attack, n) for n in range(flood)]
        # the other tenant keeps asking while the flood is checked (bounded: stops by itself)
        for _ in range(400):
            served.append(bystander.get("/v1/me").status_code)
            if all(a.done() for a in attacks):
                break
        answers = [a.result(timeout=120) for a in attacks]
        served.append(
            bystander.post("/v1/jobs", json={"task": "hi", "team": _one_agent()}).status_code
        )
    assert set(served[:-1]) == {200}
    assert served[-1] == 202  # the bystander's own document: checked in its own share
    statuses = {status for status, _, _ in answers}
    assert statuses <= {422, 429}, answers
    for status, body, retry_after in answers:
        if status == 429:
            assert body["code"] == "busy"
            assert body["retryable"] is True
            assert retry_after is not None
            assert int(retry_after) >= 1
        else:
            assert body["code"] in {"invalid_request", "work_limit"}


def _one_agent() -> dict[str, object]:
    return {"name": "plain", "agents": [{"name": "a", "role": "r"}]}


def _scripted_team(name: str, graph: dict[str, object]) -> TeamSpec:
    model = ScriptedModel(turns=(ScriptedTurn(text=ANSWER),))
    agent = AgentSpec(
        name=f"{name}-a", role="r", model=f"{name}-m", memory=runtime.MemoryPolicy(recall=False)
    )
    return TeamSpec(
        name=name,
        planner_model="offline",
        agents=(agent,),
        models={f"{name}-m": model},
        graph=GraphSpec.model_validate(graph),
    )


def test_graph_edges_that_backtrack_on_an_answer_fail_the_job_naming_their_limit(rt):
    edges = [{"source": "n", "target": "end", "when": ANSWER_EVIL} for _ in range(100)]
    graph = {
        "nodes": [{"id": "n", "role": "r", "instructions": "answer"}],
        "start": "n",
        "edges": [*edges, {"source": "n", "target": "end"}],
    }
    with pytest.raises(JobFailed) as failed:
        rt.submit("go", team=_scripted_team("edgy", graph)).result(timeout=120)
    error = failed.value.detail["result"].error
    assert error.code is ErrorCode.WORK_LIMIT
    assert "edges_work_s" in error.message


def test_an_eval_cases_backtracking_expectations_end_the_case_as_an_error_naming_the_limit(rt):
    node = {"id": "n", "role": "r", "instructions": "answer"}
    team = _scripted_team("evalish", {"nodes": [node], "start": "n"})
    rt.put_team(team)
    try:
        expect = [{"kind": "regex", "pattern": ANSWER_EVIL}] * MAX_EXPECTATIONS
        suite = EvalSuite.model_validate(
            {"name": "backtracking", "cases": [{"id": "c", "task": "go", "expect": expect}]}
        )
        run = rt.evaluate(suite, team=team.name, concurrency=1, timeout=120)
    finally:
        rt.delete_team(team.name)
    (case,) = run.cases
    assert case.status == "error"
    assert "eval_case_work_s" in (case.error or "")
