"""A job on a real model: OpenAI, Anthropic or an OpenAI-compatible server, set by variables.

Usage (the key stays in its own variable; the example reads only the variable's name):

    export LLM_BASE_URL=http://127.0.0.1:8080/v1 LLM_MODEL=qwen2.5-coder  # llama.cpp, vLLM ...
    python examples/real_provider.py

    export OPENAI_API_KEY=sk-...
    LLM_PROVIDER=openai LLM_MODEL=gpt-4o-mini python examples/real_provider.py

    export ANTHROPIC_API_KEY=sk-ant-...
    LLM_PROVIDER=anthropic LLM_MODEL=claude-sonnet-4-5 python examples/real_provider.py

``LLM_PROVIDER`` is ``openai_compatible`` (the default), ``openai`` or ``anthropic``;
``LLM_MODEL`` is the provider's model name; ``LLM_BASE_URL`` the endpoint (needed for
``openai_compatible``; the SDK's default otherwise); ``LLM_KEY_ENV`` the *name* of the
variable that holds the key (default ``OPENAI_API_KEY`` for openai, ``ANTHROPIC_API_KEY`` for
anthropic, none for openai_compatible). Without them it says what to set and exits 2.

The model becomes the pool's ``default`` alias. One agent with the calculator answers the
task; its model's tokens are printed as they stream in (``llm_delta`` events), then the
tool calls it made, the answer and the usage. The key is read inside the LLM pool's actor,
from the environment this process gives the Ray it starts: on a cluster it must be in the
environment Ray was started with (see docs/troubleshooting.md).
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import raytroupe
from raytroupe.protocols import PlannedSubtask

TASK = "A team ships 17 releases a year with 23 changes each, plus 4 hotfixes. How many changes?"
DEFAULT_KEY_ENV = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}
HELP = """\
Set the model to use, e.g.:
  LLM_BASE_URL=http://127.0.0.1:8080/v1 LLM_MODEL=qwen2.5-coder   (an OpenAI-compatible server)
  LLM_PROVIDER=openai LLM_MODEL=gpt-4o-mini OPENAI_API_KEY=sk-...
  LLM_PROVIDER=anthropic LLM_MODEL=claude-sonnet-4-5 ANTHROPIC_API_KEY=sk-ant-...
LLM_KEY_ENV names another variable holding the key (the key itself is never an argument)."""


Model = raytroupe.OpenAIModel | raytroupe.AnthropicModel | raytroupe.OpenAICompatibleModel


def model_from_env(env: dict[str, str]) -> Model | list[str]:
    """The model the variables describe, or what is wrong with them."""
    provider = env.get("LLM_PROVIDER", "openai_compatible")
    model, base_url = env.get("LLM_MODEL", ""), env.get("LLM_BASE_URL") or None
    key_env = env.get("LLM_KEY_ENV") or DEFAULT_KEY_ENV.get(provider)
    problems = []
    if provider not in {"openai_compatible", "openai", "anthropic"}:
        problems.append(f"LLM_PROVIDER={provider!r} is not openai_compatible, openai or anthropic")
    if not model:
        problems.append("LLM_MODEL is not set")
    if provider == "openai_compatible" and base_url is None:
        problems.append("LLM_BASE_URL is not set (an OpenAI-compatible server's /v1 URL)")
    if key_env is not None and not env.get(key_env):
        problems.append(f"{key_env}, the variable with the key, is not set")
    if problems:
        return problems
    if provider == "openai":
        return raytroupe.OpenAIModel(model=model, base_url=base_url, api_key_env=key_env)
    if provider == "anthropic":
        return raytroupe.AnthropicModel(model=model, base_url=base_url, api_key_env=key_env)
    return raytroupe.OpenAICompatibleModel(
        model=model, base_url=base_url or "", api_key_env=key_env
    )


def team() -> raytroupe.Team:
    """One agent with the calculator; its answers stream."""
    return raytroupe.Team(
        name="solo",
        agents=[
            raytroupe.AgentSpec(
                name="ada",
                role="analyst",
                instructions="Answer in one sentence. Use the calculator for arithmetic.",
                tools=("calculator",),
                stream=True,  # its model's tokens arrive as llm_delta events
            )
        ],
        plan=[PlannedSubtask(id="answer", role="analyst", instructions="{task}")],
    )


def main() -> int:
    """Run the task on the model the environment names; the exit status."""
    model = model_from_env(dict(os.environ))
    if isinstance(model, list):
        print("\n".join([*model, "", HELP]), file=sys.stderr)
        return 2
    where = model.base_url or "the SDK's default endpoint"
    print(f"model: {model.provider} {model.model} at {where}, key from {model.api_key_env}")
    with tempfile.TemporaryDirectory(prefix="troupe-provider-") as tmp:
        state = Path(tmp)
        rt = raytroupe.connect(
            address="local",  # a Ray of its own, even if another runs on this machine
            llm=model,  # the operator's configuration: the default alias
            num_cpus=2,
            include_dashboard=False,
            log_level="warning",
            journal=state / "journal.sqlite",
            tools_config=raytroupe.ToolsConfig(
                state_dir=state / "tools", scratch_root=state / "scratch"
            ),
            memory_config=raytroupe.MemoryConfig(path=state / "memory"),
        )
        try:
            job = rt.submit(TASK, team=team())
            print(f"task: {TASK}\nstreamed:", end=" ", flush=True)
            for event in job.events(timeout=300):
                deltas = event.data.get("deltas") if event.type == "llm_delta" else None
                if isinstance(deltas, list):
                    print("".join(str(d.get("text", "")) for d in deltas), end="", flush=True)
            result = job.result(timeout=60)
            print(f"\n\nstatus: {result.status}")
            for span in result.trace:
                if span.kind == "tool_call":
                    a = span.attributes
                    print(f"tool: {a['tool']}({a['arguments']}) -> {a['result']}")
            print(f"answer: {result.answer}")
            u = result.usage
            print(f"usage: {u.calls} model calls, {u.prompt_tokens} + {u.completion_tokens} tokens")
        finally:
            rt.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
