"""Moved to :mod:`raytroupe.protocols.eval_suites`; the names stay importable from here."""

from raytroupe.protocols.eval_suites import MAX_SUITE_BYTES, parse_suite, read_suite

__all__ = ["MAX_SUITE_BYTES", "parse_suite", "read_suite"]
