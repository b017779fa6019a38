"""The gate every HTTP request passes: request id, body size, API key, rate limit.

Plain ASGI middleware, so that an oversize body is refused while it streams in (not after it
was read whole) and so that every response, errors included, carries ``X-Request-ID``.
"""

from __future__ import annotations

import math
import re
import time
import uuid
from dataclasses import dataclass
from typing import Final

import structlog
from limits import RateLimitItem, parse
from limits.aio.storage import MemoryStorage
from limits.aio.strategies import MovingWindowRateLimiter
from starlette.datastructures import Headers, MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from raytroupe.deployments.config import APIConfig, APIKey
from raytroupe.deployments.keys import KeyRing
from raytroupe.deployments.problems import problem

__all__ = ["OPEN_PATHS", "Guard", "Principal", "principal_of", "request_id_of"]

log = structlog.get_logger("raytroupe.http")

OPEN_PATHS: Final = frozenset({"/healthz", "/readyz", "/openapi.json", "/docs", "/redoc"})
"""Paths served without a key: health probes and the API's own description."""
OPEN_PREFIX: Final = "/console/"
"""The console's static files: served without a key (the page asks for one; it holds no data)."""
_REQUEST_ID: Final = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")


@dataclass(frozen=True)
class Principal:
    """Who is calling: the key's name, its tenant, and whether it may manage teams."""

    name: str
    tenant: str
    admin: bool
    rate: RateLimitItem


def principal_of(scope: Scope) -> Principal:
    """The caller of a request that passed the guard."""
    found: Principal = scope["state"]["principal"]
    return found


def request_id_of(scope: Scope) -> str:
    """The id of a request that passed the guard."""
    found: str = scope["state"]["request_id"]
    return found


class Guard:
    """ASGI middleware enforcing :class:`APIConfig` in front of the application."""

    def __init__(self, app: ASGIApp, config: APIConfig, keys: list[APIKey]) -> None:
        self._app = app
        self._config = config
        self._keys = KeyRing(keys)
        self._default_rate = parse(config.rate_limit)
        self._rates = {k.name: parse(k.rate_limit) for k in keys if k.rate_limit}
        self._limiter = MovingWindowRateLimiter(MemoryStorage())

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Refuse the request, or pass it on with its request id and caller in its state."""
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        offered = headers.get("x-request-id", "")
        if offered and not _REQUEST_ID.match(offered):
            # refused rather than replaced: Serve's proxy echoes whatever id the client sent,
            # so a replacement would differ from the id on the response
            await problem(
                400,
                "Bad Request",
                "X-Request-ID must be 1 to 128 characters of A-Z, a-z, 0-9 and '._:-'",
                code="invalid_request_id",
            )(scope, receive, send)
            return
        request_id = offered or uuid.uuid4().hex
        scope.setdefault("state", {})["request_id"] = request_id

        async def send_with_id(message: Message) -> None:
            # Serve's proxy puts its request id (the client's, else a new one) on the request
            # and echoes it on the response itself: add it only where none came in
            if message["type"] == "http.response.start" and not offered:
                MutableHeaders(scope=message)["X-Request-ID"] = request_id
            await send(message)

        with structlog.contextvars.bound_contextvars(request_id=request_id):
            refusal = await self._refusal(scope, headers, request_id)
            if refusal is not None:
                await refusal(scope, receive, send_with_id)
                return
            await self._pass_on(scope, receive, send_with_id, request_id)

    async def _refusal(self, scope: Scope, headers: Headers, request_id: str) -> ASGIApp | None:
        declared = headers.get("content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > self._limit):
            return self._too_large(request_id)
        route = _route(scope)
        if route in OPEN_PATHS or route == OPEN_PREFIX[:-1] or route.startswith(OPEN_PREFIX):
            return None
        principal = self._authenticate(headers)
        if principal is None:
            if self._config.anonymous_tenant is None or _presented(headers):
                return problem(
                    401,
                    "Unauthorized",
                    "a valid API key is required: 'Authorization: Bearer <key>' or 'X-API-Key'",
                    code="unauthorized",
                    request_id=request_id,
                    headers={"WWW-Authenticate": 'Bearer realm="raytroupe"'},
                )
            client = scope.get("client") or ("unknown", 0)
            principal = Principal(
                name=f"anonymous@{client[0]}",
                tenant=self._config.anonymous_tenant,
                admin=False,
                rate=self._default_rate,
            )
        scope["state"]["principal"] = principal
        if not await self._limiter.hit(principal.rate, principal.name):
            stats = await self._limiter.get_window_stats(principal.rate, principal.name)
            retry_after = max(1, math.ceil(stats.reset_time - time.time()))
            log.info("rate_limited", key=principal.name, retry_after_s=retry_after)
            return problem(
                429,
                "Too Many Requests",
                f"rate limit {principal.rate} exceeded for key {principal.name!r}",
                code="rate_limited",
                request_id=request_id,
                headers={"Retry-After": str(retry_after)},
                retry_after_s=retry_after,
            )
        return None

    def _authenticate(self, headers: Headers) -> Principal | None:
        presented = _presented(headers)
        key = None if presented is None else self._keys.find(presented)
        if key is None:
            return None
        rate = self._rates.get(key.name, self._default_rate)
        return Principal(name=key.name, tenant=key.tenant, admin=key.admin, rate=rate)

    @property
    def _limit(self) -> int:
        return self._config.max_body_bytes

    def _too_large(self, request_id: str) -> ASGIApp:
        return problem(
            413,
            "Content Too Large",
            f"request bodies are limited to {self._limit} bytes",
            code="body_too_large",
            request_id=request_id,
        )

    async def _pass_on(self, scope: Scope, receive: Receive, send: Send, request_id: str) -> None:
        """Run the app; a body that grows past the limit while it streams in gets a 413.

        The app then reads a disconnect, and whatever it answers is dropped: the client has
        its 413 already.
        """
        seen = 0
        refused = False

        async def capped() -> Message:
            nonlocal seen, refused
            if refused:
                return {"type": "http.disconnect"}
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self._limit:
                    refused = True
                    log.info("body_too_large", bytes=seen)
                    await self._too_large(request_id)(scope, receive, send)
                    return {"type": "http.disconnect"}
            return message

        async def guarded_send(message: Message) -> None:
            if not refused:
                await send(message)

        await self._app(scope, capped, guarded_send)


def _route(scope: Scope) -> str:
    """The request's path inside the application (without Serve's route prefix)."""
    path: str = scope["path"]
    root: str = scope.get("root_path", "")
    return path[len(root) :] if root and path.startswith(root) else path


def _presented(headers: Headers) -> str | None:
    authorization = headers.get("authorization", "")
    scheme, _, token = authorization.partition(" ")
    if scheme.lower() == "bearer" and token.strip():
        return token.strip()
    key = headers.get("x-api-key", "").strip()
    return key or None
