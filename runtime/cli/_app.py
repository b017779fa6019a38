"""The ``troupe`` commands (typer): thin glue over the driver API, the HTTP client and ``_local``.

Nothing heavy is imported here: ``troupe --help``, ``--version`` and shell completion load
typer and rich only. Each command imports Ray, pydantic's models or the HTTP client in its
body (measured: ``--help`` went from 4 s to ~0.2 s once nothing imported ``ray.serve``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Final

import typer

from raytroupe.runtime.cli import _remote
from raytroupe.runtime.cli._approvals import approvals, approve, reject
from raytroupe.runtime.cli._evals import evals_app, evaluate
from raytroupe.runtime.cli._experiments import experiments_app
from raytroupe.runtime.cli._graphs import checkpoints, fork, interrupts, resume
from raytroupe.runtime.cli._guardrails import guardrails_app
from raytroupe.runtime.cli._jobs import (
    agents,
    cancel,
    dead_letters,
    events,
    feedback,
    jobs,
    result,
    run,
)
from raytroupe.runtime.cli._knowledge import kb_app, sessions_app
from raytroupe.runtime.cli._mcp import mcp
from raytroupe.runtime.cli._models import models_app
from raytroupe.runtime.cli._policies import me, policies_app
from raytroupe.runtime.cli._schedules import schedules_app
from raytroupe.runtime.cli._show import OUT, reported
from raytroupe.runtime.cli._show import usage as usage_error
from raytroupe.runtime.cli._skills import ask, skills_app
from raytroupe.runtime.cli._teams import teams_app
from raytroupe.runtime.cli._up import down, serve, up
from raytroupe.runtime.cli._usage import spend_app, usage_command
from raytroupe.runtime.cli._webhooks import webhooks_app

if TYPE_CHECKING:
    pass

__all__ = ["app", "main"]

_HELP: Final = (
    "Run raytroupe: a local Ray with its HTTP app, jobs, teams' agents, API keys. "
    "With --url (or --profile) the commands act on a deployment over HTTP instead."
)

_JOBS: Final = "Jobs (here, or over HTTP with --url)"
_WAITING: Final = "Jobs waiting for a person, graph checkpoints"
_LOCAL: Final = "This machine's Ray"
_RESOURCES: Final = "Teams, skills, knowledge, evaluation"

app = typer.Typer(
    name="troupe",
    help=_HELP,
    no_args_is_help=True,
    add_completion=True,  # --install-completion / --show-completion (bash, zsh, fish)
    pretty_exceptions_show_locals=False,  # locals may hold API keys
)
key_app = typer.Typer(help="API keys of the HTTP app.", no_args_is_help=True)
config_app = typer.Typer(help="Configuration files.", no_args_is_help=True)
_GROUPS: Final = (
    (teams_app, "teams", _RESOURCES),
    (skills_app, "skills", _RESOURCES),
    (evals_app, "evals", _RESOURCES),
    (experiments_app, "experiments", _RESOURCES),
    (policies_app, "policies", _RESOURCES),
    (kb_app, "kb", _RESOURCES),
    (sessions_app, "sessions", _RESOURCES),
    (webhooks_app, "webhooks", _RESOURCES),
    (schedules_app, "schedules", _RESOURCES),
    (guardrails_app, "guardrails", _RESOURCES),
    (spend_app, "spend", _RESOURCES),
    (key_app, "key", _LOCAL),
    (config_app, "config", _LOCAL),
    (models_app, "models", _LOCAL),
)
for _group, _name, _panel in _GROUPS:
    app.add_typer(_group, name=_name, rich_help_panel=_panel)


def _version(shown: bool) -> None:
    if shown:
        from raytroupe import __version__

        OUT.print(f"troupe {__version__}", highlight=False)
        raise typer.Exit


@app.callback()
def _root(
    ctx: typer.Context,
    *,
    url: Annotated[
        str | None,
        typer.Option(
            "--url",
            envvar="TROUPE_URL",
            help="A deployment's HTTP app (https://host): the commands act on it over HTTP.",
            show_default=False,
        ),
    ] = None,
    key: Annotated[
        str | None,
        typer.Option(
            "--key",
            envvar="TROUPE_API_KEY",
            help="The API key to present (better: $TROUPE_API_KEY or a profile, out of `ps`).",
            show_default=False,
        ),
    ] = None,
    profile: Annotated[
        str | None,
        typer.Option(
            "--profile",
            envvar="TROUPE_PROFILE",
            help="A deployment of ~/.config/troupe/profiles.toml ($TROUPE_CONFIG_DIR): its url "
            "and where its key is (key_env or key_file).",
            show_default=False,
        ),
    ] = None,
    version: Annotated[
        bool,
        typer.Option(
            "--version", help="Print the version and exit.", callback=_version, is_eager=True
        ),
    ] = False,
) -> None:
    """Run raytroupe: a local Ray with its HTTP app, jobs, teams' agents, API keys."""
    del version  # its eager callback printed it and stopped

    def on_line(name: str) -> bool:
        source = ctx.get_parameter_source(name)
        return source is not None and source.name == "COMMANDLINE"

    _remote.given(
        _remote.Given(
            url=url,
            key=key,
            profile=profile,
            url_on_line=on_line("url"),
            key_on_line=on_line("key"),
            profile_on_line=on_line("profile"),
        )
    )


_COMMANDS: Final[dict[str, dict[str, Callable[..., None]]]] = {
    _JOBS: {
        "run": run,
        "ask": ask,
        "result": result,
        "events": events,
        "cancel": cancel,
        "feedback": feedback,
        "jobs": jobs,
        "agents": agents,
        "usage": usage_command,
        "dead-letters": dead_letters,
    },
    _WAITING: {
        "approvals": approvals,
        "approve": approve,
        "reject": reject,
        # a graph job's checkpoints; resuming it where it waits for input; forking it from one
        "checkpoints": checkpoints,
        "interrupts": interrupts,
        "resume": resume,
        "fork": fork,
    },
    _RESOURCES: {"eval": evaluate, "me": me},
    _LOCAL: {"up": up, "down": down, "serve": serve, "mcp": mcp},
}
for _panel, _commands in _COMMANDS.items():
    for _name, _command in _commands.items():
        app.command(_name, rich_help_panel=_panel)(reported(_command))
for _group, _, _ in _GROUPS:  # every group's: an error is one line, never a traceback
    for _info in _group.registered_commands:
        if _info.callback is not None and not hasattr(_info.callback, "__wrapped__"):
            _info.callback = reported(_info.callback)


@key_app.command("new")
@reported
def key_new(
    *,
    tenant: Annotated[str, typer.Option(help="Tenant the key reaches.")] = "default",
    admin: Annotated[bool, typer.Option(help="May manage teams and agents.")] = False,
    name: Annotated[
        str | None, typer.Option(help="Who holds it (default: <tenant>-<hash prefix>).")
    ] = None,
) -> None:
    """Print a new API key once, and the entry (its hash) for an API config."""
    import yaml
    from pydantic import ValidationError

    from raytroupe.deployments import APIKey, hash_key, new_key
    from raytroupe.runtime.cli._show import show_key

    key = new_key()
    hashed = hash_key(key)
    try:
        entry = APIKey(name=name or f"{tenant}-{hashed[7:15]}", hash=hashed, tenant=tenant,
                       admin=admin)  # fmt: skip
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}"
            for e in exc.errors(include_url=False, include_input=False)
        )
        raise usage_error(problems) from None
    show_key(key, tenant, admin=admin)
    OUT.print("Add it to the api_keys of an API config (`--api-config FILE`):")
    OUT.print(
        yaml.safe_dump({"api_keys": [entry.model_dump(exclude_none=True)]}, sort_keys=False),
        markup=False,
        soft_wrap=True,
    )


@config_app.command("schema")
@reported
def config_schema(
    directory: Annotated[Path, typer.Argument(help="Where to write them.", file_okay=False)] = Path(
        "."
    ),
) -> None:
    """Write the JSON Schemas of troupe.yaml, the API config, the LLM config and team files."""
    from raytroupe.deployments.schemas import export

    for path in export(directory):
        OUT.print(str(path), markup=False, soft_wrap=True)


@config_app.command("check")
@reported
def config_check(
    path: Annotated[Path, typer.Argument(help="A troupe.yaml.", dir_okay=False)],
) -> None:
    """Read a troupe.yaml as the system actors would, and say what it configures."""
    from raytroupe.protocols.config.state import redact_url
    from raytroupe.protocols.config.system import SystemConfig

    system = SystemConfig.from_yaml(path)
    state = system.state.location()
    memory = system.memory_config()
    OUT.print(f"{path}: valid", markup=False)
    OUT.print(f"  state: {redact_url(state) if state else f'SQLite, {system.state.journal}'}",
              markup=False, soft_wrap=True)  # fmt: skip
    OUT.print(f"  memory: {memory.server or memory.path}", markup=False, soft_wrap=True)
    llm = system.llm_config()
    aliases = ", ".join(sorted(llm.models)) if llm else "the offline model"
    OUT.print(f"  llm: {aliases}", markup=False, soft_wrap=True)


def main() -> None:
    """The ``troupe`` script (named so in its help and completion, however it was started)."""
    app(prog_name="troupe")
