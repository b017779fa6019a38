"""One real local Ray per test session, started through the driver API."""

from __future__ import annotations

import os

import pytest

import runtime
from tests.support.keys import TEST_KEY, TEST_KEY_ENV


def pytest_collection_modifyitems(items):
    for item in items:
        if "tests/integration/" in str(item.path).replace("\\", "/"):
            item.add_marker(pytest.mark.integration)


@pytest.fixture(scope="session")
def rt():
    os.environ[TEST_KEY_ENV] = TEST_KEY
    troupe = runtime.connect(address="local", num_cpus=2, log_level="warning")
    yield troupe
    troupe.shutdown()
