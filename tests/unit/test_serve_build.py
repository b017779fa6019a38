"""`serve build` turns the application into a Serve config (no cluster needed)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml

SERVE = Path(sys.executable).with_name("serve")


def test_serve_build_writes_a_config_of_the_application(tmp_path):
    out = tmp_path / "serve.yaml"
    done = subprocess.run(
        [str(SERVE), "build", "raytroupe.deployments.app:app", "-o", str(out)],
        capture_output=True, text=True, timeout=120, check=False,
        cwd=Path(__file__).resolve().parents[2],
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    config = yaml.safe_load(out.read_text())
    [application] = config["applications"]
    assert application["import_path"] == "raytroupe.deployments.app:app"
    [deployment] = application["deployments"]
    assert deployment["name"] == "TroupeAPI"
    assert deployment["ray_actor_options"]["num_cpus"] == 0
