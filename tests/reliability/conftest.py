"""The slow reliability suites share the integration suite's one Ray per session."""

from tests.integration.conftest import api, rt  # noqa: F401 - fixtures, re-exported for pytest
