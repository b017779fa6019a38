"""The outbound network policy: where the cluster's own HTTP clients may connect.

Every connection a tool (``http_get``) or a model provider opens goes through
:class:`Outbound`: the host is resolved once, every address it resolves to is checked, and the
connection is made to a checked address (so a DNS answer that changes between check and
connect, as in DNS rebinding, changes nothing). By default only public (globally routable)
addresses are allowed: loopback, link-local (cloud metadata, 169.254.169.254), private and
other reserved ranges, and the cluster's own addresses are refused. The operator allows more
with :class:`~raytroupe.protocols.config.network.NetworkPolicy` (a configuration model, kept in
the protocols and re-exported here). Redirects are checked the same way (each hop opens a
connection through the policy), and the model providers' clients refuse to follow a redirect at
all, so a key is only ever sent to the endpoint it was configured with.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Callable, Iterable
from typing import Any, Final, TypeVar
from urllib.parse import urlsplit

from raytroupe.protocols.config.network import NetworkPolicy

__all__ = [
    "NetworkPolicy",
    "Outbound",
    "OutboundRefused",
    "host_of",
]

T = TypeVar("T")

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

_RESOLVE_TIMEOUT_S: Final = 10.0


class OutboundRefused(OSError):
    """The policy refuses a connection.

    An ``OSError``, so that HTTP clients treat it as a failed connect: no byte is sent.
    """


def host_of(url: str) -> str:
    """The host of ``url``, lowercased, without brackets ('' if it has none)."""
    return (urlsplit(url).hostname or "").lower()


def _address(value: str) -> IPAddress | None:
    try:
        address = ipaddress.ip_address(value.split("%", 1)[0])  # drop an IPv6 zone id
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def _split(entries: Iterable[str]) -> tuple[frozenset[str], tuple[IPNetwork, ...]]:
    hosts, networks = set(), []
    for entry in entries:
        try:
            networks.append(ipaddress.ip_network(entry, strict=False))
        except ValueError:
            hosts.add(entry.lower().rstrip("."))
    return frozenset(hosts), tuple(networks)


class Outbound:
    """Checks and makes outbound connections under a :class:`NetworkPolicy`.

    Args:
        policy: the operator's allow and deny lists.
        trusted_hosts: host names the operator configured itself (a model deployment's
            ``base_url``), allowed like ``policy.allow`` entries.
        own_addresses: the cluster's own addresses (its nodes), refused even if public.
    """

    def __init__(
        self,
        policy: NetworkPolicy | None = None,
        *,
        trusted_hosts: Iterable[str] = (),
        own_addresses: Iterable[str] = (),
    ) -> None:
        self.policy = policy or NetworkPolicy()
        hosts, networks = _split(self.policy.allow)
        self._allowed_hosts = hosts | {h.lower() for h in trusted_hosts if h}
        self._allowed_networks = networks
        self._denied = tuple(ipaddress.ip_network(d, strict=False) for d in self.policy.deny)
        self._own = frozenset(a for a in (_address(x) for x in own_addresses) if a is not None)

    def with_trusted(self, hosts: Iterable[str]) -> Outbound:
        """The same policy, trusting more operator-configured hosts."""
        trusted = self._allowed_hosts | {h.lower() for h in hosts if h}
        return Outbound(self.policy, trusted_hosts=trusted, own_addresses=map(str, self._own))

    def host_allowed(self, host: str) -> bool:
        """Whether ``host`` is allowed by name, whatever it resolves to."""
        return host.lower().rstrip(".") in self._allowed_hosts

    def refusal(self, address: str) -> str | None:
        """Why a connection to ``address`` (an IP) is refused, or None if it is allowed."""
        ip = _address(address)
        if ip is None:
            return f"{address!r} is not an IP address"
        if any(ip in network for network in self._allowed_networks):
            return None
        if ip in self._own:
            return f"{ip} is an address of this cluster"
        if any(ip in network for network in self._denied):
            return f"{ip} is on the operator's deny list"
        if not ip.is_global or ip.is_multicast:
            return f"{ip} is not a public address (loopback, link-local, private or reserved)"
        return None

    async def resolve(self, host: str, port: int) -> list[str]:
        """The addresses to connect to for ``host:port``, every one of them allowed.

        Raises:
            OutboundRefused: the host does not resolve, or one of its addresses is refused
                (a name that resolves to a refused address is refused as a whole).
        """
        host = host.strip("[]")
        literal = _address(host)
        if literal is not None:
            addresses = [str(literal)]
        else:
            loop = asyncio.get_running_loop()
            try:
                infos = await asyncio.wait_for(
                    loop.getaddrinfo(host, port, type=socket.SOCK_STREAM), _RESOLVE_TIMEOUT_S
                )
            except (OSError, TimeoutError) as exc:
                raise OutboundRefused(f"cannot resolve {host!r}: {exc}") from None
            addresses = list(dict.fromkeys(str(info[4][0]) for info in infos))
        if self.host_allowed(host):
            return addresses
        for address in addresses:
            why = self.refusal(address)
            if why is not None:
                raise OutboundRefused(f"connection to {host!r} refused: {why}")
        return addresses

    async def check_url(self, url: str) -> None:
        """Refuse ``url`` unless it is http(s) and its host may be reached.

        Raises:
            OutboundRefused: another scheme, no host, or a refused host (see :meth:`resolve`).
        """
        parts = urlsplit(url)
        if parts.scheme not in {"http", "https"} or not parts.hostname:
            raise OutboundRefused(f"only http(s) URLs with a host may be fetched, not {url!r}")
        port = parts.port or (443 if parts.scheme == "https" else 80)
        await self.resolve(parts.hostname, port)

    # -- HTTP clients ---------------------------------------------------------------------

    def httpx_transport(self) -> Any:
        """An ``httpx.AsyncHTTPTransport`` whose every connection passes this policy."""
        import httpcore  # noqa: PLC0415 - each actor imports only the HTTP stack it uses
        import httpx  # noqa: PLC0415

        return self._guard(httpx.AsyncHTTPTransport(trust_env=False), httpcore)

    def httpx2_transport(self) -> Any:
        """The same for ``httpx2`` (what the openai and anthropic SDKs are built on)."""
        import httpcore2  # noqa: PLC0415
        import httpx2  # noqa: PLC0415

        return self._guard(httpx2.AsyncHTTPTransport(trust_env=False), httpcore2)

    def sdk_http_client(self, client_class: Callable[..., T]) -> T:
        """An SDK's HTTP client (``openai.DefaultAsyncHttpxClient``, ...) under this policy.

        It never follows a redirect: a provider's key goes only to the configured endpoint.
        """
        return client_class(
            transport=self.httpx2_transport(), event_hooks={"response": [_refuse_redirect]}
        )

    def _guard(self, transport: Any, core: Any) -> Any:
        pool = transport._pool
        if not hasattr(pool, "_network_backend"):  # pragma: no cover - a changed httpcore
            raise RuntimeError(f"{type(pool).__name__} has no network backend to guard")
        pool._network_backend = _guarded_backend(core, self, pool._network_backend)
        return transport


async def _refuse_redirect(response: Any) -> None:
    if response.is_redirect:
        import httpx2  # noqa: PLC0415 - only the SDK clients (httpx2) take this hook

        where = response.headers.get("location", "?")
        refused = OutboundRefused(
            f"the endpoint redirected ({response.status_code}) to {where!r}; redirects are not "
            "followed, so that a key is sent only to the endpoint configured for it"
        )
        # a transport error, which the SDKs report as a connection error (caused by this)
        raise httpx2.ConnectError(str(refused), request=response.request) from refused


def _guarded_backend(core: Any, outbound: Outbound, inner: Any) -> Any:
    """An httpcore(2) network backend that connects only to addresses ``outbound`` allows."""

    class GuardedBackend(core.AsyncNetworkBackend):  # type: ignore[misc]
        async def connect_tcp(
            self,
            host: str,
            port: int,
            timeout: float | None = None,
            local_address: str | None = None,
            socket_options: Any = None,
        ) -> Any:
            try:
                addresses = await outbound.resolve(host, port)
            except OutboundRefused as exc:
                raise core.ConnectError(str(exc)) from exc
            failure: BaseException | None = None
            for address in addresses:  # TLS still verifies (and sends SNI for) ``host``
                try:
                    return await inner.connect_tcp(
                        address,
                        port,
                        timeout=timeout,
                        local_address=local_address,
                        socket_options=socket_options,
                    )
                except core.ConnectError as exc:
                    failure = exc
            raise failure or core.ConnectError(f"no address to connect to for {host!r}")

        async def connect_unix_socket(self, *_: Any, **__: Any) -> Any:
            raise core.ConnectError("connections to unix sockets are refused")

        async def sleep(self, seconds: float) -> None:
            await inner.sleep(seconds)

    return GuardedBackend()
