"""A fake provider key for the integration tests.

The session fixture sets it before Ray starts, so the pool actor inherits it; tests check
that it never shows up in errors, results or any Ray log file.
"""

from raytroupe.protocols import Budget
from raytroupe.protocols.spend import SpendLimit

TEST_KEY_ENV = "TROUPE_TEST_PROVIDER_KEY"
TEST_KEY = "sk-troupe-test-5f0c1e-never-log-me"

FRUGAL_TENANT = "frugal"
"""A tenant with a budget of its own in the session's LLM pool configuration."""
FRUGAL_BUDGET = Budget(tokens=3_000)

WINDOWED_TENANT = "windowed"
"""A tenant with spend windows in the session's LLM pool configuration."""
WINDOWED_LIMITS = {
    # alerts only: the tenant's first model call of the day crosses it
    "windowed-day": SpendLimit(tenant=WINDOWED_TENANT, tokens=1, hard=False, alert_at=(1.0,)),
    # hard, on one agent: no call of it fits
    "windowed-capped": SpendLimit(
        tenant=WINDOWED_TENANT, agent="capped", window="lifetime", tokens=1, alert_at=()
    ),
    # hard, on each end user of the tenant: no call of a job that names a user fits
    "windowed-per-user": SpendLimit(
        tenant=WINDOWED_TENANT, each_user=True, window="lifetime", tokens=1, alert_at=()
    ),
    # alerts only, on each end user of acme (the tests' jobs that name a user)
    "acme-per-user": SpendLimit(
        tenant="acme", each_user=True, tokens=1, hard=False, alert_at=(1.0,)
    ),
}
