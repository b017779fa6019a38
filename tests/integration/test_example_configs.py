"""Every file of examples/config/ started as it is shipped, and what was wrong with them refused.

- ``llm_local.yaml``: ``troupe up --llm-config ... --resources '{"models": 1}'``. Only its
  ``gguf:`` and ``sha256:`` lines are rewritten, to the cached test weights (Qwen2.5-Coder
  0.5B in place of the 1.5B, SmolLM2 as named); the route ``default`` answers from the
  llama-server its supervisor starts on the node offering ``models``, and calls the
  calculator it is offered. ``troupe down`` stops the server with the rest.
- ``troupe.yaml`` and ``llm.yaml``, unchanged: one ``troupe up --config troupe.yaml
  --llm-config llm.yaml`` with ``~`` a home of the test's. The SDKs' own base-URL variables
  send the openai and anthropic deployments, with their keys, to a local server speaking
  both wire protocols.
- ``llm_gpu.yaml``: a ``base_url`` that is raytroupe's own API on the same Serve proxy (what
  it used to ship) is refused by ``troupe up`` before Ray starts. Its Ray Serve LLM
  deployment answering through the pool, and ``deploy()``'s refusal, take the session's Ray:
  ``test_example_configs_ray.py`` (this file takes none, so xdist runs it beside that Ray).

``troupe up`` runs as a subprocess beside the suite's Ray, on free ports, and is always
stopped: ``troupe down``, then SIGKILL by PID for anything of its session left.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml

from raytroupe.actors.agent.written_calls import WrittenCalls, read_written_calls
from raytroupe.actors.llm.config import LLMConfig, refuse_own_api
from raytroupe.protocols import (
    ChatMessage,
    ConfigError,
    LLMRequest,
    LocalModel,
    OpenAICompatibleModel,
    ToolSpec,
)
from raytroupe.runtime.cli._local import parse_resources
from tests.support.local_models import alive, llama_server, poll, smollm2
from tests.support.sessions import free_ports, live_in_session
from tests.support.weights import QWEN_05B, QWEN_15B, SMOLLM2, fetch
from tests.support.wire_server import WireServer

# the first test of a session that needs llama-server builds it (~5 min on a fresh 2-core
# machine, a cached wheel after), then fetches the weights: more than the suite's 300 s
# system tier: `troupe up` Rays of its own, and llama.cpp's server
pytestmark = [pytest.mark.system, pytest.mark.timeout(1500)]

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "examples" / "config"
TROUPE = Path(sys.executable).parent / "troupe"
CALCULATOR = ToolSpec(
    name="calculator",
    description="Evaluates arithmetic.",
    parameters={
        "type": "object",
        "properties": {"expression": {"type": "string"}},
        "required": ["expression"],
    },
)
_WEIGHTS_LINE = re.compile(r"^(?P<indent>\s*)(?P<key>gguf|sha256): (?P<value>\S+)(?P<rest>.*)$")


def test_every_example_config_is_started_here():
    assert sorted(p.name for p in CONFIG.iterdir()) == [
        "llm.yaml",
        "llm_gpu.yaml",
        "llm_local.yaml",
        "troupe.yaml",
    ]


# -- helpers -------------------------------------------------------------------------------


def _ports() -> list[str]:
    """Free ports for each of `up`'s (its defaults may be taken by another Ray here)."""
    http, dashboard, ray_port = free_ports(3)
    return ["--http-port", str(http), "--dashboard-port", str(dashboard),
            "--ray-port", str(ray_port)]  # fmt: skip


def _env(state_dir: Path, **extra: str) -> dict[str, str]:
    """This process's environment, minus what would point `troupe` elsewhere."""
    drop = {"RAY_ADDRESS", "TROUPE_CONFIG", "TROUPE_LLM_CONFIG", "TROUPE_STATE_URL"}
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env["TROUPE_STATE_DIR"] = str(state_dir)
    env["COLUMNS"] = "200"
    env.update(extra)
    return env


def _troupe(
    *args: str, env: dict[str, str], timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(TROUPE), *args],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


@contextmanager
def _up(state_dir: Path, *args: str, env: dict[str, str]) -> Iterator[dict[str, Any]]:
    """`troupe up ARGS` on free ports with 2 CPUs; its recorded state. Always stopped after."""
    http, dashboard, ray_port = free_ports(3)
    up = _troupe(
        "up", "--http-port", str(http), "--dashboard-port", str(dashboard),
        "--ray-port", str(ray_port), "--num-cpus", "2", "--state-dir", str(state_dir), *args,
        env=env, timeout=900,
    )  # fmt: skip
    state_file = state_dir / "up.json"
    state = json.loads(state_file.read_text()) if state_file.exists() else None
    try:
        log = (state_dir / "ray.log").read_text(errors="replace")[-3000:] if up.returncode else ""
        assert up.returncode == 0, up.stdout + up.stderr + log
        assert state is not None
        yield state
    finally:
        if state is not None:
            _troupe("down", "--state-dir", str(state_dir), env=env, timeout=300)
            for pid in live_in_session(state["pid"]):
                os.kill(pid, signal.SIGKILL)


def _down(state_dir: Path, env: dict[str, str], state: dict[str, Any]) -> None:
    down = _troupe("down", "--state-dir", str(state_dir), env=env, timeout=300)
    assert down.returncode == 0, down.stdout + down.stderr
    assert "stopped Ray" in down.stdout
    assert live_in_session(state["pid"]) == set()


def _ask(
    state: dict[str, Any],
    env: dict[str, str],
    requests: list[LLMRequest],
    supervisors: tuple[str, ...] = (),
) -> dict[str, Any]:
    """What a driver of `up`'s Ray gets from its pool (tests/support/pool_child.py)."""
    ask = {"requests": [r.model_dump(mode="json") for r in requests], "supervisors": supervisors}
    done = subprocess.run(
        [sys.executable, "-m", "tests.support.pool_child", state["address"], json.dumps(ask)],
        env=env, cwd=ROOT, capture_output=True, text=True, timeout=1200, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr[-4000:]
    report: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return report


def _response(answer: dict[str, Any]) -> dict[str, Any]:
    assert "response" in answer, answer
    response: dict[str, Any] = answer["response"]
    return response


def _hello(model: str) -> LLMRequest:
    return LLMRequest(
        model=model,
        messages=(ChatMessage(role="user", content="Say hello in one short sentence."),),
        max_tokens=24,
        temperature=0.0,
    )


# -- llm_local.yaml --------------------------------------------------------------------------

_TEST_WEIGHTS = {
    "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf": QWEN_05B,  # CI has the 0.5B of the same family
    "SmolLM2-135M-Instruct.Q4_1.gguf": SMOLLM2,
}


def _with_test_weights(shipped: str) -> tuple[str, int]:
    """``shipped`` with each ``gguf:``/``sha256:`` line naming the cached test weights."""
    digests = {QWEN_15B.sha256: QWEN_05B.sha256}
    lines, swapped = [], 0
    for line in shipped.splitlines(keepends=True):
        match = _WEIGHTS_LINE.match(line.rstrip("\n"))
        if match is None:
            lines.append(line)
            continue
        value = match["value"]
        if match["key"] == "gguf":
            value = str(fetch(_TEST_WEIGHTS[Path(value).name]))
        else:
            value = digests[value]
        lines.append(f"{match['indent']}{match['key']}: {value}{match['rest']}\n")
        swapped += 1
    return "".join(lines), swapped


def _first_call(response: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The first tool call of an answer: a native one, else one written in its text."""
    if response["tool_calls"]:
        call = response["tool_calls"][0]
        return call["tool"], call["arguments"]
    written = read_written_calls(response["text"], {"calculator"})
    assert isinstance(written, WrittenCalls), response["text"]
    return written.calls[0].tool, dict(written.calls[0].arguments)


def test_llm_local_yaml_serves_default_from_its_llama_server_under_troupe_up(tmp_path):
    llama_server()  # built once per machine; the supervisor finds it in this environment
    smollm2()
    shipped = (CONFIG / "llm_local.yaml").read_text(encoding="utf-8")
    text, swapped = _with_test_weights(shipped)
    assert swapped == 3  # coder's gguf and sha256, tiny's gguf: nothing else differs
    kept = [line for line in shipped.splitlines() if not _WEIGHTS_LINE.match(line)]
    assert [line for line in text.splitlines() if not _WEIGHTS_LINE.match(line)] == kept
    config_file = tmp_path / "llm_local.yaml"
    config_file.write_text(text, encoding="utf-8")

    shipped_config = LLMConfig.from_yaml(CONFIG / "llm_local.yaml")
    coder = shipped_config.models["coder"]
    assert isinstance(coder, LocalModel)
    assert coder.sha256 == QWEN_15B.sha256  # the shipped digest is the named file's
    assert coder.native_tools  # the mode Qwen calls tools in
    assert not coder.constrained_tools
    assert coder.resources == {"models": 1}

    state_dir = tmp_path / "state"
    env = _env(state_dir)
    checked = _troupe("models", "check", str(config_file), env=env)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert f"coder: local, {fetch(QWEN_05B)}: ok" in checked.stdout
    assert f"tiny: local, {smollm2()}: ok" in checked.stdout

    hello = _hello("default")
    tools = LLMRequest(
        model="default",
        messages=(
            ChatMessage(role="system", content="Use the calculator for arithmetic."),
            ChatMessage(role="user", content="What is 17 * 23 + 4?"),
        ),
        tools=(CALCULATOR,),
        max_tokens=120,
        temperature=0.0,
    )
    server = None
    try:
        with _up(state_dir, "--llm-config", str(config_file),
                 "--resources", '{"models": 1}', env=env) as state:  # fmt: skip
            report = _ask(state, env, [hello, tools], supervisors=("coder",))
            server = report["supervisors"]["coder"]["pid"]
            assert alive(server)
            _down(state_dir, env, state)
        said, called = (_response(a) for a in report["answers"])
        assert (said["deployment"], said["provider"]) == ("coder", "local")
        assert said["text"].strip()
        assert said["usage"]["completion_tokens"] > 0
        assert called["deployment"] == "coder"
        tool, arguments = _first_call(called)
        assert tool == "calculator"
        assert "17" in str(arguments.get("expression"))
        # the supervisor holds the node's one `models`; the fallback was never needed
        assert report["total"]["models"] == 1
        assert report["available"].get("models", 0) == 0
        assert "model/coder" in report["actors"]
        assert "model/tiny" not in report["actors"]
        assert report["unservable"] == {}
        poll(lambda: not alive(server))  # it died with its supervisor, by `troupe down`
    finally:
        if server is not None and alive(server):
            os.kill(server, signal.SIGKILL)


# -- troupe.yaml and llm.yaml ----------------------------------------------------------------


def test_troupe_yaml_and_llm_yaml_start_under_troupe_up_as_shipped(tmp_path):
    home = tmp_path / "home"  # troupe.yaml keeps its state in ~/.raytroupe: the test's own
    home.mkdir()
    state_dir = tmp_path / "state"
    key = f"sk-example-{secrets.token_hex(8)}"
    with WireServer(api_key=key) as wire:
        env = _env(
            state_dir,
            HOME=str(home),
            OPENAI_API_KEY=key,
            ANTHROPIC_API_KEY=key,
            OPENAI_BASE_URL=wire.base_url_openai,  # the SDKs' own variables: the file as is
            ANTHROPIC_BASE_URL=wire.base_url_anthropic,
        )
        checked = _troupe("config", "check", str(CONFIG / "troupe.yaml"), env=env)
        assert checked.returncode == 0, checked.stdout + checked.stderr
        assert f"state: SQLite, {home}/.raytroupe/journal.sqlite" in checked.stdout
        assert f"memory: {home}/.raytroupe/memory" in checked.stdout

        with _up(state_dir, "--config", str(CONFIG / "troupe.yaml"),
                 "--llm-config", str(CONFIG / "llm.yaml"), env=env) as state:  # fmt: skip
            report = _ask(state, env, [_hello("default"), _hello("claude-haiku")])
            _down(state_dir, env, state)
        requests = wire.requests

    cheapest, claude = (_response(a) for a in report["answers"])
    assert (cheapest["deployment"], cheapest["provider"]) == ("gpt-mini", "openai")  # cost
    assert (claude["deployment"], claude["provider"]) == ("claude-haiku", "anthropic")
    assert cheapest["text"]
    assert claude["text"]
    sent = [(r.path, r.body["model"]) for r in requests]
    assert sent == [
        ("/v1/chat/completions", "gpt-4o-mini"),
        ("/v1/messages", "claude-3-5-haiku-latest"),
    ]
    # troupe.yaml: two sandboxes, one shard of each, one pool replica (llm.yaml), its files
    actors = set(report["actors"])
    assert {"tools/0", "tools/1", "router/0", "desk", "orchestrator/0", "llm/0", "memory"} <= actors
    assert not {"tools/2", "router/1", "orchestrator/1", "llm/1"} & actors
    assert report["unservable"] == {}
    assert (home / ".raytroupe" / "journal.sqlite").is_file()
    assert (home / ".raytroupe" / "memory").is_dir()


# -- llm_gpu.yaml ------------------------------------------------------------------------------


def _looping(tmp_path: Path, port: int) -> Path:
    """llm_gpu.yaml as it used to ship: coder-vllm at raytroupe's own /v1 (here on ``port``)."""
    shipped = (CONFIG / "llm_gpu.yaml").read_text(encoding="utf-8")
    looping = shipped.replace(
        "base_url: http://127.0.0.1:8000/llm/v1", f"base_url: http://127.0.0.1:{port}/v1"
    )
    assert looping != shipped
    path = tmp_path / "llm_gpu_looping.yaml"
    path.write_text(looping, encoding="utf-8")
    return path


def test_a_base_url_at_raytroupes_own_api_is_refused(tmp_path):
    (port,) = free_ports(1)
    looping = LLMConfig.from_yaml(_looping(tmp_path, port))
    with pytest.raises(ConfigError, match="raytroupe's own OpenAI-compatible API") as caught:
        refuse_own_api(looping.models, host="127.0.0.1", port=port)
    assert caught.value.detail["alias"] == "coder-vllm"
    assert caught.value.detail["field"] == "models.coder-vllm.base_url"

    def spec(base_url: str) -> dict[str, Any]:
        return {"x": OpenAICompatibleModel(base_url=base_url, model="m")}

    for same in (
        f"http://localhost:{port}/v1/",
        f"http://[::1]:{port}/v1",
        f"http://0.0.0.0:{port}/v1",
        f"http://{socket.gethostname()}:{port}/v1",
    ):
        with pytest.raises(ConfigError):
            refuse_own_api(spec(same), host="127.0.0.1", port=port)
    with pytest.raises(ConfigError):  # under a route prefix of raytroupe's own
        refuse_own_api(spec(f"http://127.0.0.1:{port}/troupe/v1"), host="127.0.0.1",
                       port=port, route_prefix="/troupe/")  # fmt: skip
    for other in (
        f"http://127.0.0.1:{port}/llm/v1",  # another app on the same proxy
        f"http://127.0.0.1:{port + 1}/v1",  # another port
        f"http://10.9.8.7:{port}/v1",  # another machine
    ):
        refuse_own_api(spec(other), host="127.0.0.1", port=port)


def test_troupe_up_refuses_a_looping_base_url_before_ray_starts(tmp_path):
    state_dir = tmp_path / "state"
    ports = _ports()
    port = int(ports[1])  # --http-port's
    looping = _looping(tmp_path, port)
    refused = _troupe("up", *ports, "--state-dir", str(state_dir), "--llm-config", str(looping),
                      env=_env(state_dir))  # fmt: skip
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert refused.stderr.startswith(
        f"error: model alias 'coder-vllm': base_url http://127.0.0.1:{port}/v1 is raytroupe's "
        "own OpenAI-compatible API"
    )
    assert "Traceback" not in refused.stderr
    assert not state_dir.exists()  # no Ray started, nothing written

    # through troupe.yaml's `llm:` as well
    system = tmp_path / "troupe.yaml"
    system.write_text(yaml.safe_dump({"llm": str(looping)}), encoding="utf-8")
    refused = _troupe("up", *ports, "--state-dir", str(state_dir),
                      "--config", str(system), env=_env(state_dir))  # fmt: skip
    assert refused.returncode == 1
    assert "is raytroupe's own OpenAI-compatible API" in refused.stderr
    assert not state_dir.exists()


def test_troupe_up_refuses_bad_resources_before_ray_starts(tmp_path):
    assert parse_resources('{"models": 1, "gpu_node": 2.0, "off": 0}') == {
        "models": 1,
        "gpu_node": 2.0,
        "off": 0,
    }
    for given, said in (
        ("models", "--resources: not JSON"),
        ("[1]", "--resources: a JSON object of resource name -> amount"),
        ('{"models": -1}', "'models' must be a whole number from 0 to 10^14, not -1"),
        ('{"models": 0.5}', "'models' must be a whole number from 0 to 10^14, not 0.5"),
        ('{"models": 1e15}', "'models' must be a whole number from 0 to 10^14"),
        ('{"models": NaN}', "'models' must be a whole number"),
        ('{"models": true}', "'models' must be a whole number"),
        ('{"models": "1"}', "'models' must be a whole number"),
        ('{"CPU": 2}', "--resources: CPU is Ray's own; use --num-cpus"),
        ('{" ": 1}', "--resources: a resource needs a name"),
    ):
        with pytest.raises(ConfigError) as caught:
            parse_resources(given)
        assert said in caught.value.message, given
        assert caught.value.detail["field"] == "--resources"

    state_dir = tmp_path / "state"
    refused = _troupe("up", *_ports(), "--state-dir", str(state_dir), "--resources",
                      '{"models": 0.5}', env=_env(state_dir))  # fmt: skip
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert refused.stderr.strip() == (
        "error: --resources: 'models' must be a whole number from 0 to 10^14, not 0.5"
    )
    assert not state_dir.exists()  # no Ray started, nothing written
