"""A fake provider key for the integration tests.

The session fixture sets it before Ray starts, so the pool actor inherits it; tests check
that it never shows up in errors, results or any Ray log file.
"""

TEST_KEY_ENV = "TROUPE_TEST_PROVIDER_KEY"
TEST_KEY = "sk-troupe-test-5f0c1e-never-log-me"
