"""The cluster-launcher configs pass Ray's own validator and set raytroupe up on every node.

Ray's `ray up` has no dry run; before it calls a cloud API it runs ``prepare_config`` (merge
with the provider's defaults, merge setup commands, fill node types) and ``validate_config``
(``ray/autoscaler/ray-schema.json`` plus cross-field checks). These tests run exactly that,
and for the local provider the whole of ``ray up``'s ``_bootstrap_config``.
"""

from __future__ import annotations

import copy
import itertools
import re
import shlex
import shutil
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import click
import jsonschema
import pytest
import yaml
from ray.autoscaler._private.commands import _bootstrap_config
from ray.autoscaler._private.util import prepare_config, validate_config

ROOT = Path(__file__).resolve().parents[2]
AWS = ROOT / "cluster.yaml"
LOCAL = ROOT / "deployments" / "cluster.local.yaml"
SERVE_IMPORT_PATH = "raytroupe.deployments.app:build"

CONFIGS = [pytest.param(AWS, id="aws"), pytest.param(LOCAL, id="local")]


def _load(path: Path) -> dict[str, Any]:
    with path.open() as f:
        cfg = yaml.safe_load(f)
    assert isinstance(cfg, dict)
    return cfg


def _checked(cfg: dict[str, Any]) -> dict[str, Any]:
    """What `ray up` checks before touching a provider: prepare, then validate."""
    prepared = prepare_config(copy.deepcopy(cfg))
    validate_config(prepared)
    return prepared


def _project_mount(cfg: dict[str, Any]) -> str:
    """The remote folder the project's files are mounted in (where pyproject.toml goes)."""
    remotes = [remote for remote, local in cfg["file_mounts"].items()
               if local == "./pyproject.toml"]  # fmt: skip
    assert len(remotes) == 1, f"pyproject.toml must be mounted once, got {cfg['file_mounts']}"
    return remotes[0].rsplit("/", 1)[0]


def _node_setup_commands(prepared: dict[str, Any]) -> dict[str, list[str]]:
    """The setup commands each node type runs (after `ray up` merged them)."""
    commands = {}
    for name, node_type in prepared["available_node_types"].items():
        if name == prepared["head_node_type"]:
            commands[name] = prepared["head_setup_commands"]
        else:
            commands[name] = node_type.get(
                "worker_setup_commands", prepared["worker_setup_commands"]
            )
    return commands


_SHELL_KEYWORDS = {"if", "then", "else", "elif", "do", "while", "until", "!", "{"}


def _words(commands: list[str]) -> list[list[str]]:
    """The simple commands in shell command lines, each as its words (keywords dropped)."""
    simple = []
    for command in commands:
        lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        current: list[str] = []
        for token in lexer:
            if set(token) <= set(";&|()<>"):
                simple.append(current)
                current = []
            elif current or token not in _SHELL_KEYWORDS:
                current.append(token)
        simple.append(current)
    return [words for words in simple if words]


def _has(words: list[str], *needed: str) -> bool:
    return all(any(w == n or w.startswith(n + "=") for w in words) for n in needed)


def _runs(commands: list[str], program: str, subcommand: str) -> list[list[str]]:
    """The simple commands that run ``program subcommand ...`` (by name or by path)."""
    found = []
    for simple in _words(commands):
        words = simple
        while words and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=\S*", words[0]):
            words = words[1:]  # NAME=value before a command: its environment
        if len(words) > 1 and words[0].rsplit("/", 1)[-1] == program and words[1] == subcommand:
            found.append(words)
    return found


def _ray_starts(commands: list[str]) -> list[list[str]]:
    """``ray start ...``, directly or through deployments/ray_worker.sh (which adds --block)."""
    through_script = [
        ["ray", "start", *w[1:]]
        for w in _words(commands)
        if w and w[0] == "~/troupe-src/deployments/ray_worker.sh"
    ]
    return _runs(commands, "ray", "start") + through_script


def _serve_deploys(commands: list[str]) -> list[list[str]]:
    return _runs(commands, "serve", "deploy")


@pytest.mark.parametrize("path", CONFIGS)
def test_rays_validator_accepts_the_config(path):
    prepared = _checked(_load(path))
    assert prepared["head_node_type"] in prepared["available_node_types"]


def test_local_config_passes_what_ray_up_runs_before_it_connects():
    # The whole bootstrap of `ray up` for the local provider (no cloud API involved): prepare,
    # fill resources, validate, provider bootstrap. The AWS bootstrap would call EC2.
    bootstrapped = _bootstrap_config(_load(LOCAL), no_config_cache=True)
    [node_type] = bootstrapped["available_node_types"].values()
    workers = len(bootstrapped["provider"]["worker_ips"])
    assert node_type["min_workers"] == node_type["max_workers"] == workers == 2


def test_aws_config_describes_a_head_and_a_scaling_worker_type():
    cfg = _load(AWS)
    assert cfg["provider"]["type"] == "aws"
    assert cfg["provider"]["region"]
    head = cfg["head_node_type"]
    workers = [name for name in cfg["available_node_types"] if name != head]
    assert len(workers) == 1
    worker = cfg["available_node_types"][workers[0]]
    assert 0 < worker["min_workers"] <= worker["max_workers"] <= cfg["max_workers"]
    for node_type in cfg["available_node_types"].values():
        assert node_type["node_config"]["InstanceType"]
    assert not cfg["docker"], "no container is needed"


def test_local_config_names_the_machines():
    provider = _load(LOCAL)["provider"]
    assert provider["type"] == "local"
    assert re.fullmatch(r"\d+\.\d+\.\d+\.\d+", provider["head_ip"])
    assert provider["worker_ips"]
    assert provider["head_ip"] not in provider["worker_ips"]


@pytest.mark.parametrize("path", CONFIGS)
def test_every_node_type_gets_the_project_mounted_and_installed(path):
    cfg = _load(path)
    mount = _project_mount(cfg)
    # Only the project's files: `ray up` hashes whatever it mounts (a local .venv included)
    assert not {".", "./"} & set(cfg["file_mounts"].values())
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    # the package, and the top-level folders it links to as its subpackages
    linked = [p.name for p in (ROOT / "raytroupe").iterdir() if p.is_symlink()]
    needed = ["pyproject.toml", project["project"]["readme"], "raytroupe", *linked]
    assert {f"{mount}/{name}": f"./{name}" for name in needed}.items() <= cfg["file_mounts"].items()
    for local in cfg["file_mounts"].values():
        assert (ROOT / local).exists(), local
    prepared = _checked(cfg)
    for node_type, commands in _node_setup_commands(prepared).items():
        installs = [
            w
            for w in _words(commands)
            if "install" in w and any(a == "-e" and b == mount for a, b in itertools.pairwise(w))
        ]
        assert installs, f"{node_type} does not `pip install -e {mount}`: {commands}"
    # the copy's folder is no import name, and no install puts it on sys.path (compat mode
    # would make `protocols`, `runtime`, ... importable on the node)
    assert not Path(mount).name.isidentifier(), mount
    assert "editable_mode=compat" not in str(cfg)


@pytest.mark.parametrize("path", CONFIGS)
def test_head_starts_ray_with_the_dashboard_and_workers_join_it(path):
    prepared = _checked(_load(path))
    [head_start] = _ray_starts(prepared["head_start_ray_commands"])
    assert _has(head_start, "--head", "--port", "--dashboard-host", "--autoscaling-config")
    assert "--dashboard-host=0.0.0.0" in head_start
    assert "--autoscaling-config=~/ray_bootstrap_config.yaml" in head_start
    assert not any(w.startswith("--include-dashboard") for w in head_start)
    [worker_start] = _ray_starts(prepared["worker_start_ray_commands"])
    assert "--address=$RAY_HEAD_IP:6379" in worker_start
    assert "--port=6379" in head_start


@pytest.mark.parametrize("path", CONFIGS)
def test_head_deploys_the_serve_config_that_exists(path):
    cfg = _load(path)
    mount = _project_mount(cfg)
    prepared = _checked(cfg)
    commands = prepared["head_start_ray_commands"]
    [deploy] = _serve_deploys(commands)
    remote = deploy[2]
    assert remote == f"{mount}/deployments/serve_config.yaml"
    # The deploy runs after Ray started, and workers deploy nothing.
    starts = [i for i, c in enumerate(commands) if _ray_starts([c])]
    deploys = [i for i, c in enumerate(commands) if _serve_deploys([c])]
    assert starts
    assert deploys
    assert max(starts) < min(deploys)
    assert not _serve_deploys(prepared["worker_start_ray_commands"])

    local = ROOT / remote.removeprefix(mount + "/")
    assert local.is_file(), f"{remote} is mounted from {local}, which does not exist"
    from ray.serve.schema import ServeDeploySchema  # noqa: PLC0415 - only this test needs it

    serve = ServeDeploySchema.model_validate(_load(local))
    assert SERVE_IMPORT_PATH in {app.import_path for app in serve.applications}


@pytest.mark.parametrize("path", CONFIGS)
def test_every_command_is_valid_shell(path):
    bash = shutil.which("bash")
    assert bash is not None
    prepared = _checked(_load(path))
    keys = [k for k in prepared if k.endswith("_commands")]
    assert len(keys) >= 6
    for key in keys:
        for command in prepared[key]:
            check = subprocess.run(
                [bash, "-n", "-c", command], capture_output=True, text=True, check=False
            )
            assert check.returncode == 0, f"{key}: {command!r}: {check.stderr}"


def test_no_secret_shaped_values_in_the_configs():
    for path in (AWS, LOCAL):
        text = path.read_text()
        assert not re.search(r"(sk-|rt-)[A-Za-z0-9_-]{16,}", text), path
        assert not re.search(r"(?m)^\s*-?\s*(export\s+)?[A-Z_]*(API_KEY|KEYS)[A-Z_]*=", text), path


# --- broken copies must be refused, or the tests above prove nothing ------------------------


def test_a_misspelled_top_level_key_is_rejected():
    cfg = _load(AWS)
    cfg["setup_comands"] = cfg.pop("setup_commands")
    with pytest.raises(jsonschema.ValidationError, match="setup_comands"):
        _checked(cfg)


def test_a_misspelled_node_type_key_is_rejected():
    cfg = _load(AWS)
    worker = next(n for n in cfg["available_node_types"] if n != cfg["head_node_type"])
    cfg["available_node_types"][worker]["min_worker"] = 1
    with pytest.raises(jsonschema.ValidationError, match="min_worker"):
        _checked(cfg)


def test_a_missing_provider_is_rejected():
    cfg = _load(AWS)
    del cfg["provider"]
    with pytest.raises(KeyError, match="provider"):
        _checked(cfg)
    prepared = prepare_config(_load(AWS))
    del prepared["provider"]
    with pytest.raises(jsonschema.ValidationError, match="'provider' is a required property"):
        validate_config(prepared)


def test_an_unknown_head_node_type_is_rejected():
    cfg = _load(AWS)
    cfg["head_node_type"] = "ray.head.typo"
    with pytest.raises(ValueError, match="head_node_type"):
        _checked(cfg)


def test_more_min_workers_than_max_workers_is_rejected():
    cfg = _load(AWS)
    cfg["max_workers"] = 0
    with pytest.raises(ValueError, match="max_workers"):
        _checked(cfg)


def test_a_local_config_without_head_ip_is_rejected():
    cfg = _load(LOCAL)
    cfg["provider"]["hed_ip"] = cfg["provider"].pop("head_ip")
    with pytest.raises(click.ClickException, match="head_ip"):
        _checked(cfg)


def test_a_local_config_with_node_types_is_rejected():
    cfg = _load(LOCAL)
    cfg["available_node_types"] = {"x": {"resources": {}, "node_config": {}}}
    with pytest.raises(click.ClickException, match="available_node_types"):
        _checked(cfg)


# --- what a node does before and while it starts ---------------------------------------------

NODE_ENV = ROOT / "deployments" / "node_env.sh"
UV_PIN = re.compile(r"uv (\d+\.\d+\.\d+)")


@pytest.mark.parametrize("path", CONFIGS)
def test_uv_comes_from_the_package_index_pinned_and_python_is_the_nodes_own(path):
    cfg = _load(path)
    commands = cfg["setup_commands"]
    text = "\n".join(commands)
    assert "curl" not in text
    assert not re.search(r"\|\s*(ba)?sh\b", text)  # nothing downloaded is piped into a shell
    [get_uv] = [c for c in commands if "install_uv.py" in c]
    [pinned] = UV_PIN.findall(get_uv)
    assert f"install_uv.py --version {pinned}" in get_uv
    assert (ROOT / "deployments" / "install_uv.py").is_file()
    [venv] = [w for w in _words(commands) if w[:2] == ["~/.local/bin/uv", "venv"]]
    assert "--no-python-downloads" in venv  # a node reaches package indexes, not Python builds
    assert "mkdir -p -m 700 ~/.troupe" in commands
    assert cfg["cluster_synced_files"] == ["~/.troupe"]


def test_the_on_premise_head_advertises_head_ip():
    cfg = _load(LOCAL)
    [head_start] = _ray_starts(_checked(cfg)["head_start_ray_commands"])
    assert f"--node-ip-address={cfg['provider']['head_ip']}" in head_start


@pytest.mark.parametrize("path", CONFIGS)
def test_every_start_command_loads_the_node_environment(path):
    prepared = _checked(_load(path))
    for key in ("head_start_ray_commands", "worker_start_ray_commands"):
        starting = [c for c in prepared[key] if _ray_starts([c]) or _serve_deploys([c])]
        assert starting
        for command in starting:
            assert command.startswith(". ~/troupe-src/deployments/node_env.sh || exit 1;"), command
    [worker_start] = _ray_starts(prepared["worker_start_ray_commands"])
    assert '--temp-dir="${RAY_TMPDIR:-/tmp}/ray"' in " ".join(worker_start) or any(
        w == "--temp-dir=${RAY_TMPDIR:-/tmp}/ray" for w in worker_start
    )


def _node_env(tmp_path: Path, soft: int, hard: int) -> subprocess.CompletedProcess[str]:
    """Source node_env.sh in bash under these open-files limits, with ``tmp_path`` as HOME."""
    prlimit = shutil.which("prlimit")
    assert prlimit is not None
    script = f'. {NODE_ENV} || exit 1; echo "nofile=$(ulimit -n) foo=$FOO llm=$TROUPE_LLM_CONFIG"'
    return subprocess.run(
        [prlimit, f"--nofile={soft}:{hard}", "--", "bash", "-c", script],
        env={"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"},
        capture_output=True, text=True, check=False,
    )  # fmt: skip


def test_node_env_exports_the_secrets_file_with_tilde_expanded(tmp_path):
    (tmp_path / ".troupe").mkdir(mode=0o700)
    (tmp_path / ".troupe" / "env").write_text("FOO=bar\nTROUPE_LLM_CONFIG=~/.troupe/llm.yaml\n")
    done = _node_env(tmp_path, 1024, 4096 * 4)
    assert done.returncode == 0, done.stderr
    assert f"foo=bar llm={tmp_path}/.troupe/llm.yaml" in done.stdout


def test_node_env_raises_the_limit_as_far_as_the_node_allows_and_says_so(tmp_path):
    done = _node_env(tmp_path, 1024, 10000)
    assert done.returncode == 0, done.stderr
    assert "nofile=10000" in done.stdout
    assert "open-files limit" in done.stderr
    assert "is 10000 (its hard limit), below 65536" in done.stderr


def test_node_env_refuses_to_start_under_a_limit_ray_would_run_out_of(tmp_path):
    done = _node_env(tmp_path, 1024, 4096)
    assert done.returncode == 1
    assert "nofile=" not in done.stdout
    assert "is 4096 (hard limit), below 8192" in done.stderr
    assert "raise nofile" in done.stderr
