"""Fixtures for the end-to-end tests: the real SLURM over SSH, the real Redis, a fake Slack.

The SLURM cluster comes from ``tests/probes/slurm/conftest.py`` (``slurm_env``: skipped with the
reason on a machine without the services; under ``CI=true`` started by ``scripts/services``
and required). Redis gets the same treatment (``redis_server`` in ``tests/conftest.py``): a
laptop without it skips with the reason, CI fails. Each test's Redis keys live under their own
prefix and are deleted afterwards.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

# prefix, slack and slurm_env are fixtures shared with tests/bot and tests/slurm: importing
# them here registers them for these tests.
from tests.bot.conftest import make_store, prefix, slack  # noqa: F401
from tests.probes.slurm.conftest import slurm_env  # noqa: F401


@pytest.fixture(scope="session")
def redis_url(slurm_env: object, redis_server: str) -> str:  # noqa: F811  (the fixture)
    """The real Redis (after ``slurm_env``, whose CI start-up also starts Redis)."""
    return redis_server


@pytest.fixture
async def redis_prefix(redis_url: str, prefix: str) -> AsyncIterator[str]:  # noqa: F811
    """A key prefix of this test's own; every key under it is deleted afterwards."""
    yield prefix
    store = make_store(prefix, url=redis_url)
    try:
        await store.delete_prefix()
    finally:
        await store.aclose()
