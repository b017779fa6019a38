"""One real local Ray per test session, started through the driver API."""

from __future__ import annotations

import pytest

import runtime


def pytest_collection_modifyitems(items):
    for item in items:
        if "tests/integration/" in str(item.path).replace("\\", "/"):
            item.add_marker(pytest.mark.integration)


@pytest.fixture(scope="session")
def rt():
    troupe = runtime.connect(address="local", num_cpus=2, log_level="warning")
    yield troupe
    troupe.shutdown()
