"""The package as users get it: a wheel and an sdist, installed in a clean virtual environment.

Built from this checkout with ``python -m build`` (the sdist, then the wheel from the sdist, so
the sdist is proven complete), installed with its dependencies from the package index into a
new venv that shares nothing with the project's (by uv, as the README's commands install).
Then, from a folder outside the checkout: ``import raytroupe``, the ``troupe`` command, and
the README's example job on an embedded Ray.

In the cluster tier, which runs before the session's Ray starts: the example starts a Ray of
its own and would contend with it for the job agent's fixed port.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

import raytroupe

ROOT = Path(__file__).resolve().parents[2]
UV = Path(sys.executable).parent / "uv"  # the dev extra's
GENERIC = {"runtime", "actors", "protocols", "deployments", "tests", "examples", "bench"}


def _run(*command: str | Path, cwd: Path, timeout: float, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        [str(c) for c in command],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env=env,
    )
    assert done.returncode == 0, (
        f"{command}: {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    )
    return done.stdout


@pytest.mark.timeout(900)  # a venv of ~140 packages from the index (cached: ~10 s)
def test_the_built_wheel_installs_alone_in_a_clean_venv_and_runs_the_example(tmp_path):
    dist = tmp_path / "dist"
    # without --sdist/--wheel, build makes the sdist, then the wheel from the sdist
    _run(sys.executable, "-m", "build", "--installer", "uv", "--outdir", dist, ROOT,
         cwd=tmp_path, timeout=600)  # fmt: skip
    [sdist] = dist.glob("raytroupe-*.tar.gz")
    [wheel] = dist.glob("raytroupe-*.whl")
    assert wheel.name == f"raytroupe-{raytroupe.__version__}-py3-none-any.whl"

    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
    tops = {n.split("/")[0] for n in names}
    assert tops == {"raytroupe", f"raytroupe-{raytroupe.__version__}.dist-info"}, tops
    for shipped in ("raytroupe/py.typed", "raytroupe/actors/llm/prices.json",
                    "raytroupe/deployments/console/index.html",
                    "raytroupe/deployments/serve_config.yaml"):  # fmt: skip
        assert shipped in names, shipped
    assert any(n.endswith("dist-info/licenses/LICENSE") for n in names)
    with tarfile.open(sdist) as archive:
        assert not [m.name for m in archive.getmembers() if m.issym()]  # the links resolved

    venv = tmp_path / "venv"
    _run(sys.executable, "-m", "venv", venv, cwd=tmp_path, timeout=120)
    python, troupe = venv / "bin" / "python", venv / "bin" / "troupe"
    # uv, as the README installs: it reads the wheel's metadata as pip does, 5x faster
    _run(UV, "pip", "install", "-q", "--python", python, wheel, cwd=tmp_path, timeout=900)

    site = Path(_run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])",
                     cwd=tmp_path, timeout=60).strip())  # fmt: skip
    assert not GENERIC & {p.name for p in site.iterdir()}, sorted(site.iterdir())
    probe = "import raytroupe.runtime as r; print(r.__name__, r.__file__)"
    name, where = _run(python, "-c", probe, cwd=tmp_path, timeout=120).split()
    assert name == "raytroupe.runtime"
    assert Path(where).is_relative_to(site)  # the wheel's, not this checkout's
    shown = _run(troupe, "--version", cwd=tmp_path, timeout=60).strip()
    assert shown == f"troupe {raytroupe.__version__}"
    assert "Usage" in _run(troupe, "--help", cwd=tmp_path, timeout=60)

    # the README's example job, from outside the checkout, on the installed package
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAY_ADDRESS", "PYTHONPATH"))}
    env["HOME"] = str(tmp_path / "home")  # its ~/.raytroupe is the run's, not the account's
    (tmp_path / "home").mkdir()
    out = _run(python, ROOT / "examples" / "research_team.py", cwd=tmp_path, timeout=600, env=env)
    assert "status: succeeded" in out, out[-3000:]
    assert "17 * 23 + 4 = 395" in out
