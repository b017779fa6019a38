"""The declared operations' surfaces without a cluster, for unit tests.

:func:`over_http` runs a call on the real async HTTP client, reaching the real app behind
the real guard over httpx's ASGI transport, with a control plane of the test's behind it;
:class:`Driver` has every declared operation in-process, as the driver's ``Runtime`` does.
"""

from __future__ import annotations

import httpx
from wiring import GUARD_S, run

from raytroupe.deployments.api import create_api
from raytroupe.deployments.config import APIConfig, APIKey
from raytroupe.deployments.guard import Guard
from raytroupe.deployments.keys import hash_key
from raytroupe.runtime.blocking import Portal
from raytroupe.runtime.http_client import AsyncClient
from raytroupe.runtime.operations import At, declared, in_process

ADMIN, USER = "rt-admin-key", "rt-user-key"
"""An admin key and a user key, both of tenant ``acme``."""


def guarded_app(system):
    """The real app behind the real guard, ``system`` behind it; keys ADMIN and USER."""
    config = APIConfig()
    keys = [
        APIKey(name="boss", hash=hash_key(ADMIN), tenant="acme", admin=True),
        APIKey(name="user", hash=hash_key(USER), tenant="acme"),
    ]
    return Guard(create_api(system, config), config, keys)


def over_http(system, key, call):
    """``call(client)`` on an AsyncClient of the real app (``system`` behind it)."""
    app = guarded_app(system)

    async def main():
        transport = httpx.ASGITransport(app=app)
        async with AsyncClient("http://test", key, transport=transport) as client:
            return await call(client)

    return run(main())


def sent(system, requests, key=ADMIN):
    """Each of ``requests`` (method, path, keyword arguments of httpx's ``request``) sent to
    the real app with ``key``, in order; the responses."""
    app = guarded_app(system)

    async def main():
        transport = httpx.ASGITransport(app=app)
        answers = []
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as http:
            for method, path, options in requests:
                headers = {"Authorization": f"Bearer {key}", **options.pop("headers", {})}
                answers.append(await http.request(method, path, headers=headers, **options))
        return answers

    return run(main())


_PORTAL = Portal()
"""The one loop the Drivers' calls run on, as a Runtime's do on its own (a stream lives
there between the reads of its items)."""


class Driver:
    """What a surface made by in_process needs: who calls, and how a coroutine runs."""

    def __init__(self, system, *, admin, tenant="acme"):
        self.at = At(system, tenant=tenant, admin=admin, source="driver")

    def _at(self):
        return self.at

    def _run(self, coroutine):
        return _PORTAL.run(coroutine, GUARD_S)


for _name, _op in declared().items():
    setattr(Driver, _name, in_process(_op))
