"""The console's pages for evals, experiments, sessions, knowledge and a graph's checkpoints,
in a real headless Chromium against the real Serve application on 127.0.0.1.

Each test makes its data through the HTTP API as a tenant (or the operator) would, opens the
page signed in with a key, and reads what the page shows; then another tenant's key is shown
none of it. Screenshots as in ``test_console_browser.py`` (``TROUPE_SCREENSHOTS=<dir>``).
Names registered here (skills, teams) are the session's: each starts with ``cpages-``.
"""

from __future__ import annotations

import time

import httpx
import pytest

from raytroupe import runtime
from raytroupe.protocols import AgentSpec, ScriptedModel, ScriptedTurn, TeamSpec
from raytroupe.protocols.graph import GraphSpec
from tests.support.browser import headless_browser
from tests.support.console import LOW_CONTRAST, UNLABELLED, console_tabs, shot
from tests.support.graph_specs import CHAIN
from tests.support.http_api import ADMIN_KEY, OTHER_KEY, USER_KEY, finished, register

pytestmark = pytest.mark.system  # system tier: a headless Chromium

WAIT_MS = 120_000  # a loaded 2-core machine: generous, and bounded
MAX_JOBS = 60
"""Jobs the experiment's test submits at most before it gives up on a decision."""
SUCCEEDED = "[data-testid=job-status][data-status=succeeded]"
CODE = r"\b\d*22\b"
"""The right code of a notes request ends in 22 (see ``_request``)."""


@pytest.fixture(scope="module")
def browser():
    with headless_browser() as chromium:
        yield chromium


@pytest.fixture(scope="module")
def shots(tmp_path_factory):
    return tmp_path_factory.mktemp("console-pages-shots")


@pytest.fixture
def console(api, browser):
    """``console(key)``: a fresh tab signed in with ``key``; its errors are checked at the end."""
    with console_tabs(browser, api.url) as open_tab:
        yield open_tab


def _open(page, api, route: str) -> None:
    page.goto(f"{api.url}/console/{route}")


def _accessible(page) -> None:
    """Every control labelled, every text legible (WCAG AA contrast) on the page as it is."""
    assert page.evaluate(UNLABELLED) == []
    assert page.evaluate(LOW_CONTRAST) == []


def _texts(page, selector: str) -> list[str]:
    return [
        t.strip() for t in page.eval_on_selector_all(selector, "es => es.map(e => e.innerText)")
    ]


def _data(page, selector: str, *keys: str) -> list:
    """Each element's ``data-<key>`` (a list of them for several keys)."""
    picked = ", ".join(f"e.dataset.{k}" for k in keys)
    script = f"es => es.map(e => {picked if len(keys) == 1 else f'[{picked}]'})"
    return page.eval_on_selector_all(selector, script)


def _request(k: int) -> str:
    """The k-th notes request (as ``examples/ab_experiment.py``): its code is in the beta note
    (even k) or the delta note (odd k)."""
    if k % 2 == 0:
        return f"Alpha note: code {k}11. Beta note: code {k}22. Gamma note: code {k}33."
    return f"Alpha note: code {k}11. Gamma note: code {k}33. Delta note: code {k}22."


def _put_notes_skill(api, name: str, *, gate: bool) -> None:
    """A direct skill whose offline answer is the two notes sharing most words with its prompt:
    version 2 (beta and delta notes) is always right, version 1 (alpha and beta) on even
    requests only; 1 is current. ``gate``: a wrong code fails the job (what an experiment's
    'success' metric counts)."""
    gated = {"quality_gate": {"regex": [{"pattern": CODE, "message": "not the code"}],
                              "max_retries": 0}} if gate else {}  # fmt: skip
    with api.client(ADMIN_KEY) as admin:
        for version, notes in (("2", "beta and delta"), ("1", "alpha and beta")):
            skill = {"name": name, "version": version, "description": "The right note's code.",
                     "execution_mode": "direct",
                     "prompt": {"instructions": f"Read the {notes} notes."}, **gated}  # fmt: skip
            response = admin.put(f"/v1/skills/{name}", json=skill)
            assert response.status_code in (200, 201), response.text


def _plain_team(name: str) -> runtime.Team:
    return runtime.Team(
        name=name, planner_model="offline",
        agents=[runtime.AgentSpec(name=f"{name}-ada", role="assistant",
                                  memory=runtime.MemoryPolicy(recall=False))],
    )  # fmt: skip


def _submit(client: httpx.Client, **job: object) -> str:
    response = client.post("/v1/jobs", json=job)
    assert response.status_code == 202, response.text
    return str(response.json()["id"])


# ---------------------------------------------------------------------------- evals


def _eval_run(client: httpx.Client, suite: dict[str, object], skill: str) -> dict[str, object]:
    started = client.post("/v1/evals", json={"suite": suite, "skill": skill, "concurrency": 2})
    assert started.status_code == 202, started.text
    run: dict[str, object] = {}
    for _ in range(4):  # bounded: 4 long polls of at most 60 s
        run = client.get(started.json()["url"], params={"wait": 60}).json()
        if run["status"] != "running":
            break
    assert run["status"] == "finished", run
    return run


def test_eval_runs_show_their_scores_cases_and_a_comparison(api, console, shots):
    _put_notes_skill(api, "cpages-notes", gate=False)
    expect = [{"kind": "regex", "pattern": CODE}]
    cases = [{"id": f"note-{k}", "task": _request(k), "expect": expect} for k in range(4)]
    suite = {"name": "cpages-notes-suite", "cases": cases}
    with api.client(USER_KEY) as user:
        base = _eval_run(user, suite, "cpages-notes@1")
        better = _eval_run(user, suite, "cpages-notes@2")
    assert (base["score"], better["score"]) == (0.5, 1.0)  # version 1 misses the odd requests

    page = console(USER_KEY)
    _open(page, api, f"#/evals/{base['id']}")
    page.wait_for_selector("#eval-cases tbody tr[data-case-id]", timeout=WAIT_MS)
    statuses = _data(page, "#eval-cases tbody tr", "caseId", "status")
    assert sorted(statuses) == [["note-0", "passed"], ["note-1", "failed"], ["note-2", "passed"],
                                ["note-3", "failed"]]  # fmt: skip
    assert page.text_content("[data-testid=eval-score]") == "0.500"
    assert "null" not in page.inner_text("#eval-run")
    assert "skill:cpages-notes@1" in page.inner_text("#eval-run")
    page.wait_for_selector(f"#eval-runs-table tr[data-run-id='{better['id']}']")
    listed = {run_id: page.inner_text(f"#eval-runs-table tr[data-run-id='{run_id}']")
              for run_id in (base["id"], better["id"])}  # fmt: skip
    assert "0.500" in listed[base["id"]]
    assert "1.000" in listed[better["id"]]
    assert "100%" in listed[better["id"]]  # its pass rate

    page.select_option("#compare-base", base["id"])
    page.select_option("#compare-other", better["id"])
    page.click("#compare-evals button[type=submit]")
    page.wait_for_selector("#eval-diffs", timeout=WAIT_MS)
    diffs = _data(page, "#eval-diffs tbody tr", "caseId")
    assert sorted(diffs) == ["note-1", "note-3"]
    assert _texts(page, "#eval-diffs tbody tr td:last-child") == ["+1.000", "+1.000"]
    assert page.text_content("[data-testid=compare-counts]") == "2 / 0 / 2"
    assert page.text_content("[data-testid=compare-mean]") == "+0.500"
    _accessible(page)
    page.evaluate("window.scrollTo(0, 0)")
    shot(page, shots, "console-evals")

    other = console(OTHER_KEY)  # another tenant: neither listed nor readable
    _open(other, api, "#/evals")
    other.wait_for_selector("#eval-runs-table", timeout=WAIT_MS)
    assert other.locator(f"tr[data-run-id='{base['id']}']").count() == 0
    assert other.locator(f"option[value='{base['id']}']").count() == 0
    _open(other, api, f"#/evals/{base['id']}")
    problem = other.wait_for_selector("#eval-run [data-testid=problem]", timeout=WAIT_MS)
    assert "not_found" in problem.text_content()
    assert other.locator("#eval-cases").count() == 0


# ---------------------------------------------------------------------------- experiments


def test_an_experiment_shows_its_arms_samples_and_decision_to_admins_only(api, console, shots):
    _put_notes_skill(api, "cpages-ab", gate=True)
    spec = {"name": "cpages-ab-test", "skill": "cpages-ab", "samples_per_arm": 5,
            "arms": [{"version": "1"}, {"version": "2"}]}  # fmt: skip
    with api.client(ADMIN_KEY) as admin, api.client(USER_KEY) as user:
        started = admin.post("/v1/experiments", json=spec)
        assert started.status_code == 201, started.text
        info = started.json()
        horizon, sent = info["samples_per_arm"], 0
        while info["status"] == "running" and sent < MAX_JOBS:
            # odd requests only: version 1 fails every one, version 2 none (5 against 5)
            wave = [_submit(user, skill="cpages-ab", task=_request(2 * (sent + n) + 1))
                    for n in range(6)]  # fmt: skip
            for job_id in wave:
                finished(user, job_id)
            sent += len(wave)
            info = admin.get("/v1/experiments/cpages-ab-test").json()
            deadline = time.monotonic() + 10  # at the horizon, the desk decides within a second
            while (info["status"] == "running" and time.monotonic() < deadline
                   and min(a["sample"] for a in info["arms"]) >= horizon):  # fmt: skip
                time.sleep(0.2)
                info = admin.get("/v1/experiments/cpages-ab-test").json()
    assert info["status"] == "decided", f"no decision after {sent} jobs: {info['arms']}"
    assert info["decision"]["winner"] == "2"

    page = console(ADMIN_KEY)
    _open(page, api, "#/experiments/cpages-ab-test")
    page.wait_for_selector("#experiment-arms tbody tr[data-version]", timeout=WAIT_MS)
    assert page.text_content("[data-testid=experiment-status]") == "decided"
    arms = {v: page.inner_text(f"#experiment-arms tr[data-version='{v}']") for v in ("1", "2")}
    assert "1 (control)" in arms["1"]
    # success rates: version 1 failed the gate on every odd request, version 2 on none
    assert _texts(page, "#experiment-arms tbody tr td:nth-child(5)") == ["0%", "100%"]
    assert _texts(page, "#experiment-arms tbody tr .sample") == ["5 / 5", "5 / 5"]
    assert page.text_content("[data-testid=experiment-decision]").startswith("Version 2 wins.")
    compared = page.inner_text("#experiment-comparisons tr[data-version='2']")
    assert "+1.000" in compared
    assert "yes" in compared  # significant
    listed = page.wait_for_selector("#experiments tr[data-experiment='cpages-ab-test']")
    assert "version 2 wins" in listed.inner_text()
    _accessible(page)
    shot(page, shots, "console-experiments")

    user_page = console(USER_KEY)  # a tenant's key: no link, a refusal, and no request made
    asked: list[str] = []
    user_page.on("request", lambda r: asked.append(r.url) if "/v1/experiments" in r.url else None)
    assert user_page.locator("nav a", has_text="Experiments").count() == 0
    _open(user_page, api, "#/experiments/cpages-ab-test")
    problem = user_page.wait_for_selector("[data-testid=problem]", timeout=WAIT_MS)
    assert "forbidden" in problem.text_content()
    assert user_page.locator("#experiment-arms").count() == 0
    assert asked == []


# ---------------------------------------------------------------------------- sessions

FACT = "Please remember that my sister Marguerite lives in Lyon."
QUESTION = "In which city does my sister live?"


def test_a_sessions_turns_are_shown_to_its_tenant_only(api, console, shots):
    team = register(api, _plain_team("cpages-chat"))
    session = "cpages-chat-1"
    with api.client(USER_KEY) as user:
        made = user.post("/v1/sessions", json={"id": session, "title": "Family facts"})
        assert made.status_code == 201, made.text
        try:
            jobs = []
            for task in (FACT, QUESTION):
                jobs.append(_submit(user, team=team, task=task, session_id=session))
                assert finished(user, jobs[-1])["status"] == "succeeded"

            page = console(USER_KEY)
            _open(page, api, f"#/sessions/{session}")
            page.wait_for_selector("#session-turns tbody tr[data-seq]", timeout=WAIT_MS)
            turns = _data(page, "#session-turns tbody tr", "seq", "jobId", "status")
            assert turns == [["1", jobs[0], "succeeded"], ["2", jobs[1], "succeeded"]]
            tasks = _texts(page, "#session-turns tbody tr td:nth-child(2)")
            assert tasks == [FACT, QUESTION]
            assert "Lyon" in _texts(page, "#session-turns tbody tr td:nth-child(4)")[1]
            assert "null" not in page.inner_text("#session")
            listed = page.wait_for_selector(f"#sessions tr[data-session-id='{session}']")
            assert "Family facts" in listed.inner_text()
            _accessible(page)
            shot(page, shots, "console-sessions")
            page.click(f"#session-turns tr[data-seq='2'] a[href='#/jobs/{jobs[1]}']")
            page.wait_for_selector(SUCCEEDED, timeout=WAIT_MS)

            other = console(OTHER_KEY)
            _open(other, api, "#/sessions")
            other.wait_for_selector("#sessions", timeout=WAIT_MS)
            assert other.locator(f"tr[data-session-id='{session}']").count() == 0
            _open(other, api, f"#/sessions/{session}")
            problem = other.wait_for_selector("#session [data-testid=problem]", timeout=WAIT_MS)
            assert "session_not_found" in problem.text_content()
            assert "Marguerite" not in other.content()
        finally:  # the tenant's sessions list is other tests' too
            user.delete(f"/v1/sessions/{session}")


# ---------------------------------------------------------------------------- knowledge

DOCUMENTS = {
    "cpages/lighthouse.txt": "The Harrow Point lighthouse was built in 1871. Its lamp was "
    "automated in 1989, and the last keeper left that spring. The tower is 31 metres tall.",
    "cpages/sourdough.md": "# Sourdough\n\nFeed the starter twice a day with equal weights of "
    "flour and water. A loaf proves for twelve hours in a cool kitchen.",
}


def test_a_knowledge_bases_documents_are_listed_and_searched(api, console, shots):
    kb = "cpages-kb"
    documents = [{"source": source, "content": text,
                  "media_type": "text/markdown" if source.endswith(".md") else "text/plain"}
                 for source, text in DOCUMENTS.items()]  # fmt: skip
    with api.client(USER_KEY) as user:
        made = user.post(f"/v1/knowledge/{kb}/documents", json={"documents": documents})
        assert made.status_code == 200, made.text
        try:
            page = console(USER_KEY)
            _open(page, api, f"#/knowledge/{kb}")
            page.wait_for_selector("#kb-documents tbody tr[data-source]", timeout=WAIT_MS)
            sources = _data(page, "#kb-documents tbody tr", "source")
            assert sources == sorted(DOCUMENTS)
            assert "text/markdown" in page.inner_text("#kb-documents tr[data-source$='.md']")
            page.wait_for_selector(f"#knowledge-bases tr[data-kb='{kb}']")
            page.fill("#kb-query", "When was the lighthouse lamp automated?")
            page.fill("#kb-k", "2")
            page.click("#kb-search button[type=submit]")
            page.wait_for_selector("#kb-passages tbody tr[data-source]", timeout=WAIT_MS)
            found = _data(page, "#kb-passages tbody tr", "source")
            assert found[0] == "cpages/lighthouse.txt"
            assert len(found) <= 2
            assert "1989" in _texts(page, "#kb-passages tbody tr td:last-child")[0]
            _accessible(page)
            shot(page, shots, "console-knowledge")

            other = console(OTHER_KEY)
            _open(other, api, "#/knowledge")
            other.wait_for_selector("#knowledge-bases", timeout=WAIT_MS)
            assert other.locator(f"tr[data-kb='{kb}']").count() == 0
            _open(other, api, f"#/knowledge/{kb}")
            problem = other.wait_for_selector(
                "#kb-documents-section [data-testid=problem]", timeout=WAIT_MS
            )
            assert "not_found" in problem.text_content()
            assert "cpages/lighthouse.txt" not in other.content()
        finally:  # the tenant's knowledge bases are other tests' too
            user.delete(f"/v1/knowledge/{kb}")


# ---------------------------------------------------------------------------- checkpoints


def _chain_team(name: str) -> TeamSpec:
    """One agent per node, on scripted models: a fork from superstep 1 runs two and three again."""
    answers = {"first": ("ONE",), "middle": ("TWO", "TWO again"), "last": ("THREE", "THREE again")}
    return TeamSpec(
        name=name, planner_model="offline", graph=GraphSpec.model_validate(CHAIN),
        agents=tuple(AgentSpec(name=f"{name}-{role}", role=role, model=f"{name}-{role}",
                               memory=runtime.MemoryPolicy(recall=False)) for role in answers),
        models={f"{name}-{role}": ScriptedModel(turns=tuple(ScriptedTurn(text=t) for t in texts))
                for role, texts in answers.items()},
    )  # fmt: skip


def test_a_graph_jobs_checkpoints_fork_a_new_job_from_its_page(api, console, shots):
    team = _chain_team("cpages-graph")
    with api.client(ADMIN_KEY) as admin:
        put = admin.put(f"/v1/teams/{team.name}", json=team.model_dump(mode="json"))
        assert put.status_code in (200, 201), put.text
    plain = register(api, _plain_team("cpages-plain"))
    with api.client(USER_KEY) as user:
        job_id = _submit(user, team=team.name, task="count")
        plain_id = _submit(user, team=plain, task="Say hello.")
        assert finished(user, job_id)["status"] == "succeeded"
        finished(user, plain_id)

    page = console(USER_KEY)
    _open(page, api, f"#/jobs/{job_id}")
    page.wait_for_selector("#job-checkpoints[data-count] #checkpoints tbody tr", timeout=WAIT_MS)
    steps = _data(page, "#checkpoints tbody tr", "step")
    assert "1" in steps
    first = page.inner_text("#checkpoints tr[data-step='1']")
    assert "two" in first  # the node it runs next
    assert 'log: ["ONE"]' in first  # its state
    forks = _data(page, "#checkpoints button", "step")
    assert forks == steps[:-1]  # the graph's last checkpoint has nothing left to run
    assert "the graph ended here" in page.inner_text(f"#checkpoints tr[data-step='{steps[-1]}']")
    _accessible(page)
    page.locator("#job-checkpoints").scroll_into_view_if_needed()
    shot(page, shots, "console-checkpoints")

    page.click("#checkpoints button[data-step='1']")
    page.wait_for_function(
        f"() => location.hash.startsWith('#/jobs/') && location.hash !== '#/jobs/{job_id}'",
        timeout=WAIT_MS,
    )
    forked_id = page.evaluate("decodeURIComponent(location.hash.slice('#/jobs/'.length))")
    forked_from = page.wait_for_selector("[data-testid=job-forked-from]", timeout=WAIT_MS)
    assert forked_from.inner_text() == f"Forked from {job_id} at superstep 1."
    page.wait_for_selector(SUCCEEDED, timeout=WAIT_MS)
    with api.client(USER_KEY) as user:
        forked = user.get(f"/v1/jobs/{forked_id}").json()
    assert forked["result"]["state"]["log"] == ["ONE", "TWO again", "THREE again"]
    assert [s["id"] for s in forked["result"]["subtasks"]] == ["two.2", "three.3"]
    page.click(f"[data-testid=job-forked-from] a[href='#/jobs/{job_id}']")  # back to the original
    page.wait_for_selector("#checkpoints tbody tr", timeout=WAIT_MS)

    _open(page, api, f"#/jobs/{plain_id}")  # not a graph's job: no checkpoints section
    page.wait_for_selector("#job-checkpoints[data-count='0']", state="attached", timeout=WAIT_MS)
    assert page.locator("#job-checkpoints").is_hidden()


# ---------------------------------------------------------------------------- spend windows


def test_the_usage_page_shows_each_spend_windows_spend_against_its_limit(api, console, shots):
    """The session's operator limits each end user of acme to 1 token a day, alerts only
    (``acme-per-user`` in tests/support/keys.py): a job for a user spends past it."""
    team = register(api, _plain_team("cpages-spend"))
    with api.client(USER_KEY) as user:
        job_id = _submit(user, team=team, task="Say hello to Ann.", user="cpages-ann")
        assert finished(user, job_id)["status"] == "succeeded"

    page = console(USER_KEY)
    _open(page, api, "#/usage")
    row = "#spend-windows tr[data-limit='acme-per-user'][data-user='cpages-ann']"
    page.wait_for_selector(row, timeout=WAIT_MS)
    with api.client(USER_KEY) as user:
        (window,) = [w for w in user.get("/v1/spend-windows").json()
                     if w["limit"] == "acme-per-user" and w["user"] == "cpages-ann"]  # fmt: skip
    cells = _texts(page, f"{row} > *")
    assert cells[:4] == ["acme-per-user", "tenant acme · user cpages-ann", "day (UTC)",
                         window["period"]]  # fmt: skip
    tokens, of_limit = cells[4].split(" of ")
    assert 0 < int(tokens.replace(",", "")) <= window["tokens"]
    assert of_limit.startswith("1 (")  # the limit: 1 token
    assert cells[4].endswith("over")  # past it: alerts only, the job went on
    assert page.locator(f"{row} [data-measure=tokens] meter").count() == 1
    assert cells[5].endswith("(not limited)")  # no limit in dollars
    assert cells[6:] == ["100%", "alerts only (soft)"]
    assert page.locator("#spend-windows tbody tr:not([data-tenant='acme'])").count() == 0
    _accessible(page)
    shot(page, shots, "console-usage-spend")

    other = console(OTHER_KEY)  # globex has no limit, and sees none of acme's
    _open(other, api, "#/usage")
    other.wait_for_selector("#spend-windows", timeout=WAIT_MS)
    assert other.inner_text("#spend-windows tbody") == "No spend limit applies to this tenant."
    admin = console(ADMIN_KEY)  # an admin: every tenant's limits
    _open(admin, api, "#/usage")
    admin.wait_for_selector(row, timeout=WAIT_MS)
    tenants = _data(admin, "#spend-windows tbody tr", "tenant")
    assert len(set(tenants)) > 1
