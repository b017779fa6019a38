"""Callables a guardrail's callable rule names in the tests (the session's allow-list).

Stdlib only: the desk, agents and job shards import them where their stage runs.
"""

from __future__ import annotations

__all__ = ["NO_CODENAME", "RAISES", "no_codename", "raises"]

NO_CODENAME = "tests.support.guardrail_checks:no_codename"
RAISES = "tests.support.guardrail_checks:raises"


def no_codename(text: str, stage: str) -> str | None:
    """Refuse text that names the project's codename (any stage)."""
    if "BLUEBIRD" in text.upper():
        return f"names the codename at the {stage}"
    return None


def raises(text: str, stage: str) -> str | None:
    """A broken check: a guardrail that calls it fails closed."""
    raise RuntimeError(f"cannot check {len(text)} characters at {stage}")
