"""What the HTTP examples share: raytroupe and its HTTP app on 127.0.0.1, with a key for the run.

Not an example of its own: ``mcp_client.py``, ``a2a_client.py`` and ``openai_tool_loop.py``
start the app with :func:`served`, then talk to it as an outside client would.
"""

from __future__ import annotations

import argparse
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from raytroupe import deployments, runtime

__all__ = ["port_argument", "served"]


def port_argument(description: str | None) -> int:
    """The ``--port`` the example was given (0, the default: a free one)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--port", type=int, default=0, help="the HTTP app's port (0: a free one)")
    return int(parser.parse_args().port)


@contextmanager
def served(name: str, port: int = 0, **connect: Any) -> Iterator[tuple[runtime.Runtime, str, str]]:
    """Raytroupe on an embedded local Ray and its HTTP app: (the runtime, its URL, a key).

    The key (``name``, tenant ``default``) is made for this run and held only by the app.
    ``connect`` goes to :func:`raytroupe.runtime.connect`. Everything stops on leaving.
    """
    key = deployments.new_key()
    held = deployments.APIKey(name=name, hash=deployments.hash_key(key), tenant="default")
    rt = runtime.connect(address="local", num_cpus=2, log_level="warning", **connect)
    try:
        url = deployments.deploy(port=port or _free_port(), config=deployments.APIConfig(
            api_keys=[held]))  # fmt: skip
        yield rt, url, key
    finally:
        rt.shutdown()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
