"""Fixtures for the end-to-end tests: the real SLURM over SSH, the real Redis, a fake Slack.

The SLURM cluster comes from ``tests/probes/slurm/conftest.py`` (``slurm_env``: skipped with the
reason on a machine without the services; under ``CI=true`` started by ``scripts/services``
and required). Redis gets the same treatment here: a laptop without it skips with the reason,
CI fails. Each test's Redis keys live under their own prefix and are deleted afterwards.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator

import pytest
import redis
from redis.exceptions import RedisError

# prefix, slack and slurm_env are fixtures shared with tests/bot and tests/slurm: importing
# them here registers them for these tests.
from tests.bot.conftest import REDIS_URL, make_store, prefix, slack  # noqa: F401
from tests.probes.slurm.conftest import slurm_env  # noqa: F401


def _redis_unavailable(url: str) -> str | None:
    client = redis.Redis.from_url(url, socket_timeout=2.0, socket_connect_timeout=2.0)
    try:
        client.ping()
    except RedisError as exc:
        return f"Redis at {url} does not answer: {exc}"
    finally:
        client.close()
    return None


@pytest.fixture(scope="session")
def redis_url(slurm_env: object) -> Iterator[str]:  # noqa: F811  (the fixture)
    """The real Redis (after ``slurm_env``, whose CI start-up also starts Redis)."""
    reason = _redis_unavailable(REDIS_URL)
    if reason and os.environ.get("CI") == "true":
        pytest.fail(f"Redis unavailable under CI: {reason}")
    if reason:
        pytest.skip(reason)
    yield REDIS_URL


@pytest.fixture
async def redis_prefix(redis_url: str, prefix: str) -> AsyncIterator[str]:  # noqa: F811
    """A key prefix of this test's own; every key under it is deleted afterwards."""
    yield prefix
    store = make_store(prefix, url=redis_url)
    try:
        await store.delete_prefix()
    finally:
        await store.aclose()
