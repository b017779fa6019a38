"""The surfaces of a declared operation: a method of each class that offers it.

:func:`in_process` makes the driver's (and a tenant's view's) method, which runs the
operation where the driver is; :func:`over_http` and :func:`over_http_async` the HTTP
clients', which send it by the rule of :mod:`raytroupe.runtime.operations.declare`. Each is a
descriptor with the operation's name, signature and documentation.

A streamed operation's method gives an iterator of its items (a coroutine method's, an async
iterator), and takes one keyword of its own: ``timeout``, the seconds its reader waits for the
stream's last item before it raises the stream's ``late`` error.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import inspect
import time
import warnings
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterator
from typing import (
    Any,
    Concatenate,
    Final,
    Generic,
    ParamSpec,
    TypeVar,
    overload,
)

from raytroupe.protocols import TroupeError
from raytroupe.runtime.http_calls import Call
from raytroupe.runtime.http_follow import checked_timeout
from raytroupe.runtime.operations.declare import Arguments, At, Operation

__all__ = [
    "OLDER_FORM",
    "handle",
    "in_process",
    "invoke",
    "over_http",
    "over_http_async",
    "pulled",
    "pulled_async",
    "renamed",
    "widens",
]

P = ParamSpec("P")
T = TypeVar("T")
I = TypeVar("I")  # noqa: E741 - an item of a stream
R = TypeVar("R")  # what a streamed method answers: an iterator, or an async one


class _Surface(Generic[P, T]):
    """A method of a surface class, made from an operation (a descriptor)."""

    def __init__(self, op: Operation[P, T]) -> None:
        self.op = op
        self.__doc__ = op.doc

    def __set_name__(self, owner: type, name: str) -> None:
        if name != self.op.name:
            raise TypeError(f"{owner.__name__}.{name} is operation {self.op.name!r}: same name")

    @property
    def __signature__(self) -> inspect.Signature:
        return self.signature

    @property
    def signature(self) -> inspect.Signature:
        """The method's parameters (without ``self``) and answer: the operation's."""
        return self.op.signature

    def _unbound(self, owner: type | None) -> Any:
        """What the class gives for the name: a function of ``(self, ...)``, as a method is."""

        def function(obj: object, *args: Any, **kwargs: Any) -> Any:
            return self.__get__(obj, owner)(*args, **kwargs)  # type: ignore[attr-defined]

        named = self._named(function)
        this = inspect.Parameter("self", inspect.Parameter.POSITIONAL_ONLY)
        named.__signature__ = self.signature.replace(
            parameters=[this, *self.signature.parameters.values()]
        )
        return named

    def _named(self, method: Callable[..., Any]) -> Any:
        method.__name__ = method.__qualname__ = self.op.name
        method.__doc__ = self.op.doc
        method.__signature__ = self.signature  # type: ignore[attr-defined]
        return method


class _Blocking(_Surface[P, T], ABC):
    """A method that answers when the operation has: ``self._bound(obj)`` is the call."""

    @overload
    def __get__(self, obj: None, owner: type | None = None) -> Callable[Concatenate[Any, P], T]: ...
    @overload
    def __get__(self, obj: object, owner: type | None = None) -> Callable[P, T]: ...
    def __get__(self, obj: object, owner: type | None = None) -> Any:
        if obj is None:
            return self._unbound(owner)
        return self._named(self._bound(obj))

    @abstractmethod
    def _bound(self, obj: object) -> Callable[..., T]:
        """The call of the operation for ``obj`` (a client, a driver)."""


class _InProcess(_Blocking[P, T]):
    def __init__(
        self,
        op: Operation[P, T],
        legacy: Callable[[Arguments], Arguments] | None,
        *,
        tenant_keyword: bool,
        missing: tuple[type[TroupeError], Any] | None,
    ) -> None:
        super().__init__(op)
        self.legacy = legacy
        self.tenant_keyword = tenant_keyword
        self.missing = missing

    def _bound(self, obj: object) -> Callable[..., T]:
        op, legacy = self.op, self.legacy
        at: Callable[[], At] = obj._at  # type: ignore[attr-defined]
        run: Callable[[Coroutine[Any, Any, T]], T] = obj._run  # type: ignore[attr-defined]

        def method(*args: Any, **kwargs: Any) -> T:
            who = at()
            if self.tenant_keyword and "tenant" in kwargs:
                tenant = kwargs.pop("tenant")
                warnings.warn(
                    f"{op.name}(tenant=...) is deprecated: as_tenant(tenant).{op.name}(...)",
                    DeprecationWarning,
                    stacklevel=2,
                )
                who = dataclasses.replace(who, tenant=tenant)
            arguments = op.bind(*args, **kwargs)
            if legacy is not None:
                arguments = legacy(arguments)
            if self.missing is None:
                return run(op.run_for(who, arguments))
            error, answer = self.missing
            try:
                return run(op.run_for(who, arguments))
            except error as e:
                warnings.warn(
                    f"{op.name} answering {answer!r} for what is not there is deprecated: "
                    f"it will raise {type(e).__name__} ({e})",
                    DeprecationWarning,
                    stacklevel=2,
                )
                return answer  # type: ignore[no-any-return]

        return method


OLDER_FORM: Any = NotImplemented
"""What an ``older`` function answers for a call that is not of the older form."""


class _OverHttp(_Blocking[P, T]):
    def __init__(self, op: Operation[P, T], older: Callable[..., Any] | None) -> None:
        super().__init__(op)
        self.older = older

    def _bound(self, obj: object) -> Callable[..., T]:
        op, older = self.op, self.older
        send: Callable[[Call[T], bool], T] = obj._send_op  # type: ignore[attr-defined]

        def method(*args: Any, **kwargs: Any) -> T:
            if older is not None:
                answer = older(obj, *args, **kwargs)
                if answer is not OLDER_FORM:
                    return answer  # type: ignore[no-any-return]
            return send(op.call(*args, **kwargs), op.long_running)

        return method


class _OverHttpAsync(_Surface[P, T]):
    def __init__(self, op: Operation[P, T], older: Callable[..., Any] | None) -> None:
        super().__init__(op)
        self.older = older

    @overload
    def __get__(
        self, obj: None, owner: type | None = None
    ) -> Callable[Concatenate[Any, P], Awaitable[T]]: ...
    @overload
    def __get__(self, obj: object, owner: type | None = None) -> Callable[P, Awaitable[T]]: ...
    def __get__(self, obj: object, owner: type | None = None) -> Any:
        if obj is None:
            return self._unbound(owner)
        op, older = self.op, self.older
        send: Callable[[Call[T], bool], Awaitable[T]] = obj._send_op  # type: ignore[attr-defined]

        async def method(*args: Any, **kwargs: Any) -> T:
            if older is not None:
                answer = older(obj, *args, **kwargs)
                if answer is not OLDER_FORM:
                    return await answer  # type: ignore[no-any-return]
            return await send(op.call(*args, **kwargs), op.long_running)

        return self._named(method)


_TIMEOUT: Final = inspect.Parameter(
    "timeout", inspect.Parameter.KEYWORD_ONLY, default=None, annotation="float | None"
)
_END: Final = object()
_LATE: Final = object()


class _Streamed(_Surface[..., Any], Generic[R]):
    """A streamed operation's method: ``(*arguments, timeout=None)``, its items' iterator.

    ``_items(obj)`` is what the method answers, from the arguments (by name) and the timeout.
    """

    def __init__(self, op: Operation[..., Any], *, asynchronous: bool) -> None:
        super().__init__(op)
        if op.stream is None:
            raise TypeError(f"{op.name} does not stream")
        self.stream = op.stream
        self.asynchronous = asynchronous

    @property
    def signature(self) -> inspect.Signature:
        items = AsyncIterator if self.asynchronous else Iterator
        return self.op.signature.replace(
            parameters=[*self.op.signature.parameters.values(), _TIMEOUT],
            return_annotation=items[self.op.item],
        )

    @overload
    def __get__(self, obj: None, owner: type | None = None) -> Callable[..., R]: ...
    @overload
    def __get__(self, obj: object, owner: type | None = None) -> Callable[..., R]: ...
    def __get__(self, obj: object, owner: type | None = None) -> Any:
        if obj is None:
            return self._unbound(owner)
        op, items = self.op, self._items(obj)

        def method(*args: Any, timeout: float | None = None, **kwargs: Any) -> R:
            seconds = None if timeout is None else checked_timeout(timeout)
            return items(op.bind(*args, **kwargs), seconds)

        return self._named(method)

    @abstractmethod
    def _items(self, obj: object) -> Callable[[Arguments, float | None], R]:
        """For ``obj``: the items of the stream, from the arguments and the timeout."""


class _StreamedInProcess(_Streamed[Iterator[I]]):
    def _items(self, obj: object) -> Callable[[Arguments, float | None], Iterator[I]]:
        at: Callable[[], At] = obj._at  # type: ignore[attr-defined]
        run: Callable[[Coroutine[Any, Any, Any]], Any] = obj._run  # type: ignore[attr-defined]
        return lambda arguments, timeout: pulled(run, self.op, at(), arguments, timeout)


class _StreamedOverHttp(_Streamed[R]):
    def _items(self, obj: object) -> Callable[[Arguments, float | None], R]:
        follow: Callable[..., Any] = obj._follow_op  # type: ignore[attr-defined]
        return lambda arguments, timeout: follow(self.op, arguments, timeout)


def pulled(
    run: Callable[[Coroutine[Any, Any, Any]], Any],
    op: Operation[..., AsyncIterator[I | None]],
    at: At,
    arguments: Arguments,
    timeout: float | None,
) -> Iterator[I]:
    """The items of streamed ``op`` run for ``at``, each pulled by ``run``, until its last.

    ``run`` runs a coroutine and answers its result (:meth:`Portal.run`): each it is given, on
    the one event loop where the stream lives. Keep-alives (None) are not items.

    Raises:
        TroupeError: the operation's (at once, or as the stream fails).
        the stream's ``late`` error: ``timeout`` seconds passed before its last item.
    """
    deadline = None if timeout is None else time.monotonic() + timeout
    items: AsyncIterator[I | None] = run(op.run_for(at, arguments))
    try:
        while (item := run(_next(items, deadline))) is not _END:
            if item is _LATE:
                raise _late(op, arguments, timeout)
            if item is not None:
                yield item
    finally:
        with contextlib.suppress(RuntimeError):  # the runtime shut down before the reader
            run(items.aclose())  # type: ignore[attr-defined]


async def pulled_async(
    arun: Callable[[Coroutine[Any, Any, Any]], Awaitable[Any]],
    op: Operation[..., AsyncIterator[I | None]],
    at: At,
    arguments: Arguments,
    timeout: float | None,
) -> AsyncIterator[I]:
    """:func:`pulled`, for ``async for``: ``arun`` awaits each coroutine where the stream is."""
    deadline = None if timeout is None else time.monotonic() + timeout
    items: AsyncIterator[I | None] = await arun(op.run_for(at, arguments))
    try:
        while (item := await arun(_next(items, deadline))) is not _END:
            if item is _LATE:
                raise _late(op, arguments, timeout)
            if item is not None:
                yield item
    finally:
        await arun(items.aclose())  # type: ignore[attr-defined]


async def _next(items: AsyncIterator[I | None], deadline: float | None) -> Any:
    """The stream's next item; ``_END`` after its last, ``_LATE`` once ``deadline`` passed."""
    left = None if deadline is None else deadline - time.monotonic()
    if left is not None and left <= 0:
        return _LATE
    try:
        async with asyncio.timeout(left) as limit:
            return await anext(items)
    except StopAsyncIteration:
        return _END
    except TimeoutError:
        if not limit.expired():
            raise  # the stream's own, not the deadline's
        return _LATE


def _late(op: Operation[..., Any], arguments: Arguments, timeout: float | None) -> TroupeError:
    assert op.stream is not None  # noqa: S101 - only streams are pulled
    return op.stream.late(arguments, timeout or 0.0)


@overload
def in_process(  # type: ignore[overload-overlap]
    op: Operation[P, AsyncIterator[I | None]],
) -> _Streamed[Iterator[I]]: ...
@overload
def in_process(
    op: Operation[P, T],
    *,
    legacy: Callable[[Arguments], Arguments] | None = None,
    tenant_keyword: bool = False,
    missing: tuple[type[TroupeError], Any] | None = None,
) -> _InProcess[P, T]: ...
def in_process(
    op: Operation[P, T],
    *,
    legacy: Callable[[Arguments], Arguments] | None = None,
    tenant_keyword: bool = False,
    missing: tuple[type[TroupeError], Any] | None = None,
) -> _InProcess[P, T] | _Streamed[Any]:
    """``op`` as a method of a class with ``_at()`` (who calls) and ``_run(coroutine)``.

    Where the method took or answered something else before, it still does, and warns that
    it is deprecated: ``legacy`` turns arguments of a form it took into the operation's;
    ``tenant_keyword``: it took ``tenant=``, and runs for that tenant; ``missing``, an error
    and an answer (``(KnowledgeNotFound, False)``): it answered that where the operation
    raises that error.
    """
    if op.stream is not None:
        return _StreamedInProcess(op, asynchronous=False)
    return _InProcess(op, legacy, tenant_keyword=tenant_keyword, missing=missing)


F = TypeVar("F", bound=Callable[..., Any])


def widens(op: Operation[..., Any]) -> Callable[[F], F]:
    """Mark the decorated method as ``op`` on a surface that takes more than ``op`` does.

    The driver's ``ingest`` also reads files and sends any number of documents: it takes
    every parameter of ``op`` and more, and runs ``op`` for what it was given.
    """

    def mark(method: F) -> F:
        method.widens = op  # type: ignore[attr-defined]
        return method

    return mark


def handle(op: Operation[..., Any]) -> Callable[[F], F]:
    """Mark the decorated method as ``op`` on a surface that answers with a handle.

    The driver's ``session(id)`` and ``job(id)`` give a handle through which the caller acts
    on the thing (submits into the session, waits for the job), whose ``info()`` answers
    ``op``; a tenant's view's ``submit`` gives a handle on the job it starts. The method takes
    every parameter of ``op``; :func:`invoke` runs ``op`` itself on any surface.
    """

    def mark(method: F) -> F:
        method.handle_of = op  # type: ignore[attr-defined]
        return method

    return mark


@overload
def over_http(  # type: ignore[overload-overlap]
    op: Operation[P, AsyncIterator[I | None]],
) -> _Streamed[Iterator[I]]: ...
@overload
def over_http(
    op: Operation[P, T], *, older: Callable[..., Any] | None = None
) -> _OverHttp[P, T]: ...
def over_http(
    op: Operation[P, T], *, older: Callable[..., Any] | None = None
) -> _OverHttp[P, T] | _Streamed[Any]:
    """``op`` as a method of a blocking client with ``_send_op(call, long_running)``.

    ``older``: where the method took another form before, a function of ``(client, *args,
    **kwargs)`` that answers a call of that form (and warns that it is deprecated), or
    :data:`OLDER_FORM` (NotImplemented) for a call of the operation's form.
    """
    if op.stream is not None:
        return _StreamedOverHttp(op, asynchronous=False)
    return _OverHttp(op, older)


@overload
def over_http_async(  # type: ignore[overload-overlap]
    op: Operation[P, AsyncIterator[I | None]],
) -> _Streamed[AsyncIterator[I]]: ...
@overload
def over_http_async(
    op: Operation[P, T], *, older: Callable[..., Any] | None = None
) -> _OverHttpAsync[P, T]: ...
def over_http_async(
    op: Operation[P, T], *, older: Callable[..., Any] | None = None
) -> _OverHttpAsync[P, T] | _Streamed[Any]:
    """``op`` as a coroutine method of a client whose ``_send_op(call, long_running)`` is async.

    ``older``: as :func:`over_http`'s, answering an awaitable for a call of the older form.
    """
    if op.stream is not None:
        return _StreamedOverHttp(op, asynchronous=True)
    return _OverHttpAsync(op, older)


def invoke(surface: object, op: Operation[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """``op`` run on ``surface`` (a client, a driver, a tenant's view), as ``op`` answers.

    Where the surface's method of that name is a wider form or a handle (the driver's
    ``session`` gives a handle), the operation itself runs, in-process.
    """
    method = vars(type(surface)).get(op.name)
    if isinstance(method, _Surface):
        bound: Callable[P, T] = getattr(surface, op.name)
        return bound(*args, **kwargs)
    at: Callable[[], At] = surface._at  # type: ignore[attr-defined]
    run: Callable[[Coroutine[Any, Any, T]], T] = surface._run  # type: ignore[attr-defined]
    return run(op.run_for(at(), op.bind(*args, **kwargs)))


class _Renamed:
    """A method's old name: the new one's method, warning that the name is deprecated."""

    def __init__(self, new: str) -> None:
        self.new = new
        self.old = new

    def __set_name__(self, owner: type, name: str) -> None:
        self.old = name

    def __get__(self, obj: object, owner: type | None = None) -> Any:
        target = getattr(obj if obj is not None else owner, self.new)
        if obj is None:
            return target
        old, new = self.old, self.new

        def method(*args: Any, **kwargs: Any) -> Any:
            warnings.warn(f"{old}() is deprecated: {new}()", DeprecationWarning, stacklevel=2)
            return target(*args, **kwargs)

        method.__name__ = method.__qualname__ = old
        method.__doc__ = f"Deprecated: :meth:`{new}`."
        return method


def renamed(new: str) -> Any:
    """The class attribute an operation's method had under an older name: ``new``'s, warning.

    ``put_agent = renamed("apply_agent")``.
    """
    return _Renamed(new)
