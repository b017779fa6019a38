"""The job console in a real headless Chromium, against the real Serve application on 127.0.0.1.

Debian's chromium, driven by Playwright (never ``playwright install``). Each test signs in
with an API key as a person would and uses the page: submit, watch, approve, cancel, read the
trace, be refused another tenant's job, move by keyboard. Screenshots are saved for every
test (``TROUPE_SCREENSHOTS=<dir>`` keeps them; the README's come from such a run). The time
the pages take is measured in the browser by ``bench/console.py``; here it is printed only.
"""

from __future__ import annotations

import json

import httpx
import pytest

from raytroupe import runtime
from raytroupe.protocols import AgentSpec, ScriptedModel, ScriptedTurn, TeamSpec
from raytroupe.protocols.graph import GraphSpec
from tests.support.browser import headless_browser
from tests.support.console import (
    LOW_CONTRAST,
    UNLABELLED,
    console_tabs,
    fill_history,
    shot,
    store_wide_job,
)
from tests.support.graph_specs import PAUSED
from tests.support.http_api import (
    ADMIN_KEY,
    BULK_KEY,
    OTHER_KEY,
    USER_KEY,
    finished,
    register,
    wire_team,
)
from tests.support.postgres import SESSION_DATABASE
from tests.support.wire_server import Default, Reply, WireServer

pytestmark = pytest.mark.system  # system tier: a headless Chromium

WIDE_JOB = "job-wide0128"
LIVE_TIMEOUT_MS = 180_000  # a loaded 2-core machine: generous, and bounded


@pytest.fixture(scope="module")
def browser():
    with headless_browser() as chromium:
        yield chromium


@pytest.fixture(scope="module")
def history(api, postgres):
    """1,000 finished jobs of tenant ``bulk`` and one of 128 subtasks, in the journal."""
    url = postgres.url(SESSION_DATABASE)  # the session's journal (the rt fixture made it)
    ids = fill_history(url, "bulk", 1000)
    store_wide_job(url, "bulk", WIDE_JOB, 128)
    return ids


@pytest.fixture(scope="module")
def shots(tmp_path_factory):
    return tmp_path_factory.mktemp("console-shots")


@pytest.fixture
def console(api, browser, shots):
    """``console(key)``: a fresh tab signed in with ``key``; its errors are checked at the end."""
    with console_tabs(browser, api.url) as open_tab:
        yield open_tab


_shot = shot


def _slow_team(name: str, latency_s: float) -> runtime.Team:
    return runtime.Team(
        name=name,
        planner_model="offline",
        max_parallel=1,
        models={f"{name}-m": runtime.OfflineModel(latency_s=latency_s)},
        agents=[runtime.AgentSpec(name=f"{name}-a", role="worker", model=f"{name}-m",
                                  memory=runtime.MemoryPolicy(recall=False))],
    )  # fmt: skip


def _submit(api, key: str, team: str, task: str) -> str:
    with api.client(key) as client:
        response = client.post("/v1/jobs", json={"team": team, "task": task})
        assert response.status_code == 202, response.text
        return str(response.json()["id"])


def test_a_person_signs_in_submits_a_job_and_watches_its_subtasks_turn_green(api, console, shots):
    team = register(api, _slow_team("console-live", 1.5))
    page = console(USER_KEY)
    assert page.text_content("[data-testid=whoami]").startswith("acme-user")
    assert page.locator("nav a", has_text="Dead letters").count() == 0  # not an admin
    page.evaluate("window.__sameDocument = true")  # gone if the page reloads
    page.select_option("#submit-target", f"team:{team}")
    page.fill("#submit-task", "Tasks:\n- alpha.\n- beta.\n- gamma.")
    _shot(page, shots, "console-submit")
    page.click("#submit-job button[type=submit]")
    page.wait_for_url("**#/jobs/job-*")
    job_id = page.url.rsplit("/", 1)[-1]

    page.wait_for_selector("#dag g.node[data-status=running]", timeout=LIVE_TIMEOUT_MS)
    seen_running = page.eval_on_selector_all(
        "#dag g.node", "nodes => nodes.map(n => n.dataset.status)"
    )
    _shot(page, shots, "console-job-running")
    page.wait_for_function(
        "() => document.querySelector('[data-testid=job-status]').textContent.trim()"
        " === 'succeeded'",
        timeout=LIVE_TIMEOUT_MS,
    )
    page.wait_for_function(
        "() => [...document.querySelectorAll('#dag g.node')].every("
        "n => n.dataset.status === 'succeeded')",
        timeout=30_000,
    )
    statuses = page.eval_on_selector_all("#dag g.node", "nodes => nodes.map(n => n.dataset.status)")
    assert page.evaluate("window.__sameDocument") is True  # updated live, never reloaded
    assert "running" in seen_running
    assert "pending" in seen_running or seen_running.count("running") < len(seen_running)
    assert statuses == ["succeeded"] * 3
    assert page.locator("#subtasks tbody tr").count() == 3
    events = page.eval_on_selector_all("#events li", "items => items.map(i => i.dataset.type)")
    assert events[0] == "job_submitted"
    assert events[-1] == "job_succeeded"
    assert events.count("subtask_finished") == 3

    # the trace: a waterfall of spans, and a model call's details
    page.wait_for_selector("#waterfall .span-row[data-span-kind=model_call]")
    kinds = page.eval_on_selector_all(
        "#waterfall .span-row", "rows => rows.map(r => r.dataset.spanKind)"
    )
    assert kinds[0] == "job"
    assert {"plan", "subtask", "attempt", "model_call"} <= set(kinds)
    page.click("#waterfall .span-row[data-span-kind=model_call]")
    detail = page.text_content("#span-detail")
    assert "console-live-m" in detail
    assert "offline" in detail
    page.locator("#span-detail").scroll_into_view_if_needed()
    _shot(page, shots, "console-trace")
    with api.client(USER_KEY) as client:
        assert client.get(f"/v1/jobs/{job_id}").json()["status"] == "succeeded"
    assert page.text_content("#answer").strip()


@pytest.fixture(scope="module")
def wire():
    with WireServer() as server:
        yield server


def test_a_held_tool_call_is_read_and_approved_from_the_page(api, console, wire, shots):
    wire.reset()
    wire.script(Reply.tool("echo", {"text": "deploy v9 to production"}), Default())
    team = register(api, wire_team(wire, "console-approve", ["echo"]))
    job_id = _submit(api, USER_KEY, team, "Echo the deploy call.")
    page = console(USER_KEY)
    page.goto(f"{api.url}/console/#/approvals")
    card = page.wait_for_selector("[data-approval-id]", timeout=LIVE_TIMEOUT_MS)
    shown = card.text_content()
    assert "echo" in shown
    assert json.loads(card.query_selector("pre").text_content()) == {
        "text": "deploy v9 to production"
    }
    assert job_id in shown
    _shot(page, shots, "console-approvals")
    card.query_selector("input[aria-label=Reason]").fill("reviewed by the on-call")
    card.query_selector("button[data-action=approve]").click()
    with api.client(USER_KEY) as client:
        result = finished(client, job_id)
        decided = [e for e in _events(client, job_id) if e["type"] == "approval_decided"]
    assert result["status"] == "succeeded"
    assert decided[0]["data"]["approved"] is True
    assert decided[0]["data"]["reason"] == "reviewed by the on-call"

    page.goto(f"{api.url}/console/#/jobs/{job_id}")
    page.wait_for_function(
        "() => document.querySelector('[data-testid=job-status]')?.textContent.trim()"
        " === 'succeeded'",
        timeout=60_000,
    )
    page.wait_for_selector("#waterfall .span-row[data-span-kind=tool_call]")
    page.click("#waterfall .span-row[data-span-kind=tool_call]")
    detail = page.text_content("#span-detail")
    assert "deploy v9 to production" in detail  # the call's arguments
    assert page.locator("[data-approval-id]").count() == 0


def _events(client: httpx.Client, job_id: str) -> list[dict[str, object]]:
    with client.stream("GET", f"/v1/jobs/{job_id}/events") as stream:
        return [json.loads(line[6:]) for line in stream.iter_lines() if line.startswith("data: ")]


def test_a_running_job_is_cancelled_from_its_page(api, console, shots):
    team = register(api, _slow_team("console-cancel", 60.0))
    job_id = _submit(api, USER_KEY, team, "- never finishes.\n- nor this.")
    page = console(USER_KEY)
    page.goto(f"{api.url}/console/#/jobs/{job_id}")
    page.wait_for_selector("#dag g.node[data-status=running]", timeout=LIVE_TIMEOUT_MS)
    page.click("#cancel-job")
    page.wait_for_function(
        "() => document.querySelector('[data-testid=job-status]').textContent.trim()"
        " === 'cancelled'",
        timeout=60_000,
    )
    _shot(page, shots, "console-cancelled")
    assert page.locator("#cancel-job").is_hidden()
    with api.client(USER_KEY) as client:
        assert client.get(f"/v1/jobs/{job_id}").json()["status"] == "cancelled"


def test_a_paused_graph_is_resumed_with_a_value_from_its_page(api, console, rt, shots):
    def scripted(text: str) -> ScriptedModel:
        return ScriptedModel(turns=(ScriptedTurn(text=text),))

    roles = {"writer": scripted("draft v1"), "editor": scripted("published")}
    team = TeamSpec(
        name="console-graph", planner_model="offline", graph=GraphSpec.model_validate(PAUSED),
        agents=tuple(AgentSpec(name=f"console-graph-{r}", role=r, model=f"console-graph-{r}",
                               memory=runtime.MemoryPolicy(recall=False)) for r in roles),
        models={f"console-graph-{r}": model for r, model in roles.items()},
    )  # fmt: skip
    job = rt.submit("a notice", team=team, tenant="acme")
    page = console(USER_KEY)
    page.goto(f"{api.url}/console/#/approvals")
    waiting = page.wait_for_selector(f"form[data-job-id='{job.job_id}']", timeout=LIVE_TIMEOUT_MS)
    assert "publish" in waiting.text_content()
    page.goto(f"{api.url}/console/#/jobs/{job.job_id}")
    form = page.wait_for_selector("#resume", timeout=LIVE_TIMEOUT_MS)
    assert "draft v1" in form.text_content()  # the state it waits with
    page.fill("#resume-value", "not json")
    page.click("#resume button[type=submit]")
    assert page.wait_for_selector("#resume [data-testid=problem]").is_visible()
    assert job.status() == "awaiting_input"  # nothing was sent
    page.fill("#resume-value", '"approved"')
    _shot(page, shots, "console-graph-input")
    page.click("#resume button[type=submit]")
    result = job.result(timeout=120)
    assert result.status == "succeeded", result.error
    assert result.state == {"text": "published", "verdict": "approved"}
    page.wait_for_function(
        "() => document.querySelector('[data-testid=job-status]').textContent.trim()"
        " === 'succeeded'",
        timeout=60_000,
    )
    resumed = page.wait_for_selector("#events li[data-type=graph_resumed] .ev-summary")
    assert resumed.text_content() == "resumed at publish (before)"  # the node, not "?"


def test_another_tenants_job_is_refused_and_never_shown(api, console):
    team = register(api, _slow_team("console-private", 0.0))
    job_id = _submit(api, USER_KEY, team, "- acme's confidential roadmap.")
    own_id = _submit(api, OTHER_KEY, team, "- a job of the other tenant's own.")
    with api.client(USER_KEY) as client:
        finished(client, job_id)
    page = console(OTHER_KEY)
    # the list has loaded (its own job is in it) before acme's job is looked for
    page.wait_for_selector(f"#jobs tr[data-job-id='{own_id}']")
    assert page.locator(f"#jobs tr[data-job-id='{job_id}']").count() == 0
    assert not page.text_content("[data-testid=jobs-count]").startswith("Loading")
    page.goto(f"{api.url}/console/#/jobs/{job_id}")
    problem = page.wait_for_selector("[data-testid=problem]")
    assert "job_not_found" in problem.text_content()
    assert "confidential" not in page.content()
    assert page.locator("#dag g.node").count() == 0
    page.goto(f"{api.url}/console/#/dead-letters")
    assert "forbidden" in page.wait_for_selector("[data-testid=problem]").text_content()


def test_a_tasks_markup_is_shown_as_text_never_run(api, console):
    team = register(api, _slow_team("console-xss", 0.0))
    task = '- <img src=x onerror="window.__xss=1"> and <script>window.__xss=2</script>.'
    job_id = _submit(api, USER_KEY, team, task)
    with api.client(USER_KEY) as client:
        finished(client, job_id)
    page = console(USER_KEY)
    row = page.wait_for_selector(f"#jobs tr[data-job-id='{job_id}']")
    assert "<img src=x" in row.text_content()
    page.goto(f"{api.url}/console/#/jobs/{job_id}")
    page.wait_for_selector("#dag[data-ready='1']")
    assert page.evaluate("window.__xss") is None
    assert page.locator("main img, main script").count() == 0


def test_a_thousand_stored_jobs_list_and_filter_in_place(api, console, history, shots):
    page = console(BULK_KEY)
    page.wait_for_function("() => document.body.dataset.jobsReady === '1'")
    assert page.locator("#jobs tbody tr[data-job-id]").count() == 1000
    assert page.text_content("[data-testid=jobs-count]").strip() == "1000 jobs"
    rendered = page.evaluate("performance.getEntriesByName('jobs-rendered')[0].startTime")
    assert rendered > 0  # the page marks when it is usable: bench/console.py times that
    _shot(page, shots, "console-jobs")
    page.fill("#job-search", "topic 3")
    visible = page.locator("#jobs tbody tr[data-job-id]:not([hidden])")
    expected = sum(1 for n in range(1000) if n % 7 == 3)
    page.wait_for_function(
        f"() => document.querySelectorAll('#jobs tbody tr[data-job-id]:not([hidden])').length"
        f" === {expected}"
    )
    assert visible.count() == expected
    assert page.text_content("[data-testid=jobs-count]").strip() == f"{expected} of 1000 jobs"
    page.fill("#job-search", "")
    page.select_option("#job-status", "failed")
    failed = page.eval_on_selector_all(
        "#jobs tbody tr[data-job-id]:not([hidden])", "rows => rows.map(r => r.dataset.jobId)"
    )
    assert failed == [WIDE_JOB]  # the one with failed subtasks
    newest = page.get_attribute("#jobs tbody tr[data-job-id]", "data-job-id")
    assert newest == WIDE_JOB  # newest first: it was stored last, 30 s ago


def test_a_plan_of_128_subtasks_is_drawn_as_a_dag(api, console, history, shots):
    page = console(BULK_KEY)
    page.goto(f"{api.url}/console/#/jobs/{WIDE_JOB}")
    page.wait_for_selector("#dag[data-ready='1']")
    assert page.locator("#dag g.node").count() == 128
    assert page.locator("#subtasks tbody tr").count() == 128
    failed = page.locator("#dag g.node[data-status=failed]").count()
    assert failed == sum(1 for n in range(128) if n % 17 == 5)
    # each node sits below every subtask it depends on
    tops = page.eval_on_selector_all(
        "#dag g.node",
        "nodes => Object.fromEntries(nodes.map(n => [n.dataset.subtask, n.getBBox().y]))",
    )
    assert tops["s16"] > tops["s0"]
    assert tops["s127"] > tops["s111"]
    drawn = page.evaluate("performance.getEntriesByName('dag-rendered').at(-1).startTime")
    assert drawn > 0
    _shot(page, shots, "console-dag-128")


def test_guardrail_decisions_are_listed_for_their_tenant_never_the_matched_text(
    api, console, rt, shots
):
    worker = runtime.AgentSpec(name="gd-a", role="worker")
    team = register(
        api, runtime.Team(name="guarded-desk", planner_model="offline", agents=[worker])
    )
    block = {"stages": ["input"], "rules": [{"kind": "keywords", "words": ["password"]}],
             "applies_to": {"teams": [team]}}  # fmt: skip
    redact = {"stages": ["input"], "action": "redact", "rules": [{"kind": "pii"}],
              "applies_to": {"teams": [team]}}  # fmt: skip
    rt.put_guardrail("console-block", block)
    rt.put_guardrail("console-pii", redact)
    try:
        with api.client(USER_KEY) as acme:
            refused = acme.post("/v1/jobs", json={"team": team, "task": "Tell me the password."})
            job_id = _submit(api, USER_KEY, team, "Reply to ann.lee@example.com today.")
            finished(acme, job_id)
        page = console(USER_KEY)
        page.goto(f"{api.url}/console/#/guardrails")
        page.wait_for_selector("#decisions tbody tr[data-action='redacted']")
        shown = page.inner_text("#decisions")
        _shot(page, shots, "console-guardrails")
        admin_page = console(ADMIN_KEY)
        admin_page.goto(f"{api.url}/console/#/guardrails")
        admin_page.wait_for_selector("#guardrails tr[data-guardrail='console-pii']")
        other = console(OTHER_KEY)
        other.goto(f"{api.url}/console/#/guardrails")
        other.wait_for_selector("#decisions")
        theirs = other.inner_text("#decisions")
        tenants_set = other.locator("#guardrails").count()
    finally:
        rt.delete_guardrail("console-block")
        rt.delete_guardrail("console-pii")

    assert refused.status_code == 422
    assert "console-pii v1" in shown
    assert "console-block v1" in shown
    assert "refused input" in shown  # the refused job never existed
    assert job_id in shown
    assert "ann.lee" not in shown  # what matched is never shown
    assert "personal data: email (1)" in shown
    assert "console-pii" not in theirs  # another tenant's decisions are not listed
    assert tenants_set == 0  # only admins are shown the guardrails set


def test_keyboard_only_labels_and_contrast(api, console, history):
    page = console(None, sign_in=False)
    for _ in range(8):  # bounded: the key field is among the first stops
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.id") == "key":
            break
    page.keyboard.type(BULK_KEY)
    page.keyboard.press("Enter")
    page.wait_for_function("() => document.body.dataset.jobsReady === '1'")
    for _ in range(40):
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.id") == "job-search":
            break
    page.keyboard.type("Report number 999 ")
    for _ in range(40):
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.getAttribute('href') || ''").startswith("#/jobs/"):
            break
    page.keyboard.press("Enter")
    page.wait_for_url("**#/jobs/job-hist0999")
    page.wait_for_selector("#dag[data-ready='1']")

    assert page.evaluate(UNLABELLED) == []
    routes = ("#/jobs", f"#/jobs/{WIDE_JOB}", "#/catalog", "#/usage", "#/guardrails", "#/sessions",
              "#/knowledge", "#/evals", "#/experiments")  # fmt: skip
    for route in routes:
        page.goto(f"{api.url}/console/{route}")
        page.wait_for_selector("main h1 >> visible=true")
        page.wait_for_timeout(300)  # bounded settle for the view's first fetch
        assert page.evaluate(LOW_CONTRAST) == [], route
        assert page.evaluate(UNLABELLED) == [], route
