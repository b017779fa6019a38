"""The CLI's choice of where a command runs (--url/--key/--profile), without Ray or a server.

A command sent to a port nothing listens on fails with the client's ``Unreachable``: which
URL it names shows where the command went, and that it did not try to join a Ray.
"""

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from raytroupe.runtime.cli import _remote, app

runner = CliRunner()

KEY = "rt-unit-secret-key-0123456789"
HEAVY = (
    "ray",
    "ray.serve",
    "raytroupe.deployments",
    "chromadb",
    "openai",
    "anthropic",
    "pydantic",
    "httpx",
    "raytroupe.protocols",
)
PROBE = """
import atexit, runpy, sys
heavy = {heavy!r}
atexit.register(lambda: print("LOADED", sorted(m for m in heavy if m in sys.modules),
                              file=sys.stderr))
sys.argv = ["troupe", *sys.argv[1:]]
runpy.run_module("raytroupe.runtime.cli", run_name="__main__")
"""


@pytest.fixture(autouse=True)
def _clean_env(tmp_path, monkeypatch):
    for name in ("TROUPE_URL", "TROUPE_API_KEY", "TROUPE_PROFILE", "RAY_ADDRESS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TROUPE_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("TROUPE_STATE_DIR", str(tmp_path / "state"))


@pytest.fixture
def closed_port():
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _profiles(tmp_path, text):
    folder = tmp_path / "config"
    folder.mkdir(exist_ok=True)
    (folder / "profiles.toml").write_text(text)
    return folder


def _key_file(path, key=KEY, mode=0o600):
    path.write_text(key + "\n")
    path.chmod(mode)
    return path


def _run_probe(*args, env=None, under_bash=False):
    """The CLI in a child Python, with the modules it loaded; ``under_bash``: started by bash (a
    shell among its ancestors, where ``--show-completion`` looks for the user's)."""
    command = [sys.executable, "-c", PROBE.format(heavy=HEAVY), *args]
    if under_bash:  # not `exec`: bash stays the child's parent
        command = ["/bin/bash", "-c", '"$@"; exit $?', "bash", *command]
    done = subprocess.run(
        command,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **(env or {})},
        check=False,
    )
    loaded = [line for line in done.stderr.splitlines() if line.startswith("LOADED ")]
    assert loaded, done.stderr
    return done, loaded[-1]


@pytest.mark.parametrize("args", [["--help"], ["--version"], ["teams", "--help"], ["jobs", "-h"]])
def test_help_and_version_load_neither_ray_nor_pydantic(args):
    done, loaded = _run_probe(*(a if a != "-h" else "--help" for a in args))
    assert done.returncode == 0, done.stderr
    assert loaded == "LOADED []"
    assert done.stdout.strip()


@pytest.mark.parametrize("command", ["agents", "teams list", "policies mine"])
def test_a_command_over_http_loads_no_ray(command, closed_port):
    done, loaded = _run_probe("--url", f"http://127.0.0.1:{closed_port}", *command.split())
    assert done.returncode == 1, done.stderr  # nothing answers: one error line, no Ray
    assert "cannot reach" in done.stderr
    assert "'ray'" not in loaded, loaded


def test_shell_completion_completes_commands_without_loading_ray():
    env = {"_TROUPE_COMPLETE": "complete_bash", "COMP_WORDS": "troupe ap", "COMP_CWORD": "1"}
    done, loaded = _run_probe(env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["approvals", "approve"]
    assert loaded == "LOADED []"
    env = {"_TROUPE_COMPLETE": "complete_bash", "COMP_WORDS": "troupe teams ", "COMP_CWORD": "2"}
    done, _ = _run_probe(env=env)
    assert set(done.stdout.split()) == {
        "list",
        "show",
        "apply",
        "delete",
        "add-agent",
        "delete-agent",
    }


def test_show_completion_prints_a_script_for_the_troupe_command():
    done, loaded = _run_probe("--show-completion", under_bash=True)
    assert done.returncode == 0, done.stderr
    assert "_TROUPE_COMPLETE=complete_bash" in done.stdout
    assert "complete -o default -F _troupe_completion troupe" in done.stdout
    assert loaded == "LOADED []"


def test_help_lists_the_new_commands_and_the_remote_options():
    result = runner.invoke(app, ["--help"])
    assert result.exit_code == 0
    for word in ("result", "events", "cancel", "approve", "reject", "approvals", "teams", "usage",
                 "dead-letters", "--url", "--key", "--profile", "TROUPE_API_KEY"):  # fmt: skip
        assert word in result.stdout, word
    result = runner.invoke(app, ["teams", "--help"])
    for word in ("apply", "delete", "list", "show"):
        assert word in result.stdout


def test_with_a_url_a_command_goes_over_http_and_never_to_ray(closed_port):
    url = f"http://127.0.0.1:{closed_port}"
    result = runner.invoke(app, ["--url", url, "--key", KEY, "jobs"])
    assert result.exit_code == 1
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"error: cannot reach {url}/v1/jobs")
    assert "troupe up" not in result.stderr  # not the Ray path's message
    assert KEY not in result.output


def test_the_url_and_key_come_from_the_environment_too(closed_port, monkeypatch):
    monkeypatch.setenv("TROUPE_URL", f"http://127.0.0.1:{closed_port}/")
    monkeypatch.setenv("TROUPE_API_KEY", KEY)
    result = runner.invoke(app, ["result", "job-1"])
    assert result.exit_code == 1
    assert f"cannot reach http://127.0.0.1:{closed_port}/v1/jobs/job-1" in result.stderr
    assert KEY not in result.output


def test_a_profile_names_the_url_and_a_key_variable(tmp_path, monkeypatch, closed_port):
    _profiles(tmp_path, f'[profiles.lab]\nurl = "http://127.0.0.1:{closed_port}"\n'
                        'key_env = "LAB_KEY"\n')  # fmt: skip
    monkeypatch.setenv("LAB_KEY", KEY)
    _remote.given(_remote.Given(profile="lab"))
    assert _remote.target() == _remote.Remote(f"http://127.0.0.1:{closed_port}", KEY, "lab")
    assert KEY not in repr(_remote.target())
    result = runner.invoke(app, ["--profile", "lab", "agents"])
    assert result.exit_code == 1
    assert f"cannot reach http://127.0.0.1:{closed_port}/v1/agents" in result.stderr


def test_the_command_line_overrides_a_profile_and_the_environment_does_not(tmp_path, monkeypatch):
    _profiles(tmp_path, '[profiles.lab]\nurl = "http://127.0.0.1:1"\nkey_env = "LAB_KEY"\n')
    monkeypatch.setenv("LAB_KEY", "rt-from-profile")
    monkeypatch.setenv("TROUPE_URL", "http://127.0.0.1:2")
    monkeypatch.setenv("TROUPE_API_KEY", "rt-from-env")

    _remote.given(_remote.Given(url="http://127.0.0.1:2", key="rt-from-env", profile="lab"))
    assert _remote.target() == _remote.Remote("http://127.0.0.1:1", "rt-from-profile", "lab")
    _remote.given(_remote.Given(url="http://127.0.0.1:3", key="rt-said", profile="lab",
                                url_on_line=True, key_on_line=True))  # fmt: skip
    assert _remote.target() == _remote.Remote("http://127.0.0.1:3", "rt-said", "lab")
    _remote.given(_remote.Given(url="http://127.0.0.1:2", key="rt-from-env"))
    assert _remote.target() == _remote.Remote("http://127.0.0.1:2", "rt-from-env", None)
    _remote.given(_remote.Given())
    assert _remote.target() is None  # no URL anywhere: the command joins Ray


def test_a_key_file_readable_by_others_is_refused_like_ssh_does(tmp_path, closed_port):
    key_file = _key_file(tmp_path / "lab.key", mode=0o644)
    _profiles(tmp_path, f'[profiles.lab]\nurl = "http://127.0.0.1:{closed_port}"\n'
                        f'key_file = "{key_file}"\n')  # fmt: skip
    result = runner.invoke(app, ["--profile", "lab", "jobs"])
    assert result.exit_code == 2
    assert result.stderr.strip() == (
        f"error: key file {key_file} is open to group or others (mode 0644): "
        f"`chmod 600 {key_file}` so that only you can read it"
    )
    assert KEY not in result.output


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o660, 0o601, 0o610])
def test_any_group_or_other_bit_on_a_key_file_is_refused(tmp_path, mode):
    path = _key_file(tmp_path / "k", mode=mode)
    with pytest.raises(typer.Exit) as refused:
        _remote.read_key_file(path)
    assert refused.value.exit_code == 2


def test_a_private_key_file_is_read_relative_to_the_profiles_file(tmp_path, closed_port):
    folder = _profiles(tmp_path, f'[profiles.lab]\nurl = "http://127.0.0.1:{closed_port}"\n'
                                 'key_file = "lab.key"\n')  # fmt: skip
    _key_file(folder / "lab.key")
    _remote.given(_remote.Given(profile="lab"))
    assert _remote.target() == _remote.Remote(f"http://127.0.0.1:{closed_port}", KEY, "lab")


def test_a_key_file_that_is_no_file_empty_or_spaced_is_refused(tmp_path, capsys):
    (tmp_path / "d").mkdir()
    cases = {
        tmp_path / "d": "is not a regular file",
        _key_file(tmp_path / "empty", key=""): "holds no API key",
        _key_file(tmp_path / "spaced", key="rt-a b"): "holds no API key",
        tmp_path / "nope": "No such file",
    }
    for path, said in cases.items():
        with pytest.raises(typer.Exit) as refused:
            _remote.read_key_file(path)
        assert refused.value.exit_code == 2
        assert said in capsys.readouterr().err, path


def test_a_key_file_of_another_user_is_refused(tmp_path, capsys):
    path = _key_file(tmp_path / "k")
    if os.getuid() == 0:
        os.chown(path, 65534, 65534)  # nobody's
    else:
        path = Path("/etc/hostname")  # root's, and readable by others besides
    with pytest.raises(typer.Exit):
        _remote.read_key_file(path)
    err = capsys.readouterr().err
    assert "belongs to another user" in err or "open to group or others" in err


@pytest.mark.parametrize(
    ("profiles", "said"),
    [
        ("", "no profile 'lab' in"),
        (
            '[profiles.lab]\nurl = "http://h"\nkey = "rt-inline"\n',
            "holds a key: keep it in key_env",
        ),
        ('[profiles.lab]\nurl = "http://h"\nkye_env = "X"\n', "unknown field(s) kye_env"),
        ('[profiles.lab]\nkey_env = "X"\n', "has no url"),
        ('[profiles.lab]\nurl = "http://h"\nkey_env = "X"\nkey_file = "f"\n', "not both"),
        (
            '[profiles.lab]\nurl = "http://h"\nkey_env = "UNSET_VAR_FOR_TEST"\n',
            "$UNSET_VAR_FOR_TEST is not set",
        ),
        ("[profiles.lab\n", "is not valid TOML"),
    ],
)
def test_a_bad_profile_is_a_usage_error_that_names_the_problem(tmp_path, profiles, said):
    _profiles(tmp_path, profiles)
    result = runner.invoke(app, ["--profile", "lab", "jobs"])
    assert result.exit_code == 2, result.output
    assert said in result.stderr
    assert "rt-inline" not in result.output
    assert "Traceback" not in result.output


def test_a_missing_profiles_file_is_named(tmp_path):
    result = runner.invoke(app, ["--profile", "lab", "jobs"])
    assert result.exit_code == 2
    assert f"there is no profiles file {tmp_path / 'config' / 'profiles.toml'}" in result.stderr


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--key", KEY, "jobs"], "--key needs a deployment"),
        (["--url", "ftp://127.0.0.1", "jobs"], "needs http:// or https://"),
        (["--url", "http://user:pw@127.0.0.1", "jobs"], "holds credentials"),
        (["--url", "http://127.0.0.1:1", "jobs", "--address", "127.0.0.1:2"], "not both"),
        (["--url", "http://127.0.0.1:1", "jobs", "--tenant", "acme"], "the API key decides"),
        (["--url", "http://127.0.0.1:1", "kb", "list", "--tenant", "acme"], "the API key decides"),
        (["--url", "http://127.0.0.1:1", "up"], "`troupe up` acts on this machine's Ray"),
        (["--url", "http://127.0.0.1:1", "down"], "takes no --url/--profile"),
        (["--url", "http://127.0.0.1:1", "serve"], "takes no --url/--profile"),
        (["--url", "http://127.0.0.1:1", "--key", "rt-a b", "jobs"], "visible ASCII"),
        (["models", "list"], "give --url or --profile"),
        (["usage", "--daily", "--job", "j"], "drop --job"),
        (["reject", "job-1", "a-1", "--reason", " "], "--reason must say why"),
    ],
)
def test_usage_errors_exit_2_with_one_line(args, said):
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    assert said in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert "rt-a b" not in result.output


def test_reject_needs_a_reason():
    result = runner.invoke(app, ["reject", "job-1", "a-1"])
    assert result.exit_code == 2
    assert "Missing option '--reason'" in result.output


def test_a_key_goes_over_plain_http_to_another_host_only_with_a_warning(capsys):
    client = _remote.remote_client(_remote.Remote("http://192.0.2.7:8000", KEY))
    client.close()
    assert "the API key goes to 192.0.2.7 unencrypted" in capsys.readouterr().err
    for quiet in ("http://127.0.0.1:8000", "http://localhost:1", "https://192.0.2.7"):
        _remote.remote_client(_remote.Remote(quiet, KEY)).close()
        assert capsys.readouterr().err == "", quiet


def test_an_address_on_the_command_line_beats_a_url_in_the_environment(closed_port, monkeypatch):
    monkeypatch.setenv("TROUPE_URL", "http://127.0.0.1:1")
    result = runner.invoke(app, ["jobs", "--address", f"127.0.0.1:{closed_port}"])
    assert result.exit_code == 1
    assert result.stderr.splitlines() == [f"error: no Ray answers at 127.0.0.1:{closed_port}"]


def test_a_detached_job_needs_a_ray_that_outlives_the_command(tmp_path):
    team = tmp_path / "team.yaml"
    team.write_text("name: t\nagents:\n  - name: a\n    role: worker\n")
    result = runner.invoke(app, ["run", str(team), "a task", "--detach"])
    assert result.exit_code == 2
    assert result.stderr.startswith("error: --detach needs a Ray that outlives this command")
