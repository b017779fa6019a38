"""The OpenAPI document is faithful enough for generated clients to work.

A client is generated (openapi-python-client, offline) from the live application's
``/openapi.json`` into the test's directory, imported, and used against the real Serve on
127.0.0.1: a job is submitted and read back, teams are listed, an unknown job is a typed 404
problem, a call without a key a 401 one. The document itself is checked for what generators
rely on: security where the gate wants a key, a problem schema on every error answer,
readable unique operation ids, a declared answer on every route.
"""

from __future__ import annotations

import importlib
import shutil
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

import raytroupe
from raytroupe import runtime
from raytroupe.deployments.guard import OPEN_PATHS
from tests.support.http_api import USER_KEY, register

# system tier: a deeper scenario than the quick tier's core (docs/testing.md)
pytestmark = pytest.mark.system

PACKAGE = "raytroupe_generated_api"
PROBLEM = {"$ref": "#/components/schemas/Problem"}
READINESS = {"$ref": "#/components/schemas/Readiness"}
ERRORS = {"400", "401", "403", "404", "409", "413", "422", "429", "500", "503"}


@pytest.fixture(scope="module")
def document(api):
    response = httpx.get(f"{api.url}/openapi.json", timeout=60)
    assert response.status_code == 200
    return response


@pytest.fixture(scope="module")
def generated(document, tmp_path_factory):
    """The generated client package, imported."""
    root = tmp_path_factory.mktemp("generated")
    spec = root / "openapi.json"
    spec.write_bytes(document.content)
    config = root / "config.yaml"
    config.write_text("post_hooks: []\n")  # no formatter runs: the code is only imported
    generator = shutil.which("openapi-python-client", path=str(Path(sys.executable).parent))
    assert generator is not None, "openapi-python-client is a dev dependency"
    done = subprocess.run(
        [generator, "generate", "--path", str(spec), "--output-path", str(root / PACKAGE),
         "--meta", "none", "--config", str(config)],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    sys.path.insert(0, str(root))
    try:
        yield importlib.import_module(PACKAGE)
    finally:
        sys.path.remove(str(root))
        for name in [m for m in sys.modules if m.split(".")[0] == PACKAGE]:
            del sys.modules[name]


def test_a_generated_client_submits_reads_lists_and_gets_typed_problems(api, generated):
    from raytroupe_generated_api.api.jobs import get_job, submit_job  # noqa: PLC0415
    from raytroupe_generated_api.api.operations import get_health  # noqa: PLC0415
    from raytroupe_generated_api.api.teams_and_agents import list_teams  # noqa: PLC0415
    from raytroupe_generated_api.models import (  # noqa: PLC0415
        JobAccepted,
        JobRequest,
        JobView,
        Problem,
    )

    agents = [runtime.AgentSpec(name="openapi-client-a", role="worker")]
    team = register(api, runtime.Team(name="openapi-client", planner_model="offline",
                                      agents=agents))  # fmt: skip
    client = generated.AuthenticatedClient(base_url=api.url, token=USER_KEY, timeout=60.0)
    anonymous = generated.Client(base_url=api.url, timeout=60.0)
    with client, anonymous:
        accepted = submit_job.sync(client=client, body=JobRequest(task="List: - a. - b.",
                                                                  team=team))  # fmt: skip
        assert isinstance(accepted, JobAccepted), accepted
        with raytroupe.Client(api.url, USER_KEY) as ours:
            ours.result(accepted.id)
        view = get_job.sync(job_id=accepted.id, client=client)
        teams = list_teams.sync(client=client)
        missing = get_job.sync_detailed(job_id="no-such-job", client=client)
        unauthorized = get_job.sync_detailed(job_id=accepted.id, client=anonymous)
        health = get_health.sync(client=anonymous)

    assert isinstance(view, JobView)
    assert view.id == accepted.id
    assert view.status == "succeeded"
    assert view.result.answer
    assert team in teams.additional_properties
    assert missing.status_code == 404
    assert isinstance(missing.parsed, Problem)
    assert (missing.parsed.code, missing.parsed.status) == ("job_not_found", 404)
    assert missing.headers["content-type"] == "application/problem+json"
    assert unauthorized.status_code == 401
    assert unauthorized.parsed.code == "unauthorized"
    assert health.status == "ok"


def test_the_document_declares_keys_problems_ids_and_answers(document):
    spec = document.json()
    schemes = spec["components"]["securitySchemes"]
    ids = []
    # two models of one class name get module-qualified schema names, which generators drop
    assert [n for n in spec["components"]["schemas"] if "__" in n] == []

    assert schemes["bearer"] == {**schemes["bearer"], "type": "http", "scheme": "bearer"}
    assert schemes["apiKey"]["name"] == "X-API-Key"
    assert "Problem" in spec["components"]["schemas"]
    assert "HTTPValidationError" not in spec["components"]["schemas"]
    for path, operations in spec["paths"].items():
        for method, operation in operations.items():
            where = f"{method.upper()} {path}"
            ids.append(operation["operationId"])
            responses = operation["responses"]
            if path in OPEN_PATHS:
                assert "security" not in operation, where
            else:
                assert operation["security"] == [{"bearer": []}, {"apiKey": []}], where
                assert set(responses) >= ERRORS, where
            for status, answer in responses.items():
                if (path, status) == ("/readyz", "503"):  # not ready: the readiness itself
                    assert answer["content"]["application/json"]["schema"] == READINESS
                elif int(status) >= 400:
                    assert answer["content"] == {"application/problem+json": {"schema": PROBLEM}}
                elif status != "204" and path != "/v1/chat/completions":  # the OpenAI face's
                    (content,) = answer["content"].values()
                    assert content.get("schema"), where
    assert len(ids) == len(set(ids))
    assert all(i.isidentifier() and "v1" not in i for i in ids)
    assert {"submit_job", "get_job", "list_teams", "stream_job_events"} <= set(ids)
