"""Failures of what the troupe depends on: the state store, the HTTP API as a client sees it."""

from __future__ import annotations

from raytroupe.protocols.errors.base import ErrorCode, TroupeError

__all__ = [
    "BadResponse",
    "StateUnavailable",
    "Unreachable",
]


class StateUnavailable(TroupeError):
    """The state store cannot be reached or failed mid-statement: nothing was recorded.

    ``detail['store']`` names it (a URL without its password). Retry once it is back.
    """

    code = ErrorCode.STATE_UNAVAILABLE
    retryable = True


class Unreachable(TroupeError):
    """The HTTP API could not be reached, or did not answer within the client's timeout.

    A refused or reset connection, a name that does not resolve; ``detail['url']`` is where
    it was called.
    """

    code = ErrorCode.UNREACHABLE
    retryable = True


class BadResponse(TroupeError):
    """The HTTP API answered something it does not document.

    Not JSON, or not the model the route answers with (``detail['status']``; the body is not
    kept: it may be anything).
    """

    code = ErrorCode.BAD_RESPONSE
