"""A fake provider key for the integration tests.

The session fixture sets it before Ray starts, so the pool actor inherits it; tests check
that it never shows up in errors, results or any Ray log file.
"""

from raytroupe.protocols import Budget

TEST_KEY_ENV = "TROUPE_TEST_PROVIDER_KEY"
TEST_KEY = "sk-troupe-test-5f0c1e-never-log-me"

FRUGAL_TENANT = "frugal"
"""A tenant with a budget of its own in the session's LLM pool configuration."""
FRUGAL_BUDGET = Budget(tokens=3_000)
