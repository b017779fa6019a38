"""Every product module imports on its own, first, in an interpreter that has loaded none of
raytroupe: no import cycle hides behind the order the other tests happen to import in.

One child per module, forked from a process that has loaded the heavy third-party packages
(Ray, pydantic, httpx, ...) and nothing of raytroupe, so each child starts as a fresh
interpreter would as far as raytroupe's modules go, at a fraction of the cost; a child per
core at once.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("actors", "deployments", "protocols", "runtime")

_CHECK = r"""
import importlib, os, sys, traceback
for heavy in ("ray", "ray.serve", "pydantic", "pydantic_settings", "httpx", "httpx_sse",
              "structlog", "jsonschema", "msgpack", "openai", "anthropic", "typer", "rich",
              "starlette", "sse_starlette", "fastapi", "uvicorn", "yaml", "numpy", "tokenizers",
              "grpc", "tenacity", "aiolimiter", "limits", "mcp", "chromadb", "psycopg",
              "psycopg_pool", "cryptography", "statistics", "sqlite3"):
    try:
        importlib.import_module(heavy)
    except ImportError:
        pass
assert not any(m == "raytroupe" or m.startswith("raytroupe.") for m in sys.modules)
failed, waiting, running = [], list(sys.argv[1:]), {}
while waiting or running:
    while waiting and len(running) < (os.cpu_count() or 1):  # a child per core at once
        module = waiting.pop(0)
        pid = os.fork()
        if pid == 0:
            try:
                importlib.import_module(module)
            except BaseException:
                print(f"--- {module}", file=sys.stderr)
                traceback.print_exc(limit=-3)
                sys.stderr.flush()
                os._exit(1)
            os._exit(0)
        running[pid] = module
    pid, status = os.wait()
    if os.waitstatus_to_exitcode(status) != 0:
        failed.append(running[pid])
    del running[pid]
print("FAILED:", " ".join(sorted(failed)))
"""


def product_modules() -> list[str]:
    """Every ``raytroupe.*`` module of the product folders (``__main__`` runs, so not it)."""
    found = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            if parts[-1] == "__main__":
                continue
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found.append(".".join(("raytroupe", *parts)))
    return found


def test_the_module_list_covers_the_product():
    modules = product_modules()
    assert len(modules) > 150
    assert "raytroupe.actors.answer_gate" in modules
    assert "raytroupe.actors.evals.scoring" in modules
    assert "raytroupe.runtime.cli" in modules


# system tier: a fresh interpreter's import of every product module (docs/testing.md)
@pytest.mark.system
def test_every_product_module_imports_first_on_its_own():
    done = subprocess.run(
        [sys.executable, "-c", _CHECK, *product_modules()],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=ROOT,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    failed = done.stdout.rsplit("FAILED:", 1)[-1].split()
    assert failed == [], done.stderr[-6000:]
