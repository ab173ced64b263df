"""The live compose test runs last in a session: .ci/run prepares its base image and
wheelhouse in the background (mostly waiting on the network) while the rest of the suite
runs, and the test then finds them ready."""

from __future__ import annotations

import pytest

LIVE = "tests/deploy/test_compose_live.py"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    items.sort(key=lambda item: item.nodeid.startswith(LIVE))  # stable: others keep order
