"""``examples/config/llm_gpu.yaml`` on the session's Ray: its Serve LLM deployment answers
through the pool, and ``deploy()`` refuses a pool that would call raytroupe's own API.

The other files of examples/config/ start under ``troupe up`` Rays of their own
(``test_example_configs.py``), which runs beside this file under xdist.
"""

from __future__ import annotations

import json
import socket

import pytest
import ray

from raytroupe.actors.llm.config import LLMConfig, refuse_own_api
from raytroupe.protocols import (
    ChatMessage,
    ConfigError,
    LLMRequest,
    OpenAICompatibleModel,
    RouteSpec,
)
from tests.integration.test_example_configs import CALCULATOR, CONFIG
from tests.support.sessions import free_ports
from tests.support.wire_server import Reply, WireServer

pytestmark = pytest.mark.system


def test_llm_gpu_yaml_validates_as_shipped_and_its_vllm_deployment_answers_through_the_pool(rt):
    config = LLMConfig.from_yaml(CONFIG / "llm_gpu.yaml")
    vllm = config.models["coder-vllm"]
    route = config.models["default"]
    assert isinstance(vllm, OpenAICompatibleModel)
    assert isinstance(route, RouteSpec)
    assert route.deployments == ("coder-vllm", "coder-llama")
    # a Serve LLM app of its own under /llm, beside raytroupe's app at / on the default port
    assert vllm.base_url == "http://127.0.0.1:8000/llm/v1"
    refuse_own_api(config.models, host="127.0.0.1", port=8000)
    refuse_own_api(config.models, host="0.0.0.0", port=8000)  # noqa: S104 - serve_config.yaml's

    pool = rt.actor("llm/0")
    with WireServer() as wire:
        served = vllm.model_copy(update={"base_url": wire.base_url_openai})
        wire.script(Reply(text='{"name": "calculator", "arguments": {"expression": "17 * 23"}}'))
        ray.get(pool.configure.remote({"coder-vllm": served}, operator=True))
        try:
            request = LLMRequest(
                model="coder-vllm",
                messages=(ChatMessage(role="user", content="What is 17 * 23?"),),
                tools=(CALCULATOR,),
            )
            answer = ray.get(pool.complete.remote(request))
        finally:
            ray.get(pool.remove.remote("coder-vllm"))
        (sent,) = wire.requests

    assert (answer.deployment, answer.provider) == ("coder-vllm", "openai_compatible")
    (call,) = answer.tool_calls
    assert (call.tool, call.arguments) == ("calculator", {"expression": "17 * 23"})
    assert sent.body["model"] == "qwen2.5-coder-7b-instruct"  # the Serve LLM model_id
    assert "tools" not in sent.body  # native_tools: false, constrained_tools: true
    schema = json.dumps(sent.body["response_format"])
    assert '"const": "calculator"' in schema


def test_deploy_refuses_a_pool_that_would_call_the_app_itself(rt):
    from raytroupe.deployments.app import deploy  # noqa: PLC0415 - imports Serve

    (port,) = free_ports(1)
    looping = OpenAICompatibleModel(base_url=f"http://127.0.0.1:{port}/v1", model="m")
    pool = rt.actor("llm/0")
    ray.get(pool.configure.remote({"looping": looping}, operator=True))
    try:
        with pytest.raises(ConfigError, match="model alias 'looping'"):
            deploy(host="127.0.0.1", port=port)
    finally:
        ray.get(pool.remove.remote("looping"))
    assert not _port_listened(port)  # refused before Serve's proxy was asked for the port


def _port_listened(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0
