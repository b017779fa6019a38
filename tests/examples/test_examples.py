"""The examples the README links, each run as a user runs it: ``python examples/<name>.py``.

Each one starts an embedded Ray of its own (``connect(address="local")``) beside the session's,
with a home of its own (its ``~/.raytroupe``, never the account's), runs its jobs and exits;
the assertions read what it printed. The runs that need nothing of a test's start two at a
time when the module begins (each waits on its Ray much of the time). The examples' models
are the offline model and ScriptedModels standing in for a model's decisions;
``real_provider.py`` talks to the wire server on 127.0.0.1 through the official SDKs, as it
would to a real provider.

A second local Ray cannot have the dashboard agent's fixed HTTP port (52365) while the
session's holds it; none of these examples needs it (they submit no Ray jobs). Nothing here
takes the session's Ray, so under xdist this file runs beside the tests on it (the README's
own blocks run against that Ray in ``test_doc_blocks_run.py``).

In the system tier (~2 min on 2 cores, one Ray per example); alone:
``.venv/bin/pytest -m system -n0 tests/examples``.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.support.wire_server import Reply, WireServer

ROOT = Path(__file__).resolve().parents[2]
RUN_TIMEOUT_S = 300.0
WIRE_KEY = "sk-example-wire-3c9d0e"  # the wire server refuses any other (401)


Run = tuple[str, tuple[str, ...], tuple[tuple[str, str], ...], int]
"""An example's run: its name, arguments, variables and the exit status it must end with."""

AHEAD: dict[Run, str] = {
    ("custom_tools", (), (), 0): "test_custom_tools_",
    ("approvals", (), (), 0): "test_approvals_",
    ("approvals", ("--limit", "5000"), (), 0): "test_approvals_",
    ("typed_output", (), (), 0): "test_typed_output_",
    ("mcp_tools", (), (), 0): "test_mcp_tools_",
    ("mcp_client", (), (), 0): "test_mcp_client_",
    ("a2a_client", (), (), 0): "test_a2a_client_",
    ("openai_tool_loop", (), (), 0): "test_openai_tool_loop_",
    ("webhooks", (), (), 0): "test_webhooks_",
    ("guardrails", (), (), 0): "test_guardrails_",
    ("skills_demo", (), (), 0): "test_skills_demo_",
    ("graph_team", (), (), 0): "test_graph_team_",
    ("conversation_and_knowledge", (), (), 0): "test_conversation_and_knowledge_",
    ("ab_experiment", (), (("RAY_ADDRESS", "local"),), 0): "test_ab_experiment_",
}
"""Runs that need nothing of a test's, and the start of the name of the test that reads
each: the selected tests' runs start two at a time when the module begins (each waits on
its Ray much of the time)."""

_started: dict[Run, Future[str]] = {}


@pytest.fixture(scope="module", autouse=True)
def examples_ahead(request: pytest.FixtureRequest) -> Iterator[None]:
    """Start the runs of :data:`AHEAD` that selected tests read; drop the rest at the end."""
    here = request.module.__name__
    selected = {item.name for item in request.session.items if item.module.__name__ == here}
    with ThreadPoolExecutor(max_workers=2, thread_name_prefix="example") as pool:
        for run, test in AHEAD.items():
            if any(name.startswith(test) for name in selected):
                _started[run] = pool.submit(_run, *run)
        try:
            yield
        finally:
            for run in list(_started):
                _started.pop(run).cancel()


def run_example(name: str, *args: str, env: dict[str, str] | None = None, status: int = 0) -> str:
    """Run ``examples/<name>.py`` from the repository root; its stdout (and stderr if it failed).

    A run of :data:`AHEAD` was started already: its output is waited for.
    """
    run: Run = (name, args, tuple(sorted((env or {}).items())), status)
    started = _started.get(run)
    if started is not None:
        return started.result(timeout=4 * RUN_TIMEOUT_S)
    return _run(*run)


def _run(name: str, args: tuple[str, ...], env: tuple[tuple[str, str], ...], status: int) -> str:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("RAY_ADDRESS", "LLM_"))}
    # a home of its own: the example's ~/.raytroupe (journal, memory, ledger) and Ray's
    # token are the run's, never the account's that runs the tests
    with tempfile.TemporaryDirectory(prefix="example-home-") as home:
        done = subprocess.run(
            [sys.executable, f"examples/{name}.py", *args],
            cwd=ROOT,
            env={**base, "HOME": home, **dict(env)},
            capture_output=True,
            text=True,
            timeout=RUN_TIMEOUT_S,
            check=False,
        )
    assert done.returncode == status, f"{name}: {done.returncode}\n{done.stdout}\n{done.stderr}"
    return done.stdout + done.stderr if status else done.stdout


def test_custom_tools_team_wide_and_per_agent_functions_run_in_the_sandbox():
    out = run_example("custom_tools")
    assert "stock is still a function: stock('A-1') = {'sku': 'A-1', 'on_hand': 12}" in out
    # team-wide: both agents called stock, in the sandbox, with their own arguments
    assert 'stock({"sku": "A-1"}) -> {"sku": "A-1", "on_hand": 12}' in out
    assert 'stock({"sku": "B-2"}) -> {"sku": "B-2", "on_hand": 0}' in out
    # per agent: the clerk was refused the buyer's tool; the buyer's "20" arrived as an int
    assert 'reorder({"sku": "A-1", "units": 5}) -> refused, tool_not_allowed' in out
    assert (
        'reorder({"sku": "B-2", "units": "20"}) -> '
        '{"sku": "B-2", "ordered": 20, "status": "purchase order placed"}'
    ) in out
    assert "count [clerk -> clerk]: succeeded" in out
    assert "restock [buyer -> buyer]: succeeded" in out


@pytest.mark.timeout(2 * RUN_TIMEOUT_S + 60)
def test_approvals_the_driver_sees_each_held_call_and_its_decision_is_what_runs():
    out = run_example("approvals")
    assert "refund({'order_id': 'A-1001', 'amount_usd': 25.0}) by sam" in out
    assert "refund({'order_id': 'B-2002', 'amount_usd': 4800.0}) by sam" in out
    assert "approval_decided: approved, within the $100 limit" in out
    assert "approval_decided: rejected, over the $100 limit: a manager must decide" in out
    assert "ran: refunded $25.00 on order A-1001" in out
    assert "not run (tool): a human rejected 'refund': over the $100 limit" in out
    assert "refunded $4800.00" not in out

    raised = run_example("approvals", "--limit", "5000")
    assert "rejected" not in raised
    assert "ran: refunded $4800.00 on order B-2002" in raised


def test_typed_output_gives_pydantic_instances_from_the_blocking_and_the_async_driver():
    out = run_example("typed_output")
    first = (
        "Invoice(invoice_number='INV-2024-117', total=1250.0, due_date=datetime.date(2025, 7, 15))"
    )
    assert f"job.output():  {first}" in out
    assert "due in 14 days from July 1" in out
    assert "result.output_as(Invoice) == job.output(): True" in out
    assert "invoice_number='GX-88', total=99.5, due_date=datetime.date(2025, 8, 1)" in out
    assert "[1] job_submitted" in out
    assert "job_succeeded" in out
    assert (
        "await job.aoutput(): Invoice(invoice_number='IN-7', total=4000.0, "
        "due_date=datetime.date(2025, 9, 1))"
    ) in out
    rows = out.split("asyncio.gather of rt.arun() x 4:\n", 1)[1].splitlines()
    assert [row.split() for row in rows] == [
        ["INV-2024-117", "1250.00", "due", "2025-07-15"],
        ["GX-88", "99.50", "due", "2025-08-01"],
        ["IN-7", "4000.00", "due", "2025-09-01"],
        ["HX-301", "12.75", "due", "2025-10-03"],
    ]


def test_mcp_tools_the_servers_tools_are_offered_checked_and_called():
    out = run_example("mcp_tools")
    assert (
        "convert_distance(value: number, to: 'km' | 'mi'): "
        "Convert a distance between kilometres and miles."
    ) in out
    assert "convert_temperature(value: number, to: 'C' | 'F')" in out
    assert (
        'convert_distance({"value": 42.195, "to": "miles"}) -> refused, invalid_arguments'
    ) in out
    # computed by the MCP server's process: 42.195 km in miles, 18 C in F
    assert 'convert_distance({"value": 42.195, "to": "mi"}) -> 26.219' in out
    assert 'convert_temperature({"value": 18, "to": "F"}) -> 64.4' in out
    assert "status: succeeded" in out


def test_mcp_client_lists_calls_and_reads_raytroupes_tools_over_http():
    out = run_example("mcp_client")
    assert "tool team_research: Run a job of the team research." in out
    assert "tool skill_sentiment: Classify the sentiment of a review" in out
    assert "progress 0/2: plan ready" in out
    assert "progress 2/2: job succeeded" in out
    assert "is_error: False; team research; 2 model calls" in out
    assert "2. Chroma is an embedding database that stores vectors for retrieval." in out
    assert re.search(r"troupe://jobs/job-\w+/result: status succeeded, 2 subtasks", out), out


def test_a2a_client_reads_the_card_and_follows_a_task_as_it_streams():
    out = run_example("a2a_client")
    assert re.search(r"JSONRPC 1\.0 at http://127\.0\.0\.1:\d+/a2a/research", out), out
    assert "streaming True; security bearer" in out
    assert "TASK_STATE_WORKING: planned 2 subtask(s)" in out
    assert "TASK_STATE_WORKING: subtask s1 finished" in out
    assert "2. Chroma is an embedding database that stores vectors for retrieval." in out
    assert re.search(r"GetTask job-\w+: TASK_STATE_COMPLETED; artifacts answer, output", out), out


def test_openai_tool_loop_runs_the_callers_tool_the_team_asks_for():
    out = run_example("openai_tool_loop")
    assert out.count("finish_reason: tool_calls") == 1
    assert "the team asks for get_weather({'city': 'Paris'}): 18 C, clear" in out
    assert "finish_reason: stop\nanswer: It is 18 C and clear in Paris." in out


def test_webhooks_tells_a_receiver_of_a_job_signed_and_lists_the_delivery():
    out = run_example("webhooks")
    assert re.search(r"webhook wh-[0-9a-f]{16} -> http://127\.0\.0\.1:\d+/hooks/raytroupe", out)
    job = re.search(r"job (job-\w+) submitted", out)
    assert job, out
    assert f"receiver: job_succeeded of {job[1]}, signature verified" in out
    assert "refused a body" not in out
    assert re.search(r"msg_\w+  job_succeeded  delivered after 1 attempt\(s\), HTTP 204", out), out


def test_guardrails_refuses_one_job_redacts_another_and_lists_the_decisions():
    out = run_example("guardrails")
    assert "refused: guardrail 'no-secrets' v1 rule 0:keywords blocked the input" in out
    job = re.search(r"job (job-\w+): succeeded", out)
    assert job, out
    assert (
        "the agents were asked: Write a two-line reply to [EMAIL], who called from [PHONE]" in out
    )
    assert "jane.doe" not in out  # not in what the agents were asked, nor in the answer
    assert "a job with nothing to guard: succeeded" in out
    assert (
        f"no-pii v1 rule 0:pii redacted the input of {job[1]}: personal data: email, phone (2)"
        in out
    )
    assert "no-secrets v1 rule 0:keywords blocked the input of (no job: refused)" in out


def test_skills_demo_names_one_skill_and_routes_two_jobs_to_theirs():
    out = run_example("skills_demo")
    for loaded in ("arithmetic@1 (react)", "invoice-fields@1 (direct)", "sentiment@1 (direct)",
                   "research-brief@1 (team:research)"):  # fmt: skip
        assert f"skill {loaded}" in out
    assert "not loaded:" not in out  # every file of examples/skills is valid
    assert "invoice-fields@1: succeeded, named" in out
    assert '"invoice_number": "INV-2024-117", "total": 1250.0, "due_date": "2025-07-15"' in out
    assert "sentiment@1: succeeded, routed by similarity to sentiment" in out
    assert '"sentiment": "negative"' in out
    assert "arithmetic@1: succeeded, routed by similarity to arithmetic" in out
    assert "1250 * 0.2 + 17 = 267" in out  # the calculator's answer, through the skill's agent
    assert out.count("quality: passed=True") == 3


def test_graph_team_pauses_resumes_and_forks_from_a_checkpoint():
    out = run_example("graph_team")
    assert "paused at 3/report/before; findings so far:" in out
    assert "status: succeeded" in out
    steps = ["step 0: next research", "step 1: next investigate, investigate",
             "step 2: next report", "step 3: next (end)"]  # fmt: skip
    assert all(step in out for step in steps)
    forked = re.search(r"fork of (job-[0-9a-f]+) from step 0, topics \['serve'\]: (\w+)", out)
    assert forked, out
    assert forked.group(2) == "succeeded", out
    assert 'findings: ["[source] Ray Serve exposes Python deployments' in out


def test_conversation_and_knowledge_ingests_cites_and_keeps_the_session():
    out = run_example("conversation_and_knowledge")
    assert "ingested ray_basics.md: 3 passages" in out
    assert "ingested serve_faq.html: 3 passages" in out
    assert "[serve_faq.html#1] Ray Serve FAQ > How does autoscaling work?" in out
    assert "adds replicas when the average stays above target_ongoing_requests" in out
    assert "[serve_faq.html#1]." in out  # the answer cites its passage
    # the third turn sees the first: the session carried the conversation
    third = out.split("user: Which service do I look after?", 1)[1]
    assert "billing service" in third
    assert re.search(r"session s-[0-9a-f]+: 3 turns, \['succeeded', 'succeeded', 'succeeded'\]",
                     out)  # fmt: skip


def test_ab_experiment_measures_both_versions_to_its_horizon_and_decides():
    out = run_example("ab_experiment", env={"RAY_ADDRESS": "local"})  # a Ray of its own
    horizon = re.search(r"experiment notes-ab-[0-9a-f]+: (\d+) jobs per arm", out)
    assert horizon, out
    per_arm = int(horizon.group(1))
    arms = {
        row.split()[0]: row.split()
        for row in out.splitlines()
        if row.startswith(("1 (control)", "2 "))
    }
    # version 2 reads the note the code is in, on every request: deterministic
    assert arms["2"][2] == "100%", out
    assert arms["2"][3] == f"{per_arm}/{per_arm}", out
    assert arms["1"][4] == f"{per_arm}/{per_arm}", out  # both arms reached the horizon
    # the decision is made at the horizon, whichever way the test goes (version 1 is right
    # on the even requests only, a coin toss per job: its count is not asserted)
    assert "decision: " in out
    assert "promoted: False" in out  # not asked to promote
    assert "current version of notes-code: 1" in out


def test_real_provider_without_its_variables_says_what_to_set_and_exits_2():
    out = run_example("real_provider", status=2)
    assert "LLM_MODEL is not set" in out
    assert "LLM_BASE_URL is not set" in out
    named = run_example(
        "real_provider", env={"LLM_PROVIDER": "anthropic", "LLM_MODEL": "m"}, status=2
    )
    assert "ANTHROPIC_API_KEY, the variable with the key, is not set" in named


@pytest.mark.timeout(2 * RUN_TIMEOUT_S + 60)
@pytest.mark.parametrize("provider", ["openai_compatible", "anthropic"])
def test_real_provider_runs_through_the_official_sdk_against_a_wire_server(provider):
    with WireServer(api_key=WIRE_KEY) as server:
        server.script(
            Reply.tool("calculator", {"expression": "17 * 23 + 4"}),
            Reply(text="They make 395 changes a year."),
            Reply(text="395 changes a year."),  # the aggregation of the one subtask
        )
        url = server.base_url_openai if provider == "openai_compatible" else server.base_url
        out = run_example(
            "real_provider",
            env={
                "LLM_PROVIDER": provider,
                "LLM_BASE_URL": url,
                "LLM_MODEL": "wire-test-model",
                "LLM_KEY_ENV": "EXAMPLE_WIRE_KEY",
                "EXAMPLE_WIRE_KEY": WIRE_KEY,
            },
        )
        requests = server.requests
    assert f"model: {provider} wire-test-model at {url}, key from EXAMPLE_WIRE_KEY" in out
    assert "streamed: They make 395 changes a year." in out  # the agent's tokens, as they came
    assert 'tool: calculator({"expression": "17 * 23 + 4"}) -> 395' in out  # computed here
    assert "answer: 395 changes a year." in out
    assert "usage: 3 model calls" in out
    path = "/v1/chat/completions" if provider == "openai_compatible" else "/v1/messages"
    calls = [r for r in requests if r.path == path]
    assert len(calls) == 3
    assert {r.body["model"] for r in calls} == {"wire-test-model"}
    assert calls[0].body["stream"] is True  # the agent streams
    assert WIRE_KEY not in out
