"""Where a command runs: a deployment reached over HTTP, or the Ray on this machine.

A command talks HTTP (through :class:`raytroupe.runtime.http_client.Client`) when a URL is
given: ``--url`` (or ``$TROUPE_URL``) with ``--key`` (or ``$TROUPE_API_KEY``), or a profile
(``--profile NAME`` or ``$TROUPE_PROFILE``) of the profiles file. Without one it joins Ray as
before (``--address``, the Ray `troupe up` started, ``$RAY_ADDRESS``).

A profile names the URL and where its key is, never the key itself:

```toml
# ~/.config/troupe/profiles.toml (or $TROUPE_CONFIG_DIR/profiles.toml)
[profiles.prod]
url = "https://troupe.example.com"
key_env = "TROUPE_PROD_KEY"     # the key is in this environment variable
[profiles.lab]
url = "http://127.0.0.1:8000"
key_file = "~/.config/troupe/lab.key"   # or in this file, readable by its owner only
```

``--url`` and ``--key`` given on the command line override a profile's; the environment
variables apply only when no profile is chosen.
"""

from __future__ import annotations

import ipaddress
import os
import stat
import tomllib
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Final

from raytroupe.runtime.cli._show import ERR, usage

if TYPE_CHECKING:
    from raytroupe.runtime.driver import Runtime
    from raytroupe.runtime.http_client import Client
    from raytroupe.runtime.tenant import TenantView

__all__ = [
    "PROFILES_FILE",
    "Given",
    "Remote",
    "given",
    "local_only",
    "no_tenant",
    "profiles_file",
    "read_key_file",
    "remote",
    "remote_client",
    "target",
    "tenant_transport",
    "transport",
]

PROFILES_FILE: Final = "profiles.toml"
_PROFILE_FIELDS: Final = frozenset({"url", "key_env", "key_file"})
_MAX_KEY_BYTES: Final = 4096


@dataclass(frozen=True)
class Given:
    """What the root options said, and whether on the command line (not the environment)."""

    url: str | None = None
    key: str | None = field(default=None, repr=False)
    profile: str | None = None
    url_on_line: bool = False
    key_on_line: bool = False
    profile_on_line: bool = False


@dataclass(frozen=True)
class Remote:
    """A deployment to call: its base URL and the API key to present (None: none)."""

    url: str
    key: str | None = field(default=None, repr=False)
    profile: str | None = None


_GIVEN: ContextVar[Given] = ContextVar("troupe_given", default=Given())  # noqa: B039 - frozen


def given(options: Given | None = None) -> Given:
    """Remember the root options (the root callback does, once per invocation); what they are."""
    if options is not None:
        _GIVEN.set(options)
    return _GIVEN.get()


def profiles_file() -> Path:
    """``$TROUPE_CONFIG_DIR/profiles.toml``, else ``~/.config/troupe/profiles.toml``."""
    folder = os.environ.get("TROUPE_CONFIG_DIR")
    if folder:
        return Path(folder).expanduser() / PROFILES_FILE
    config = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(config).expanduser() / "troupe" / PROFILES_FILE


def read_key_file(path: Path) -> str:
    """The API key kept in ``path``: a regular file of this user's, readable by nobody else.

    Refused (a usage error, exit 2), like ssh refuses a private key others can read: a file
    group or others may read, write or run; one owned by another user; a link to one; an
    empty or oversized one.
    """
    try:
        info = path.stat()
    except OSError as exc:
        raise usage(f"key file {path}: {exc.strerror or exc}") from None
    if not stat.S_ISREG(info.st_mode):
        raise usage(f"key file {path} is not a regular file")
    if info.st_uid != os.getuid():
        raise usage(f"key file {path} belongs to another user (uid {info.st_uid})")
    mode = stat.S_IMODE(info.st_mode)
    if mode & 0o077:
        raise usage(
            f"key file {path} is open to group or others (mode {mode:04o}): "
            f"`chmod 600 {path}` so that only you can read it"
        )
    if info.st_size > _MAX_KEY_BYTES:
        raise usage(f"key file {path} is {info.st_size} bytes: not an API key")
    key = path.read_text(encoding="utf-8", errors="replace").strip()
    if not key or any(c.isspace() for c in key):
        raise usage(f"key file {path} holds no API key (one line, no spaces)")
    return key


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _profile(name: str) -> Remote:
    """The profile ``name`` of the profiles file, its key read from its variable or file."""
    path = profiles_file()
    try:
        document = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise usage(f"--profile {name}: there is no profiles file {path}") from None
    except OSError as exc:
        raise usage(f"profiles file {path}: {exc.strerror or exc}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise usage(f"profiles file {path} is not valid TOML: {exc}") from None
    profiles = document.get("profiles", {})
    entry = profiles.get(name) if isinstance(profiles, dict) else None
    if not isinstance(entry, dict):
        known = ", ".join(sorted(profiles)) if isinstance(profiles, dict) else ""
        raise usage(f"no profile {name!r} in {path} (profiles: {known or 'none'})")
    where = f"profile {name!r} in {path}"
    if "key" in entry:
        raise usage(f"{where} holds a key: keep it in key_env (a variable) or key_file")
    unknown = sorted(set(entry) - _PROFILE_FIELDS)
    if unknown:
        raise usage(f"{where}: unknown field(s) {', '.join(unknown)} (url, key_env, key_file)")
    url = entry.get("url")
    if not isinstance(url, str):
        raise usage(f"{where} has no url")
    if "key_env" in entry and "key_file" in entry:
        raise usage(f"{where}: give key_env or key_file, not both")
    return Remote(url, _profile_key(entry, where, path.parent), name)


def _profile_key(entry: dict[str, object], where: str, folder: Path) -> str | None:
    variable, file = entry.get("key_env"), entry.get("key_file")
    if variable is not None:
        if not isinstance(variable, str) or not variable:
            raise usage(f"{where}: key_env must name an environment variable")
        key = os.environ.get(variable)
        if not key:
            raise usage(f"{where}: its key variable ${variable} is not set")
        return key
    if file is not None:
        if not isinstance(file, str) or not file:
            raise usage(f"{where}: key_file must be a path")
        return read_key_file(folder / Path(file).expanduser())  # relative: to the profiles file
    return None


def target() -> Remote | None:
    """The deployment the options name, or None: the command runs on Ray."""
    options = given()
    chosen = _profile(options.profile) if options.profile else None
    url = options.url if options.url_on_line or chosen is None else None
    key = options.key if options.key_on_line or chosen is None else None
    if chosen is not None:
        url = url or chosen.url
        key = key or chosen.key
    if not url:
        if options.key_on_line:
            raise usage("--key needs a deployment: give --url or --profile")
        return None
    return Remote(url.strip(), key, options.profile)


def remote_client(remote: Remote) -> Client:
    """An HTTP client of ``remote`` (a context manager: closed when the command ends).

    A URL or key the client refuses is a usage error (exit 2); the message never holds the
    key. A key sent over plain http to another machine is sent, with a warning.
    """
    from raytroupe.protocols import InvalidInput
    from raytroupe.runtime.http_client import Client

    said_as = f"profile {remote.profile!r}" if remote.profile else "--url/--key"
    try:
        client = Client(remote.url, remote.key)
    except InvalidInput as exc:
        raise usage(f"{said_as}: {exc.message}") from None
    host = client.url.host
    if remote.key and client.url.scheme == "http" and not _loopback(host):
        ERR.print(f"warning: the API key goes to {host} unencrypted (http://); use https://",
                  style="yellow", markup=False, soft_wrap=True)  # fmt: skip
    return client


def remote(address: str | None = None) -> Client | None:
    """A client of the deployment the options name; None when the command should join Ray.

    An ``--address`` (a Ray) on the command line beats a deployment named in the environment
    (``$TROUPE_URL``, ``$TROUPE_PROFILE``); with ``--url`` or ``--profile`` on the command
    line too, it is a usage error: the two name different places.
    """
    if address:
        options = given()
        if options.url_on_line or options.profile_on_line:
            raise usage("give --address (a Ray) or --url/--profile (a deployment), not both")
        return None
    where = target()
    return None if where is None else remote_client(where)


def local_only(command: str) -> None:
    """Refuse a deployment named on the command line for a command that acts on this machine."""
    options = given()
    if options.url_on_line or options.profile_on_line:
        raise usage(f"`troupe {command}` acts on this machine's Ray: it takes no --url/--profile")


def no_tenant(tenant: str | None, default: str | None = None) -> None:
    """Refuse ``--tenant`` over HTTP: there the key decides the tenant."""
    if tenant is not None and tenant != default:
        raise usage("--tenant: over HTTP the API key decides the tenant; use that tenant's key")


@contextmanager
def transport(
    address: str | None, state_dir: Path | None, *, start_local: bool = False
) -> Iterator[Client | Runtime]:
    """Where a command's operations go, chosen once for the command.

    The deployment the options name (its HTTP client), else the Ray at ``address`` or the
    one `troupe up` started (the driver); with ``start_local``, a Ray of its own when there
    is none.

    Both have every declared operation (:mod:`raytroupe.runtime.operations`), with the same
    arguments and answers, so a command calls it without asking which it has.
    """
    from raytroupe.runtime.cli._connect import close, connect_from

    client = remote(address)
    if client is not None:
        with client:
            yield client
        return
    rt = connect_from(address, state_dir, start_local=start_local)
    try:
        yield rt
    finally:
        close(rt)


@contextmanager
def tenant_transport(
    tenant: str | None, address: str | None, state_dir: Path | None, *, default: str | None
) -> Iterator[Client | Runtime | TenantView]:
    """:func:`transport`, acting for ``tenant`` (``--tenant``) where the command is local.

    Over HTTP the key decides the tenant, and a ``--tenant`` other than ``default`` (the
    option's default) is refused; on the driver, a tenant other than ``default`` is
    ``as_tenant(tenant)``, with that tenant's policy and only its jobs and data.
    """
    from raytroupe.runtime.http_client import Client

    with transport(address, state_dir) as api:
        if isinstance(api, Client):
            no_tenant(tenant, default)
            yield api
        else:
            yield api if tenant is None or tenant == default else api.as_tenant(tenant)
