"""Local models: the spec, the supervisor of a real llama-server (SmolLM2), the pool's provider.

These start real ``llama-server`` processes (built once per machine by the project's own
installer) serving SmolLM2-135M from its pinned, sha256-checked weights. Only the model's
answers are unknown: the tests assert on the plumbing, and that every call ends answered or
with a typed error.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import stat
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from pydantic import ValidationError

from raytroupe.actors.llm.gateway import CallContext
from raytroupe.actors.llm.local import InProcessServers, LlamaServer
from raytroupe.actors.llm.local.launch import server_command
from raytroupe.actors.llm.pool import LLMAdapterPool
from raytroupe.actors.llm.trust import ModelTrust
from raytroupe.actors.outbound import NetworkPolicy
from raytroupe.protocols import (
    ChatMessage,
    ConfigError,
    LLMDelta,
    LLMRequest,
    LocalModel,
    ModelError,
    ToolSpec,
)
from tests.support.local_models import alive, poll, smol_spec, smollm2

# the first test of a session that needs llama-server builds it (~5 min on a fresh 2-core
# machine, a cached wheel after): more than the suite's 300 s per test
# system tier: llama.cpp's server and real weights
pytestmark = [pytest.mark.system, pytest.mark.timeout(1500)]

CONTEXT = CallContext(job_id="job-local", tenant="default", agent="tester")
ADD = ToolSpec(
    name="add",
    description="Adds two integers.",
    parameters={
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
        "required": ["a", "b"],
    },
)


def _ask(text: str, **fields) -> LLMRequest:
    fields.setdefault("max_tokens", 24)
    fields.setdefault("temperature", 0.0)
    return LLMRequest(model="smol", messages=(ChatMessage(role="user", content=text),), **fields)


def _argv(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")


# --- the spec -------------------------------------------------------------------------------


def test_slots_and_context_default_from_the_server_settings():
    spec = LocalModel(gguf="/models/m.gguf", parallel=3, context_size=8192)
    assert (spec.max_concurrency, spec.context_window) == (3, 8192)
    assert LocalModel(gguf="/m.gguf", max_concurrency=1, parallel=4).max_concurrency == 1


@pytest.mark.parametrize(
    "fields",
    [
        {"gguf": "models/m.gguf"},  # relative: depends on where the actor runs
        {"gguf": "/m.gguf", "chat_template": "../../etc/passwd"},
        {"gguf": "/m.gguf", "sha256": "abc"},
        {"gguf": "/m.gguf", "binary": "llama-server"},
        {"gguf": "/m.gguf", "resources": {"GPU": float("nan")}},
        {"gguf": "/m.gguf", "parallel": 0},
        {"gguf": "/m.gguf", "extra_args": ["--host", "::"]},  # no free-form flags
    ],
)
def test_bad_specs_are_refused(fields):
    with pytest.raises(ValidationError):
        LocalModel.model_validate(fields)


def test_a_team_cannot_name_a_local_model():
    trust = ModelTrust(NetworkPolicy(), {})
    with pytest.raises(ConfigError) as caught:
        asyncio.run(trust.check("mine", LocalModel(gguf="/etc/shadow.gguf")))
    assert caught.value.detail["field"] == "provider"

    async def configure():
        pool = LLMAdapterPool()
        await pool.configure({"mine": LocalModel(gguf="/etc/x.gguf")}, operator=False)

    with pytest.raises(ConfigError, match="only the operator"):
        asyncio.run(configure())


def test_the_key_is_passed_in_a_file_never_on_the_command_line(tmp_path):
    spec = LocalModel(gguf="/m.gguf", threads=3, chat_template="chatml", jinja=False)
    key_file = tmp_path / "key"
    command = server_command(spec, binary="/bin/ls", host="10.0.0.5", port=9, key_file=key_file)
    assert command[command.index("--api-key-file") + 1] == str(key_file)
    assert "--api-key" not in command
    assert command[command.index("--host") + 1] == "10.0.0.5"
    assert command[command.index("--threads") : command.index("--threads") + 2] == [
        "--threads",
        "3",
    ]
    assert "--no-jinja" in command
    assert "--chat-template" in command


# --- the supervisor, with a real llama-server ---------------------------------------------


def test_missing_files_and_wrong_weights_are_typed_config_errors(tmp_path):
    smol = smol_spec()
    cases = [
        (smol.model_copy(update={"gguf": str(tmp_path / "none.gguf")}), "gguf"),
        (smol.model_copy(update={"sha256": "0" * 64}), "sha256"),
        (smol.model_copy(update={"binary": str(tmp_path / "llama-server")}), "binary"),
    ]

    async def go():
        for spec, field in cases:
            server = LlamaServer("bad", spec, log_dir=tmp_path)
            try:
                with pytest.raises(ConfigError) as caught:
                    await server.endpoint()
                assert caught.value.detail["field"] == field
                assert (await server.info())["pid"] is None  # nothing was started
            finally:
                await server.stop()

    asyncio.run(go())


def test_a_pool_serves_a_local_model_with_usage_and_streamed_deltas(tmp_path):
    async def go():
        servers = InProcessServers(log_dir=tmp_path)
        pool = LLMAdapterPool({"smol": smol_spec()}, local_servers=servers)
        await pool.on_start()
        try:
            plain = await pool.complete(_ask("Name a colour."), CONTEXT, None)
            deltas: list[LLMDelta] = []

            async def sink(delta: LLMDelta) -> None:
                deltas.append(delta)

            streamed = await pool.complete(_ask("Name a fruit.", stream=True), CONTEXT, sink)
            return plain, streamed, deltas, await servers.server("smol").info()
        finally:
            await pool.close()
            await servers.stop("smol")

    plain, streamed, deltas, info = asyncio.run(go())
    assert plain.provider == "local"
    assert plain.text.strip()
    assert plain.usage.completion_tokens > 0
    assert plain.usage.prompt_tokens > 5  # the server's count, not a word count of 3 words
    assert len([d for d in deltas if d.text]) >= 2  # token by token, not one blob
    assert "".join(d.text for d in deltas) == streamed.text
    assert streamed.usage.completion_tokens > 0
    assert info["ready"]
    assert info["generation"] == 1


def test_the_server_refuses_callers_without_its_key(tmp_path):
    async def go():
        server = LlamaServer("keyed", smol_spec(), log_dir=tmp_path)
        try:
            endpoint = await server.endpoint()
            body = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}
            async with httpx.AsyncClient(timeout=60) as client:
                anonymous = await client.post(f"{endpoint.base_url}/chat/completions", json=body)
                guessed = await client.post(
                    f"{endpoint.base_url}/chat/completions",
                    json=body,
                    headers={"Authorization": "Bearer no-key"},
                )
                keyed = await client.post(
                    f"{endpoint.base_url}/chat/completions",
                    json=body,
                    headers={"Authorization": f"Bearer {endpoint.api_key}"},
                )
            argv = await asyncio.to_thread(_argv, endpoint.pid)
            key_file = Path(argv[argv.index("--api-key-file") + 1])
            mode = stat.S_IMODE((await asyncio.to_thread(key_file.stat)).st_mode)
            codes = (anonymous.status_code, guessed.status_code, keyed.status_code)
            return codes, argv, mode, endpoint.api_key
        finally:
            await server.stop()

    codes, argv, mode, key = asyncio.run(go())
    assert codes == (401, 401, 200)
    assert not any(key in arg for arg in argv)  # `ps` shows no key
    assert mode == 0o600
    key_file = Path(argv[argv.index("--api-key-file") + 1])
    assert not key_file.exists()  # removed with the server


def test_a_killed_server_is_restarted_and_the_pool_reaches_the_new_one(tmp_path):
    async def go():
        servers = InProcessServers(log_dir=tmp_path)
        pool = LLMAdapterPool({"smol": smol_spec()}, local_servers=servers)
        await pool.on_start()
        supervisor = None
        try:
            await pool.complete(_ask("Say yes."), CONTEXT, None)
            supervisor = servers.server("smol")
            first = await supervisor.info()
            long_call = asyncio.create_task(
                pool.complete(_ask("Write a long story.", max_tokens=400), CONTEXT, None)
            )
            await asyncio.sleep(0.5)  # mid-call
            killed = await supervisor.kill_server()
            try:
                outcome: object = await long_call
            except ModelError as exc:  # typed, if the retries ran out first
                outcome = exc
            after = await pool.complete(_ask("Say yes."), CONTEXT, None)
            return first, killed, outcome, after, await supervisor.info()
        finally:
            await pool.close()
            await servers.stop("smol")

    first, killed, outcome, after, info = asyncio.run(go())
    assert killed == first["pid"]
    assert not alive(killed)
    assert isinstance(outcome, ModelError) or outcome.text  # answered (retried) or typed
    assert after.text.strip()
    assert info["generation"] >= 2
    assert info["restarts"] >= 1
    assert info["pid"] != killed


def test_a_hung_server_fails_its_health_checks_and_is_replaced(tmp_path):
    async def go():
        server = LlamaServer("hung", smol_spec(), log_dir=tmp_path, health_timeout_s=0.5)
        try:
            first = await server.endpoint()
            os.kill(first.pid, signal.SIGSTOP)  # alive, answering nothing
            for _ in range(450):  # 90 s at most
                if (await server.info())["generation"] >= 2:
                    break
                await asyncio.sleep(0.2)
            second = await server.endpoint()
            return first, second
        finally:
            await server.stop()

    first, second = asyncio.run(go())
    assert second.generation >= 2
    assert second.pid != first.pid
    poll(lambda: not alive(first.pid), within_s=30)


SUPERVISED = """
import asyncio, sys
from raytroupe.actors.llm.local import LlamaServer
from tests.support.local_models import smol_spec

async def main():
    server = LlamaServer("orphan", smol_spec(), log_dir=sys.argv[1])
    endpoint = await server.endpoint()
    print("SERVER", endpoint.pid, flush=True)
    await asyncio.sleep(600)

asyncio.run(main())
"""


def test_the_server_dies_with_its_supervisor(tmp_path):
    smollm2()  # fetched here, not inside the child's start
    child = subprocess.Popen(
        [sys.executable, "-c", SUPERVISED, str(tmp_path)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
    )
    try:
        lines = (child.stdout.readline() for _ in range(100))  # the logs come first
        pid = int(next(line for line in lines if line.startswith("SERVER")).split()[1])
        assert alive(pid)
    finally:
        child.kill()
        child.wait()
    poll(lambda: not alive(pid), within_s=30)


def test_constrained_text_mode_makes_even_a_tiny_model_write_a_valid_call(tmp_path):
    spec = smol_spec(native_tools=False, constrained_tools=True)

    async def go():
        servers = InProcessServers(log_dir=tmp_path)
        pool = LLMAdapterPool({"smol": spec}, local_servers=servers)
        await pool.on_start()
        try:
            request = _ask("Add 2 and 3 with the add tool.", tools=(ADD,),
                           tool_choice="required", max_tokens=64)  # fmt: skip
            return await pool.complete(request, CONTEXT, None)
        finally:
            await pool.close()
            await servers.stop("smol")

    response = asyncio.run(go())
    assert response.finish_reason == "tool_calls"
    assert [c.tool for c in response.tool_calls][:1] == ["add"]
    arguments = response.tool_calls[0].arguments
    assert set(arguments) == {"a", "b"}
    assert all(isinstance(v, int) for v in arguments.values())


# --- the command line -------------------------------------------------------------------


def test_troupe_models_check_reports_what_a_node_lacks(tmp_path):
    from typer.testing import CliRunner  # noqa: PLC0415

    from raytroupe.runtime.cli import app  # noqa: PLC0415

    good = smol_spec()
    config = {
        "models": {
            "tiny": good.model_dump(mode="json", exclude_defaults=True) | {"provider": "local"},
            "gone": {"provider": "local", "gguf": str(tmp_path / "gone.gguf")},
            "forged": {"provider": "local", "gguf": good.gguf, "sha256": "0" * 64},
        }
    }
    path = tmp_path / "llm.yaml"
    path.write_text(json.dumps(config))
    result = CliRunner().invoke(app, ["models", "check", str(path)])
    assert result.exit_code == 1
    lines = {line.split(":")[0]: line for line in result.output.splitlines() if ": " in line}
    assert lines["tiny"].endswith(": ok")
    assert "no GGUF file" in lines["gone"]
    assert "sha256" in lines["forged"]
    assert "2 local model(s) cannot start on this node" in result.output

    del config["models"]["gone"], config["models"]["forged"]
    path.write_text(json.dumps(config))
    result = CliRunner().invoke(app, ["models", "check", str(path)])
    assert result.exit_code == 0, result.output
    assert f"{path}: valid" in result.output


@pytest.mark.parametrize("name", ["llm_local.yaml", "llm_gpu.yaml", "llm.yaml"])
def test_the_example_model_configs_match_the_schema_and_load(name):
    import jsonschema  # noqa: PLC0415
    import yaml  # noqa: PLC0415

    from raytroupe.actors.llm.config import LLMConfig  # noqa: PLC0415

    root = Path(__file__).resolve().parents[2]
    path = root / "examples" / "config" / name
    schema = json.loads((root / "deployments" / "schemas" / "llm.schema.json").read_text())
    jsonschema.validate(yaml.safe_load(path.read_text()), schema)
    config = LLMConfig.from_yaml(path)
    local = [s for s in config.models.values() if isinstance(s, LocalModel)]
    if name != "llm.yaml":
        assert local
    assert all(s.gguf.startswith("/") for s in local)
