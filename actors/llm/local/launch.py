"""What starting one ``llama-server`` takes: its files checked, a port, its command line.

The server is made to die with its supervisor (:func:`die_with_parent`, between fork and
exec), so that no server outlives the actor that watches it.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import os
import signal
import socket
from pathlib import Path

from raytroupe.actors.llm.local.binary import find_llama_server
from raytroupe.protocols import ConfigError, LocalModel

__all__ = [
    "check_files",
    "die_with_parent",
    "file_sha256",
    "free_port",
    "server_command",
    "url_host",
]


def server_command(
    spec: LocalModel, *, binary: str, host: str, port: int, key_file: Path
) -> list[str]:
    """The ``llama-server`` command line for ``spec`` (each slot gets ``context_size``).

    The key is passed in a file only the supervisor's user can read: a command line is
    visible to every process of the machine (``ps``), sandboxed tools included.
    """
    command = [
        binary,
        "--model",
        spec.gguf,
        "--host",
        host,
        "--port",
        str(port),
        "--api-key-file",
        str(key_file),
        "--ctx-size",
        str(spec.context_size * spec.parallel),
        "--parallel",
        str(spec.parallel),
        "--n-gpu-layers",
        str(spec.gpu_layers),
        "--alias",
        Path(spec.gguf).stem,
        "--no-webui",
    ]
    command += ["--n-predict", str(spec.max_answer_tokens or -1)]
    if spec.threads is not None:
        command += ["--threads", str(spec.threads)]
    command.append("--jinja" if spec.jinja else "--no-jinja")
    if spec.chat_template is not None:
        command += ["--chat-template", spec.chat_template]
    if spec.chat_template_kwargs:
        command += ["--chat-template-kwargs", json.dumps(spec.chat_template_kwargs)]
    return command


def file_sha256(path: Path) -> str:
    """The hex sha256 of the file at ``path``, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def check_files(alias: str, spec: LocalModel, *, hash_file: bool = True) -> str:
    """The path of the server binary, once ``spec``'s files are checked on this node.

    Raises:
        ConfigError: no llama-server, no GGUF file at ``spec.gguf``, or (``hash_file``) a file
            whose sha256 is not ``spec.sha256``; ``detail['field']`` names which.
    """
    binary = find_llama_server(spec.binary)
    path = Path(spec.gguf)
    if not path.is_file():
        raise ConfigError(
            f"local model {alias!r}: no GGUF file at {spec.gguf} on this node", field="gguf"
        )
    if spec.sha256 is not None and hash_file:
        digest = file_sha256(path)
        if digest != spec.sha256:
            raise ConfigError(
                f"local model {alias!r}: {spec.gguf} has sha256 {digest}, not "
                f"the configured {spec.sha256}",
                field="sha256",
            )
    return binary


def free_port(host: str) -> int:
    """A port of ``host`` that nothing listens on now."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])


def url_host(host: str) -> str:
    """``host`` as it is written in a URL (an IPv6 address in brackets)."""
    return f"[{host}]" if ":" in host else host


def die_with_parent() -> None:  # pragma: no cover - runs in the child, between fork and exec
    """Ask Linux to SIGKILL this child when the thread that made it exits."""
    pr_set_pdeathsig = 1
    ctypes.CDLL(None).prctl(pr_set_pdeathsig, signal.SIGKILL)
    if os.getppid() == 1:  # the parent died before prctl took effect
        os._exit(1)
