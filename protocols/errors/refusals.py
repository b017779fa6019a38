"""Refusals of what the caller may do or spend: policy, quota, load, budget, API key."""

from __future__ import annotations

from raytroupe.protocols.errors.base import ErrorCode, TroupeError

__all__ = [
    "BudgetExceeded",
    "Busy",
    "Forbidden",
    "GuardrailTripped",
    "QuotaExceeded",
    "Unauthorized",
    "UnpricedModel",
]


class Forbidden(TroupeError):
    """The caller may not do this: a field its tenant's policy refuses, or an admin's right.

    ``detail['field']`` names the refused field (``team.agents.0.tools``), ``detail['policy']``
    the policy that refused it. Nothing was provisioned or started.
    """

    code = ErrorCode.FORBIDDEN


class QuotaExceeded(Forbidden):
    """The request would take its tenant past a quota (``detail['quota']``, ``['limit']``).

    Nothing of the request was stored. Deleting what the tenant holds makes room.
    """

    code = ErrorCode.QUOTA_EXCEEDED


class Busy(TroupeError):
    """The tenant has as much control-plane work in hand and waiting as it may: come back later.

    ``detail['retry_after_s']`` says when; ``detail['limit']`` names the limit. Other
    tenants' work is not held up by it (fair shares), and nothing of the request was kept.
    """

    code = ErrorCode.BUSY
    retryable = True


class BudgetExceeded(TroupeError):
    """A call would take a job or tenant past its token or money budget; nothing was spent."""

    code = ErrorCode.BUDGET_EXCEEDED


class GuardrailTripped(TroupeError):
    """A guardrail's rule refused the job's input, a tool call or its result, or its output.

    ``detail``: ``guardrail`` and ``version`` (the policy), ``rule`` (its index and kind,
    e.g. ``'1:pii'``), ``stage`` and, at a tool stage, ``tool``; never the text it matched.
    Refused input starts nothing; elsewhere the job ends with this error.
    """

    code = ErrorCode.GUARDRAIL


class UnpricedModel(BudgetExceeded):
    """A USD budget applies to the call and its model has no known price (fails closed).

    The operator sets a price (``input_usd_per_mtok`` / ``output_usd_per_mtok``, or
    ``LLMConfig.prices``) or opts in with ``LLMConfig.allow_unpriced``.
    """

    code = ErrorCode.UNPRICED_MODEL


class Unauthorized(TroupeError):
    """The HTTP API refused the caller's key (401): none was sent, or one it does not know."""

    code = ErrorCode.UNAUTHORIZED
