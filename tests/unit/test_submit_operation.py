"""Starting a job, declared once: ``submit`` over HTTP, its clients, the driver and a tenant's
view reach the control plane with the same job; the caller's tenant and name are recorded;
an HTTP request's id and ``traceparent`` go with the job; a team given as data never names
shipped code; an empty job never reaches the desk. Against a real Ray and Serve:
test_http_api.py, test_http_client_against_serve.py, test_shipped_tools.py."""

from __future__ import annotations

import pytest
from surfaces import ADMIN, USER, Driver, over_http, sent

from raytroupe.protocols import AgentSpec, Forbidden, InvalidInput, TeamSpec
from raytroupe.protocols.http import JobAccepted
from raytroupe.runtime.blocking import Portal
from raytroupe.runtime.driver import Runtime
from raytroupe.runtime.operations import submit as submit_ops
from raytroupe.runtime.tenant import TenantView

TEAM = TeamSpec(name="lab", agents=[AgentSpec(name="ada", role="researcher")])
TRACE = "00-" + "a" * 32 + "-" + "b" * 16 + "-01"
SHIPPED = {"name": "lab", "agents": [{"name": "ada", "role": "r", "tools": ["f"]}],
           "functions": {"f": "sha256:" + "0" * 64}}  # fmt: skip


class Desk:
    """The desk's submit, recorded: each job's id is its number."""

    def __init__(self):
        self.jobs = []

    async def submit(self, order, submitter):
        self.jobs.append({**dict(order), **dict(submitter)})
        return f"job-{len(self.jobs)}"

    async def status(self, job_id, *, tenant=None):  # noqa: ARG002 - a handle checks its job
        return "pending"


def test_every_surface_starts_the_same_job_for_its_caller():
    async def over(client):
        return await client.submit(
            "sum it", TEAM, skill="adder@2", input={"a": 1}, budget={"tokens": 100},
            attachments=[{"name": "n.txt", "media_type": "text/plain", "data_b64": "eA=="}],
            session="chat-1",
        )  # fmt: skip

    desk = Desk()
    accepted = over_http(desk, USER, over)
    assert accepted == JobAccepted(
        id="job-1", status="pending", url="/v1/jobs/job-1", events_url="/v1/jobs/job-1/events"
    )
    (job,) = desk.jobs
    assert (job["tenant"], job["admin"], job["by"]) == ("acme", False, "user")
    assert (job["skill"], job["input"], job["session"]) == ("adder@2", {"a": 1}, "chat-1")
    assert job["team"] == TEAM
    assert job["budget"].tokens == 100
    assert [a.name for a in job["attachments"]] == ["n.txt"]

    in_process = Desk()
    Driver(in_process, admin=False).submit(
        "sum it", TEAM, skill="adder@2", input={"a": 1}, budget={"tokens": 100},
        attachments=[{"name": "n.txt", "media_type": "text/plain", "data_b64": "eA=="}],
        session="chat-1",
    )  # fmt: skip
    (same,) = in_process.jobs
    assert {k: v for k, v in same.items() if k not in {"by", "request_id"}} == {
        k: v for k, v in job.items() if k not in {"by", "request_id"}
    }


def test_over_http_the_request_id_and_traceparent_go_with_the_job_and_location_says_where():
    desk = Desk()
    headers = {"traceparent": TRACE, "X-Request-Id": "req-submit-1"}
    body = {"task": "t", "team": "lab", "session_id": "s"}
    (answer,) = sent(desk, [("POST", "/v1/jobs", {"json": body, "headers": headers})])
    assert (answer.status_code, answer.headers["Location"]) == (202, "/v1/jobs/job-1"), answer.text
    (job,) = desk.jobs
    assert (job["traceparent"], job["request_id"]) == (TRACE, "req-submit-1")
    assert (job["team"], job["session"], job["admin"], job["by"]) == ("lab", "s", True, "boss")


@pytest.mark.parametrize(
    ("arguments", "error"),
    [
        ({"task": "  "}, InvalidInput),
        ({"task": "t", "team": SHIPPED}, Forbidden),
        ({"task": "t", "team": ""}, InvalidInput),
        ({"task": "t", "skill": "s" * 82}, InvalidInput),
        ({"task": "t", "session": "../x"}, InvalidInput),
        ({"task": "x" * 200_001}, InvalidInput),
    ],
)
def test_a_job_that_cannot_start_never_reaches_the_desk(arguments, error):
    desk = Desk()
    with pytest.raises(error):
        Driver(desk, admin=True).submit(**arguments)

    async def over(client):
        with pytest.raises(error):
            await client.submit(**arguments)

    over_http(desk, ADMIN, over)
    assert desk.jobs == []


def test_the_drivers_and_a_tenants_submit_are_marked_and_take_every_parameter():
    assert Runtime.submit.widens is submit_ops.submit  # type: ignore[attr-defined]
    assert TenantView.submit.handle_of is submit_ops.submit  # type: ignore[attr-defined]
    desk = Desk()
    portal = Portal()
    try:
        view = TenantView("acme", desk, portal)
        handle = view.submit("t", "lab", session="s")
    finally:
        portal.close()
    assert handle.job_id == "job-1"
    (job,) = desk.jobs
    assert (job["tenant"], job["admin"], job["by"], job["session"]) == (
        "acme",
        False,
        "driver",
        "s",
    )


def test_the_http_clients_older_session_id_keyword_still_works_and_warns():
    desk = Desk()

    async def over(client):
        with pytest.warns(DeprecationWarning, match=r"submit\(session=\.\.\.\)"):
            return await client.submit("t", session_id="chat-9")

    over_http(desk, USER, over)
    assert desk.jobs[0]["session"] == "chat-9"
