"""schemathesis against the API's own OpenAPI document: no request makes the server fail.

Every operation gets generated requests (valid and invalid bodies, paths and queries) with a
tenant key; jobs name a registered team, so that fuzzed team definitions do not each spawn
agent actors. Any 5xx fails the test with the request that caused it.

(schemathesis' pytest plugin does not load under pytest 9, so each operation's strategy is
run with hypothesis directly.)
"""

from __future__ import annotations

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings

from raytroupe import runtime
from tests.support.http_api import ADMIN_KEY, FUZZ_KEY

pytestmark = pytest.mark.system  # system tier: schemathesis over every route of the HTTP API

TEAM = "http-fuzz"


@pytest.fixture(scope="module")
def api_schema(api):
    team = runtime.Team(name=TEAM, agents=[runtime.AgentSpec(name="http-fuzz-1", role="worker")])
    with api.client(ADMIN_KEY) as admin:
        response = admin.put(f"/v1/teams/{TEAM}", json=team.spec().model_dump(mode="json"))
        assert response.status_code in {200, 201}, response.text
    return schemathesis.openapi.from_url(f"{api.url}/openapi.json")


def _operations():
    # the document is static: read the operation list from the app without serving it
    from raytroupe.actors.spawn import SystemHandles  # noqa: PLC0415
    from raytroupe.deployments.api import create_api  # noqa: PLC0415
    from raytroupe.deployments.config import APIConfig  # noqa: PLC0415
    from raytroupe.runtime.client import SystemClient  # noqa: PLC0415

    nothing = SystemHandles(
        routers=None, llm=None, desk=None, orchestrators=None, sandboxes=[], memory=None
    )
    unwired = SystemClient(nothing)
    paths = create_api(unwired, APIConfig()).openapi()["paths"]
    return [(method.upper(), path) for path, methods in paths.items() for method in methods]


@pytest.mark.parametrize(("method", "path"), _operations())
def test_no_generated_request_gets_a_server_error(api_schema, method, path):
    operation = api_schema[path][method]
    failures = []

    @given(case=operation.as_strategy())
    @settings(
        max_examples=25,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    )
    def run(case):
        if isinstance(case.body, dict) and case.path == "/v1/jobs":
            case.body["team"] = TEAM
        response = case.call(headers={"Authorization": f"Bearer {FUZZ_KEY}"}, timeout=60)
        if response.status_code >= 500 or "Traceback" in response.text:
            failures.append(f"{case.formatted_path} -> {response.status_code}: {response.text}")
        assert response.status_code < 500, failures[-1][:800]

    run()
    assert not failures
