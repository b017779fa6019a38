"""The outbound network policy, against a real listener on 127.0.0.1.

The listener stands in for the cluster's internals (or an attacker's server): every test
that expects a refusal also checks that no byte reached it.
"""

from __future__ import annotations

import asyncio

import anthropic
import httpx
import openai
import pytest

from raytroupe.actors.llm.factory import build_provider
from raytroupe.actors.outbound import NetworkPolicy, Outbound, OutboundRefused
from raytroupe.actors.tools.builtins import BuiltinSettings, ToolContext, builtin_tools
from raytroupe.actors.tools.isolation import Isolation, ResourceLimits
from raytroupe.protocols import (
    AnthropicModel,
    ChatMessage,
    LLMRequest,
    ModelError,
    OpenAICompatibleModel,
    ToolError,
)
from tests.support.listener import listening

INTERNAL = [
    "127.0.0.1",
    "127.8.9.10",
    "::1",
    "::ffff:127.0.0.1",  # IPv4-mapped loopback
    "0.0.0.0",  # noqa: S104 - an address to refuse, not to bind
    "169.254.169.254",  # cloud metadata
    "fd00::1",
    "fe80::1",
    "10.1.2.3",
    "172.16.0.9",
    "192.168.1.1",
    "100.64.0.1",  # carrier-grade NAT
    "224.0.0.1",  # multicast
    "240.0.0.1",  # reserved
]


@pytest.mark.parametrize("address", INTERNAL)
def test_every_non_public_address_is_refused_by_default(address):
    assert Outbound().refusal(address) is not None


def test_a_public_address_is_allowed_and_the_clusters_own_are_not():
    outbound = Outbound(own_addresses=["93.184.216.34"])
    assert Outbound().refusal("93.184.216.34") is None
    assert "address of this cluster" in (outbound.refusal("93.184.216.34") or "")
    denied = Outbound(NetworkPolicy(deny=("8.8.8.0/24",)))
    assert "deny list" in (denied.refusal("8.8.8.8") or "")


def test_the_operator_allows_ranges_and_hosts_by_name():
    outbound = Outbound(NetworkPolicy(allow=("10.0.0.0/8", "models.internal")))
    assert outbound.refusal("10.9.9.9") is None
    assert outbound.refusal("192.168.1.1") is not None
    assert outbound.host_allowed("MODELS.internal")
    assert not outbound.host_allowed("other.internal")


def test_a_name_that_resolves_to_loopback_is_refused_after_resolution():
    async def main():
        with pytest.raises(OutboundRefused, match="not a public address"):
            await Outbound().resolve("localhost", 80)
        assert await Outbound(NetworkPolicy(allow=("localhost",))).resolve("localhost", 80)

    asyncio.run(main())


@pytest.mark.parametrize("url", ["file:///etc/passwd", "gopher://x/", "http:///nohost", "ftp://a/"])
def test_only_http_urls_with_a_host_pass(url):
    with pytest.raises(OutboundRefused):
        asyncio.run(Outbound(NetworkPolicy(allow=("0.0.0.0/0",))).check_url(url))


def test_the_guarded_transport_never_connects_to_a_refused_address():
    async def main(url):
        async with httpx.AsyncClient(transport=Outbound().httpx_transport()) as client:
            with pytest.raises(httpx.ConnectError, match="not a public address"):
                await client.get(url)
        allowed = Outbound(NetworkPolicy(allow=("127.0.0.1",)))
        async with httpx.AsyncClient(transport=allowed.httpx_transport()) as client:
            assert (await client.get(url)).status_code == 200

    with listening() as listener:
        asyncio.run(main(listener.url + "/internal"))
        assert len(listener.requests) == 1  # only the allowed client got through


def _settings(outbound: Outbound, domains: tuple[str, ...]) -> BuiltinSettings:
    return BuiltinSettings(
        isolation=Isolation(allow_unisolated=True),
        limits=ResourceLimits(),
        enable_shell=False,
        http_allow_domains=domains,
        http_max_bytes=10_000,
        http_timeout_s=5.0,
        file_max_bytes=10_000,
        outbound=outbound,
    )


def _http_get(settings: BuiltinSettings, url: str) -> object:
    _, run = builtin_tools(settings)["http_get"]
    context = ToolContext(job_id="j", task_id="t", agent="a", scratch=None)  # type: ignore[arg-type]
    return asyncio.run(run({"url": url}, context))


@pytest.mark.parametrize("host", ["localhost", "127.0.0.1"])
def test_http_get_refuses_an_allowed_domain_that_resolves_inside(host):
    """A domain on the allow-list that resolves to loopback (as a DNS record an attacker
    controls would) is still refused: the check is on the address, after resolution."""
    with listening() as listener:
        url = listener.url.replace("127.0.0.1", host) + "/latest/meta-data/"
        with pytest.raises(ToolError, match="http_get refused"):
            _http_get(_settings(Outbound(), (host,)), url)
        assert not listener.reached


def test_http_get_does_not_follow_a_redirect_and_says_where_it_went():
    with listening(redirect_to="http://169.254.169.254/latest/meta-data/") as listener:
        allowed = Outbound(NetworkPolicy(allow=("127.0.0.1",)))
        data = _http_get(_settings(allowed, ("127.0.0.1",)), listener.url + "/r")
        assert data["status"] == 307
        assert data["location"] == "http://169.254.169.254/latest/meta-data/"
        assert len(listener.requests) == 1


def _request() -> LLMRequest:
    return LLMRequest(model="m", messages=(ChatMessage(role="user", content="hi"),))


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
def test_a_provider_never_follows_a_redirect_with_its_key(kind, monkeypatch):
    """The configured endpoint answers 307 to another server (the attacker's): the provider
    refuses to follow, so the key never reaches it, and the error says why (not retryable)."""
    monkeypatch.setenv("REDIRECT_TEST_KEY", "sk-redirect-test-secret")
    with listening() as attacker, listening(redirect_to=None) as endpoint:
        endpoint.redirect_to = attacker.url + "/v1/steal"
        outbound = Outbound(NetworkPolicy(allow=("127.0.0.1",)))
        if kind == "openai":
            spec = OpenAICompatibleModel(
                model="m", base_url=endpoint.url + "/v1", api_key_env="REDIRECT_TEST_KEY"
            )
        else:
            spec = AnthropicModel(model="m", base_url=endpoint.url, api_key_env="REDIRECT_TEST_KEY")
        provider = build_provider(spec, outbound=outbound)
        with pytest.raises(ModelError) as caught:
            asyncio.run(provider.complete(_request()))
        assert caught.value.detail.get("refused") is True
        assert not caught.value.retryable
        assert "redirect" in caught.value.message
        assert "sk-redirect-test-secret" not in caught.value.message
        assert len(endpoint.requests) == 1  # the configured endpoint got the call
        assert not attacker.reached


def test_a_provider_pointed_at_an_internal_address_never_connects(monkeypatch):
    monkeypatch.setenv("INTERNAL_TEST_KEY", "sk-internal-test-secret")
    with listening() as internal:
        spec = OpenAICompatibleModel(
            model="m", base_url=internal.url + "/v1", api_key_env="INTERNAL_TEST_KEY"
        )
        provider = build_provider(spec, outbound=Outbound())
        with pytest.raises(ModelError, match="not a public address") as caught:
            asyncio.run(provider.complete(_request()))
        assert not caught.value.retryable
        assert not internal.reached


def test_the_sdk_clients_are_the_guarded_ones():
    outbound = Outbound()
    for cls in (openai.DefaultAsyncHttpxClient, anthropic.DefaultAsyncHttpxClient):
        client = outbound.sdk_http_client(cls)
        backend = client._transport._pool._network_backend
        assert type(backend).__name__ == "GuardedBackend"
