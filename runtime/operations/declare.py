"""An operation of the API, declared once: what it takes, what it answers, who may run it.

A declaration is an async function of ``(at, ...)`` decorated with :func:`operation`, which
names its HTTP method and path::

    @operation("POST", "/v1/skills/{name}/rollback", cli="skills rollback", admin=True)
    async def rollback_skill(at: At, name: str, version: str | None = None) -> SkillSpec:
        \"\"\"Make an earlier version current again (default: the one before).\"\"\"
        return await at.system.rollback_skill(name, version, source=at.source)

Its signature (after ``at``) is the operation's, on every surface; its return annotation is
its answer; its docstring its documentation; its body its implementation, run where the
cluster is. Each surface is derived from it and never restates it:

- the driver's :class:`~raytroupe.runtime.driver.Runtime` and a tenant's view of it run the
  body in-process, acting as an admin or as the tenant;
- the HTTP clients send it by one rule: the path's ``{names}`` are path segments; the other
  arguments are the query of a GET or DELETE, else the JSON body (the model itself when that
  is the only one, else an object of them);
- the HTTP API serves it by the same rule (:mod:`raytroupe.deployments.declared`);
- the CLI calls it on whichever of the two a command was pointed at.

An operation declared with a :class:`Stream` answers a stream of items (its answer is an
``AsyncIterator``, got once the operation has opened it); over HTTP, as Server-Sent Events
that a client follows across reconnects.

Those methods are made by :mod:`raytroupe.runtime.operations.surfaces`.

Nothing here imports Ray, FastAPI or the deployments: the HTTP clients import it.
"""

from __future__ import annotations

import functools
import inspect
import re
import sys
import types
import typing
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import (
    TYPE_CHECKING,
    Annotated,
    Any,
    Concatenate,
    Final,
    Generic,
    ParamSpec,
    TypeAlias,
    TypeVar,
)

from pydantic import BaseModel, Field, TypeAdapter, ValidationError

from raytroupe.protocols import Forbidden, InvalidInput, TroupeError
from raytroupe.runtime.http_calls import Call, json_body, nothing, read, segment

if TYPE_CHECKING:
    from raytroupe.runtime.client import SystemClient

__all__ = [
    "Arguments",
    "At",
    "JobId",
    "Operation",
    "Reply",
    "Stream",
    "WireName",
    "given",
    "operation",
]

P = ParamSpec("P")
T = TypeVar("T")

JobId = Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[^\x00]+$")]
"""A job's id as a caller gives it: no job's id holds a NUL (nor can a state store keep one)."""

Arguments: TypeAlias = dict[str, Any]
"""An operation's arguments by parameter name: each of its own type (the declaration's)."""
Types: TypeAlias = dict[str, Any]
"""Each parameter's type (and ``return``'s) by name, as ``typing.get_type_hints`` gives."""

_QUERY_METHODS: Final = frozenset({"GET", "DELETE"})
_METHODS: Final = _QUERY_METHODS | {"POST", "PUT", "PATCH"}
_PATH_NAME: Final = re.compile(r"\{([a-z_][a-z0-9_]*)\}")
_PATH_FIELD: Final = re.compile(r"\{([a-z_][a-z0-9_]*)\.([a-z_][a-z0-9_]*)\}")
_SCALARS: Final = (str, int, float, bool, type(None))


@dataclass
class Reply:
    """What an operation says of its answer besides the answer: whether it made it.

    ``created`` False: what ``PUT`` answers was there already (HTTP says 200, not 201).
    """

    created: bool | None = None


@dataclass(frozen=True)
class Stream:
    """How an operation's answer streams: what says each item's place, and where it resumes.

    The answer is ``AsyncIterator[Item | None]`` (None: nothing new for a while, a keep-alive).
    ``id``: the item's field that is its place in the stream (an SSE message's ``id``);
    ``event``: the field that names its kind (``event``); ``last``: the boolean field that
    marks the stream's last item. ``resume``: the parameter a reader that reconnects sets to
    the last ``id`` it had (HTTP's ``Last-Event-ID`` sets it too); ``follow``: the boolean
    parameter that, False, asks for the items so far (the stream's end is then no break).
    ``late``: the error of a reader that gave up waiting, from the arguments and its seconds.
    """

    id: str
    event: str
    last: str
    resume: str
    follow: str
    late: Callable[[Mapping[str, Any], float], TroupeError]


@dataclass(frozen=True)
class At:
    """Who an operation runs for, and the cluster it runs on.

    ``tenant`` is the caller's tenant; ``admin`` callers (admin keys, the driver) reach every
    tenant's teams and skills. ``source`` is what change logs record as its author
    (``driver``, ``api:<key name>``). ``every_tenant``: the caller reaches every tenant's jobs
    (the driver); a key, an admin's too, reaches its tenant's.
    """

    system: SystemClient
    tenant: str
    admin: bool
    source: str
    every_tenant: bool = False
    reply: Reply = field(default_factory=Reply, compare=False)
    request_id: str | None = None
    """The HTTP request's id (its answer's ``X-Request-Id``), for the job's records."""
    traceparent: str | None = None
    """The caller's W3C trace context (an HTTP ``traceparent`` header; a driver's span)."""

    @property
    def scope(self) -> str | None:
        """The tenant whose view the caller has: None for an admin (every tenant's)."""
        return None if self.admin else self.tenant

    @property
    def name(self) -> str:
        """The caller as records of its acts name it: its key's name, or ``driver``."""
        return self.source.removeprefix("api:")

    @property
    def jobs_of(self) -> str | None:
        """The tenant whose jobs the caller reaches: None for the driver (every tenant's)."""
        return None if self.every_tenant else self.tenant


class Operation(Generic[P, T]):
    """One declared operation (see the module's documentation); made by :func:`operation`."""

    def __init__(
        self,
        run: Callable[Concatenate[At, P], Awaitable[T]],
        method: str,
        path: str,
        *,
        admin: bool,
        status: int,
        long_running: bool,
        cli: str,
        location: Callable[[T], str] | None = None,
        readers: Mapping[str, Callable[[bytes], Any]] | None = None,
        stream: Stream | None = None,
    ) -> None:
        if method not in _METHODS:
            raise ValueError(f"{run.__name__}: {method} is not an HTTP method of the API")
        self.run = run
        self.name: str = run.__name__
        self.doc: str = inspect.cleandoc(run.__doc__ or "")
        self.method = method
        self.path = path
        self.admin = admin
        self.status = status
        self.long_running = long_running
        """An HTTP client waits for its answer as long as it takes (no read timeout)."""
        self.cli = cli
        """The ``troupe`` command that runs it (``skills rollback``)."""
        self.location = location
        """Where what it made is (an HTTP answer's ``Location``), from its answer."""
        self.readers: Mapping[str, Callable[[bytes], Any]] = readers or {}
        """How its one body model is read from a body of another content type than JSON
        (``application/yaml``: a skill file), by content type."""
        self.path_names = tuple(_PATH_NAME.findall(path))
        self.path_fields: dict[str, tuple[str, str]] = {
            field: (param, field) for param, field in _PATH_FIELD.findall(path)
        }
        """A segment that is a field of a body parameter (``{team.name}``), by its route name
        (``name``): the URL says it, and the body must say the same."""
        self.route_path = _PATH_FIELD.sub(r"{\2}", path)
        self.stream = stream
        """How its answer streams (None: it answers once)."""
        if stream is not None and (
            method != "GET" or {stream.resume, stream.follow} - set(self.signature.parameters)
        ):
            raise TypeError(f"{self.name}: a stream is a GET's, resumed and followed by its own")
        """The path as the HTTP router reads it (``{team.name}`` is ``{name}``)."""
        self._hints: Types | None = None

    def __repr__(self) -> str:
        return f"<operation {self.name}: {self.method} {self.path}>"

    @functools.cached_property
    def signature(self) -> inspect.Signature:
        """The operation's parameters (without ``at``) and its answer."""
        full = inspect.signature(self.run)
        return full.replace(parameters=list(full.parameters.values())[1:])

    @property
    def hints(self) -> Types:
        """Each parameter's type on the wire, and ``return`` the answer's, resolved.

        A parameter declared ``Model | Mapping[str, Any]`` (callers may give the model's
        fields) is a ``Model`` on the wire: checked into one before it runs.
        """
        if self._hints is None:
            hints = typing.get_type_hints(self.run, include_extras=True)
            hints.pop("at", None)
            hints = {name: _wire(tp) for name, tp in hints.items()}
            for name in self.path_names:
                if _bare(hints.get(name)) is not str:
                    raise TypeError(f"{self.name}: path parameter {name!r} must be a str")
            for route_name, (param, _) in self.path_fields.items():
                if param not in self.body_names():
                    raise TypeError(f"{self.name}: {param!r} of the path is no body parameter")
                if route_name in self.signature.parameters:
                    raise TypeError(f"{self.name}: {{{route_name}}} would be the path's twice")
            if self.method in _QUERY_METHODS:
                for name, tp in hints.items():
                    if name != "return" and name not in self.path_names and not _scalar(tp):
                        raise TypeError(f"{self.name}: {name!r} cannot travel in a query")
            self._hints = hints
        return self._hints

    @property
    def tag(self) -> str:
        """The family it belongs to (its module's ``TAG``): the OpenAPI document's group."""
        module = sys.modules.get(self.run.__module__)
        return str(getattr(module, "TAG", self.path.split("/")[2]))

    @property
    def answer(self) -> Any:
        """The type of the answer (None: the operation answers nothing)."""
        return self.hints["return"]

    @property
    def item(self) -> type[BaseModel]:
        """The type of each item of a streamed answer (``AsyncIterator[Item | None]``'s)."""
        (stream,) = typing.get_args(self.answer) or (None,)
        items = [a for a in typing.get_args(stream) if a is not type(None)] or [stream]
        if typing.get_origin(self.answer) is not AsyncIterator or not (
            len(items) == 1 and isinstance(items[0], type) and issubclass(items[0], BaseModel)
        ):
            raise TypeError(f"{self.name}: a stream answers AsyncIterator[Model | None]")
        return items[0]

    def body_names(self) -> tuple[str, ...]:
        """The parameters that travel in the JSON body (none for a GET or DELETE)."""
        if self.method in _QUERY_METHODS:
            return ()
        return tuple(n for n in self.signature.parameters if n not in self.path_names)

    def body_model(self) -> type[BaseModel] | None:
        """The one model the body is, when the body carries exactly one model parameter."""
        names = self.body_names()
        if len(names) == 1:
            tp = self.hints[names[0]]
            if isinstance(tp, type) and issubclass(tp, BaseModel):
                return tp
        return None

    def bind(self, *args: Any, **kwargs: Any) -> Arguments:
        """The arguments by name, defaults filled in.

        Raises:
            InvalidInput: they do not fit the operation's parameters.
        """
        try:
            bound = self.signature.bind(*args, **kwargs)
        except TypeError as e:
            raise InvalidInput(f"{self.name}: {e}") from None
        bound.apply_defaults()
        return dict(bound.arguments)

    def checked(self, arguments: Mapping[str, Any]) -> Arguments:
        """``arguments`` validated against the parameters' types (mappings become models).

        Raises:
            InvalidInput: one does not fit (``detail['field']`` names it).
        """
        out: Arguments = {}
        for name, value in arguments.items():
            try:
                out[name] = _adapter(self.hints[name]).validate_python(value)
            except ValidationError as e:
                first = e.errors(include_url=False, include_input=False)[0]
                where = ".".join((name, *(str(p) for p in first["loc"])))
                raise InvalidInput(f"{self.name}: {where}: {first['msg']}", field=where) from None
        return out

    async def invoke(self, at: At, arguments: Mapping[str, Any]) -> T:
        """Run the operation for ``at`` (the implementation: where the cluster is).

        Raises:
            Forbidden: it is for admins, and ``at`` is not one.
        """
        if self.admin and not at.admin:
            raise Forbidden(f"{self.name} is for admin keys only", operation=self.name)
        call: Callable[..., Awaitable[T]] = self.run
        return await call(at, **arguments)

    async def run_for(self, at: At, arguments: Mapping[str, Any]) -> T:
        """Check ``arguments`` (by name, as :meth:`bind` gives) and run the operation for ``at``.

        Raises:
            InvalidInput: an argument does not fit its parameter.
            Forbidden: it is for admins, and ``at`` is not one.
        """
        return await self.invoke(at, self.checked(arguments))

    def call(self, *args: Any, **kwargs: Any) -> Call[T]:
        """The HTTP request that asks for the operation with these arguments."""
        arguments = self.bind(*args, **kwargs)
        path = self.path
        for name in self.path_names:
            path = path.replace(f"{{{name}}}", segment(arguments.pop(name), name))
        for param, name in self.path_fields.values():
            value = field_of(arguments[param], name)
            if not isinstance(value, str):
                raise InvalidInput(f"the {param} has no {name}", field=f"{param}.{name}")
            path = path.replace(f"{{{param}.{name}}}", segment(value, f"{param}.{name}"))
        streamed = self.answer is type(None) or self.stream is not None  # not read at once
        reader: Callable[[Any], T] = nothing if streamed else read(self.answer)  # type: ignore[assignment]
        if self.method in _QUERY_METHODS:
            params = {n: v for n, v in arguments.items() if v is not None}
            return Call(self.method, path, reader, params=params)
        if self.body_model() is not None:
            (value,) = arguments.values()
            return Call(self.method, path, reader, body=json_body(value, next(iter(arguments))))
        body = {self.wire_name(n): v for n, v in arguments.items()}
        return Call(self.method, path, reader, body=json_body(body, "body"))

    def wire_name(self, name: str) -> str:
        """Parameter ``name`` as the JSON body names it: its :class:`WireName`, if any."""
        for meta in getattr(self.hints[name], "__metadata__", ()):  # Annotated's
            if isinstance(meta, WireName):
                return str(meta.name)
        return name


@dataclass(frozen=True)
class WireName:
    """The name a parameter has in the JSON body, where it differs from the parameter's.

    ``session_id: Annotated[SessionId | None, WireName("id")]``: the body says ``id`` (as it
    did before the operation was declared), the parameter cannot (``id`` is a builtin).
    """

    name: str


def operation(
    method: str,
    path: str,
    *,
    cli: str,
    admin: bool = False,
    status: int = 200,
    long_running: bool = False,
    location: Callable[[Any], str] | None = None,
    readers: Mapping[str, Callable[[bytes], Any]] | None = None,
    stream: Stream | None = None,
) -> Callable[[Callable[Concatenate[At, P], Awaitable[T]]], Operation[P, T]]:
    """Declare the decorated function an operation at ``method`` ``path`` (see the module).

    ``cli``: the ``troupe`` command that runs it. ``admin``: for admin keys and the driver
    only. ``status``: of a successful answer. ``long_running``: it may take minutes, and HTTP
    clients wait for it without a read timeout. ``location``: the path of what it made, from
    its answer (the HTTP answer's ``Location`` header). ``readers``: by content type, how
    the HTTP route reads its one body model from a body that is not JSON (run off the loop).
    ``stream``: it answers a stream of items (see :class:`Stream`).
    """

    def declare(run: Callable[Concatenate[At, P], Awaitable[T]]) -> Operation[P, T]:
        return Operation(
            run, method, path, admin=admin, status=status, long_running=long_running, cli=cli,
            location=location, readers=readers, stream=stream,
        )  # fmt: skip

    return declare


M = TypeVar("M", bound=BaseModel)


def field_of(value: Any, field: str) -> Any:
    """Field ``field`` of a model, or the key of a mapping (None: it has none)."""
    if isinstance(value, Mapping):
        return value.get(field)
    return getattr(value, field, None)


def given(model: type[M], value: M | Mapping[str, Any]) -> M:
    """A ``Model | Mapping`` parameter as the model it was checked into on every surface."""
    return value if isinstance(value, model) else model.model_validate(value)


def _wire(tp: Any) -> Any:
    """``tp`` as it travels: ``Model | Mapping[...]`` is ``Model``."""
    if typing.get_origin(tp) in {typing.Union, types.UnionType}:
        args = typing.get_args(tp)
        models = [a for a in args if isinstance(a, type) and issubclass(a, BaseModel)]
        mappings = [a for a in args if typing.get_origin(a) is Mapping]
        if len(models) == 1 and mappings and len(models) + len(mappings) == len(args):
            return models[0]
    return tp


def _bare(tp: Any) -> Any:
    """``tp`` without its ``Annotated`` constraints."""
    return typing.get_args(tp)[0] if typing.get_origin(tp) is typing.Annotated else tp


def _scalar(tp: Any) -> bool:
    if typing.get_origin(tp) in {typing.Union, types.UnionType}:
        return all(_scalar(arg) for arg in typing.get_args(tp))
    if typing.get_origin(tp) is typing.Annotated:
        return _scalar(typing.get_args(tp)[0])
    if typing.get_origin(tp) is typing.Literal:
        return all(isinstance(value, _SCALARS) for value in typing.get_args(tp))
    return tp in _SCALARS


_ADAPTERS: dict[Any, TypeAdapter[Any]] = {}


def _adapter(tp: Any) -> TypeAdapter[Any]:
    found = _ADAPTERS.get(tp)
    if found is None:
        found = _ADAPTERS[tp] = TypeAdapter(tp)
    return found
