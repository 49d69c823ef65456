"""Repository-wide test set-up: fail any test that leaves asyncio tasks running; pytester.

Policy (from kopf's test suite): a background task that outlives its test is a leak that
later shows up as a flaky failure elsewhere; catching it at the test that created it is
cheaper than debugging it later.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

# ``pytester`` runs pytest on generated test files: tests/test_tiers.py checks the tier
# markers tests/conftest.py applies with it.
pytest_plugins = ["pytester"]


@pytest.fixture(autouse=True)
async def _no_leftover_tasks() -> AsyncIterator[None]:
    before = set(asyncio.all_tasks())
    yield
    await asyncio.sleep(0)
    left = [t for t in asyncio.all_tasks() - before
            if not t.done() and t is not asyncio.current_task()]
    for task in left:
        task.cancel()
    assert not left, f"test left tasks running: {[t.get_name() for t in left]}"
