"""The graph routes of the HTTP API (checkpoints, resume, fork) over a stand-in client.

The app is the real one (routes, bodies, error mapping, the guard's tenant scoping); only the
control plane behind it is a fake that records what it was asked and answers as the
orchestrator's shards would. The routes' work on a real graph is tested with Ray.
"""

import httpx
import pytest
from wiring import run

from raytroupe.deployments.api import create_api
from raytroupe.deployments.config import APIConfig, APIKey
from raytroupe.deployments.guard import Guard
from raytroupe.deployments.keys import hash_key
from raytroupe.protocols import Conflict, InvalidInput, JobNotFound
from raytroupe.protocols.graph_checkpoints import GraphCheckpoint, GraphInterrupt, GraphTask

ALICE = "rt-alice-key"
PROBLEM = "application/problem+json"
PAUSED = GraphInterrupt(id="/2/review/before", node="review", when="before")


class FakeControl:
    """The control plane's graph calls: job ``job-1`` of tenant ``acme`` waits at ``PAUSED``."""

    def __init__(self):
        self.calls = []

    def _find(self, job_id, tenant):
        if job_id != "job-1" or tenant != "acme":
            raise JobNotFound(f"no job {job_id!r}", job_id=job_id)

    async def checkpoints(self, job_id, *, tenant=None):
        self.calls.append(("checkpoints", job_id, tenant))
        self._find(job_id, tenant)
        return [
            GraphCheckpoint(job_id=job_id, step=0, at=1.0, state={"n": 0},
                            next=(GraphTask(node="draft"),)),
            GraphCheckpoint(job_id=job_id, step=2, at=2.0, state={"n": 2},
                            next=(GraphTask(node="review"),), interrupt=PAUSED),
        ]  # fmt: skip

    async def resume(self, job_id, *, value=None, state=None, interrupt=None, tenant=None):
        self.calls.append(("resume", job_id, value, state, interrupt, tenant))
        self._find(job_id, tenant)
        if interrupt not in (None, PAUSED.id):
            raise Conflict(f"job {job_id} is not waiting at interrupt {interrupt!r}")
        if state is not None and "n" in state and not isinstance(state["n"], int):
            problems = ["n: 'x' is not of type 'integer'"]
            raise InvalidInput(f"invalid: {problems[0]}", field="state", problems=problems)
        return PAUSED

    async def fork(self, job_id, step, *, state=None, tenant=None, admin=False):
        self.calls.append(("fork", job_id, step, state, tenant, admin))
        self._find(job_id, tenant)
        if step > 2:
            raise InvalidInput(f"job {job_id} has no checkpoint {step}", field="step")
        return "job-2"


@pytest.fixture
def control():
    return FakeControl()


def _call(control, method, path, **kwargs):
    config = APIConfig()
    keys = [APIKey(name="alice", hash=hash_key(ALICE), tenant="acme")]
    app = Guard(create_api(control, config), config, keys)

    async def main():
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            headers = {"Authorization": f"Bearer {ALICE}"}
            return await client.request(method, path, headers=headers, **kwargs)

    return run(main())


def _problem(response, status, code):
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == PROBLEM
    body = response.json()
    assert body["code"] == code
    return body


def test_checkpoints_are_listed_for_the_callers_tenant(control):
    response = _call(control, "GET", "/v1/jobs/job-1/checkpoints")
    assert response.status_code == 200, response.text
    points = [GraphCheckpoint.model_validate(p) for p in response.json()]
    assert [p.step for p in points] == [0, 2]
    assert points[1].interrupt == PAUSED
    assert control.calls == [("checkpoints", "job-1", "acme")]


def test_another_tenants_or_a_missing_job_is_404(control):
    _problem(_call(control, "GET", "/v1/jobs/job-9/checkpoints"), 404, "job_not_found")
    _problem(_call(control, "POST", "/v1/jobs/job-9/resume", json={}), 404, "job_not_found")
    _problem(_call(control, "POST", "/v1/jobs/job-9/fork", json={"step": 0}), 404,
             "job_not_found")  # fmt: skip


def test_resume_passes_value_state_and_interrupt_and_names_the_interrupt(control):
    body = {"value": {"approved": True}, "state": {"n": 3}, "interrupt": PAUSED.id}
    response = _call(control, "POST", "/v1/jobs/job-1/resume", json=body)
    assert response.status_code == 200, response.text
    assert response.json() == {"job_id": "job-1", "interrupt": PAUSED.model_dump(mode="json")}
    assert control.calls == [("resume", "job-1", {"approved": True}, {"n": 3}, PAUSED.id, "acme")]


def test_resume_with_an_empty_body_resumes_with_nothing(control):
    response = _call(control, "POST", "/v1/jobs/job-1/resume", json={})
    assert response.status_code == 200, response.text
    assert control.calls == [("resume", "job-1", None, None, None, "acme")]


def test_resume_where_nothing_waits_is_409(control):
    response = _call(control, "POST", "/v1/jobs/job-1/resume", json={"interrupt": "/9/x/after"})
    _problem(response, 409, "conflict")


def test_resume_that_leaves_the_state_invalid_is_422_with_its_problems(control):
    response = _call(control, "POST", "/v1/jobs/job-1/resume", json={"state": {"n": "x"}})
    body = _problem(response, 422, "invalid_input")
    assert body["problems"] == ["n: 'x' is not of type 'integer'"]
    assert body["field"] == "state"


@pytest.mark.parametrize(
    "body",
    [{"values": 1}, {"state": [1, 2]}, {"state": "n=1"}, {"interrupt": ""}, {"interrupt": 3}],
)
def test_a_resume_body_off_the_schema_is_refused_before_the_orchestrator(control, body):
    _problem(_call(control, "POST", "/v1/jobs/job-1/resume", json=body), 422, "invalid_request")
    assert control.calls == []


def test_fork_starts_a_job_and_says_where_it_is(control):
    body = {"step": 2, "state": {"n": 5}}
    response = _call(control, "POST", "/v1/jobs/job-1/fork", json=body)
    assert response.status_code == 202, response.text
    assert response.json() == {"job_id": "job-2", "forked_from": "job-1", "step": 2}
    assert response.headers["location"] == "/v1/jobs/job-2"
    assert control.calls == [("fork", "job-1", 2, {"n": 5}, "acme", False)]


def test_fork_from_no_such_checkpoint_is_422(control):
    body = _problem(_call(control, "POST", "/v1/jobs/job-1/fork", json={"step": 7}), 422,
                    "invalid_input")  # fmt: skip
    assert body["field"] == "step"


@pytest.mark.parametrize(
    "body", [{}, {"step": -1}, {"step": "two"}, {"step": 1, "state": []}, {"step": 1, "at": 2}]
)
def test_a_fork_body_off_the_schema_is_refused_before_the_orchestrator(control, body):
    _problem(_call(control, "POST", "/v1/jobs/job-1/fork", json=body), 422, "invalid_request")
    assert control.calls == []


def test_the_graph_routes_are_in_the_openapi_document(control):
    paths = create_api(control, APIConfig()).openapi()["paths"]
    assert set(paths["/v1/jobs/{job_id}/checkpoints"]) == {"get"}
    assert set(paths["/v1/jobs/{job_id}/resume"]) == {"post"}
    assert set(paths["/v1/jobs/{job_id}/fork"]) == {"post"}
    assert "202" in paths["/v1/jobs/{job_id}/fork"]["post"]["responses"]
