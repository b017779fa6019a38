"""The HTTP application deployed on the session Ray, with keys for several callers."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

import httpx

from raytroupe import deployments, runtime
from raytroupe.deployments import APIConfig, APIKey, hash_key
from raytroupe.protocols import Budget, TenantPolicy

if TYPE_CHECKING:
    from tests.support.wire_server import WireServer

ADMIN_KEY = "rt-test-admin-acme"
USER_KEY = "rt-test-user-acme"
OTHER_KEY = "rt-test-user-globex"
LIMITED_KEY = "rt-test-limited"
FUZZ_KEY = "rt-test-fuzz"
RED_KEY = "rt-test-user-red"
BLUE_KEY = "rt-test-user-blue"
RED_POLICY = TenantPolicy(
    models=("default", "offline"),
    tools=("calculator",),
    max_budget=Budget(tokens=200_000),
    max_agents=3,
    max_live_agents=6,
)
"""The adversarial suite's tenant with a policy of its own (set from the API config)."""
BLUE_POLICY = TenantPolicy(teams=("trust-registered",), max_budget=Budget(tokens=1_500))
BULK_KEY = "rt-test-user-bulk"
"""A tenant whose history the console tests fill with 1,000 stored jobs (test_console_*.py)."""
SKILL_KEY = "rt-test-user-skills"
SKILL_POLICY = TenantPolicy(skills=("sentiment", "summarize"), teams=())
"""A tenant that may run two skills and no registered team (test_skills_http.py)."""
REVOKED_KEY = "rt-test-user-revoked"
"""A tenant whose policy its tests set and then narrow, by an admin key (test_readmission.py)."""
MAX_BODY = 256 * 1024


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def team_kept(admin: httpx.Client, name: str) -> Iterator[httpx.Response]:
    """The registered team ``name`` as it is now (a 404 if none); put back as it was after."""
    before = admin.get(f"/v1/teams/{name}")
    try:
        yield before
    finally:  # leave the session's catalog as it was
        if before.status_code == 200:
            admin.put(f"/v1/teams/{name}", json=before.json())
        else:
            admin.delete(f"/v1/teams/{name}")


@dataclass(frozen=True)
class Api:
    """A deployed application and how to call it."""

    url: str

    def client(self, key: str | None = USER_KEY, **headers: str) -> httpx.Client:
        """An httpx client presenting ``key`` (None: no key)."""
        if key is not None:
            headers["Authorization"] = f"Bearer {key}"
        return httpx.Client(base_url=self.url, headers=headers, timeout=60.0)


def config() -> APIConfig:
    return APIConfig(
        api_keys=(
            APIKey(name="acme-admin", hash=hash_key(ADMIN_KEY), tenant="acme", admin=True),
            APIKey(name="acme-user", hash=hash_key(USER_KEY), tenant="acme"),
            APIKey(name="globex-user", hash=hash_key(OTHER_KEY), tenant="globex"),
            APIKey(
                name="limited", hash=hash_key(LIMITED_KEY), tenant="acme", rate_limit="3/minute"
            ),
            APIKey(name="fuzz", hash=hash_key(FUZZ_KEY), tenant="fuzz", rate_limit="100000/minute"),
            APIKey(name="red-user", hash=hash_key(RED_KEY), tenant="red"),
            APIKey(name="blue-user", hash=hash_key(BLUE_KEY), tenant="blue"),
            APIKey(name="skills-user", hash=hash_key(SKILL_KEY), tenant="skillful"),
            APIKey(name="bulk-user", hash=hash_key(BULK_KEY), tenant="bulk"),
            APIKey(name="revoked-user", hash=hash_key(REVOKED_KEY), tenant="revoked"),
        ),
        tenant_policies={"red": RED_POLICY, "blue": BLUE_POLICY, "skillful": SKILL_POLICY},
        api_keys_env=None,
        max_body_bytes=MAX_BODY,
        chat_timeout_s=60.0,
    )


def deploy() -> Api:
    """Deploy on the connected Ray and wait (bounded) until it answers."""
    url = deployments.deploy(port=free_port(), config=config())
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/readyz", timeout=5).status_code == 200:
                return Api(url)
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"the HTTP application at {url} never became ready")


def finished(client: httpx.Client, job_id: str) -> dict[str, object]:
    """The job's view once it has finished: its event stream is read to its last event."""
    with client.stream("GET", f"/v1/jobs/{job_id}/events") as stream:
        for _ in stream.iter_lines():  # the stream ends after the job's last event
            pass
    view: dict[str, object] = client.get(f"/v1/jobs/{job_id}").json()
    return view


def register(api: Api, team: runtime.Team) -> str:
    """Register ``team`` as the operator (an admin key); its name, which a tenant's key runs."""
    with api.client(ADMIN_KEY) as admin:
        response = admin.put(f"/v1/teams/{team.name}", json=team.spec().model_dump(mode="json"))
        assert response.status_code in (200, 201), response.text
    return team.name


def wire_team(server: WireServer, name: str, tools: Sequence[str] = ()) -> runtime.Team:
    """A one-agent team whose model is ``server``'s OpenAI wire endpoint (scripted answers)."""
    model = runtime.OpenAICompatibleModel(base_url=server.base_url_openai, model="wire-http")
    return runtime.Team(
        name=name,
        planner_model="offline",
        models={f"{name}-model": model},
        agents=[runtime.AgentSpec(name=f"{name}-agent", role="worker", model=f"{name}-model",
                                  tools=list(tools))],
    )  # fmt: skip
