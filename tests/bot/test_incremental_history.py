"""A sweep's metric windows merged for every job in one pipeline, against a real Redis.

The batch must store and return exactly what merging job by job does (same order, same
replacement of a repeated step, same cap), and the Sweeper must use it.
"""

from __future__ import annotations

import uuid

from bot.store import RedisStore
from probes.models import MetricPoint
from tests.bot.conftest import make_store


def points(*steps: int, loss: float = 1.0) -> list[MetricPoint]:
    return [MetricPoint(step=s, values={"loss": loss, "grad_norm": 0.1 * s}) for s in steps]


async def test_batch_merge_equals_job_by_job(store: RedisStore, redis_server: str) -> None:
    """Two sweeps merged as batches give every job the window job-by-job merging gives."""
    sweeps = [
        {"1": points(1, 2, 3), "2": points(5, 4), "3": [], "4": points(*range(1, 9))},
        {"1": points(3, 4, loss=0.5), "2": points(6), "3": points(1), "4": points(9, 10)},
    ]
    single = make_store(f"jt-test-{uuid.uuid4().hex[:10]}:", url=redis_server, window_len=6)
    batched = make_store(store.prefix, url=redis_server, window_len=6)
    try:
        for batch in sweeps:
            expected = {j: await single.merge_history("alpha", j, p) for j, p in batch.items()}
            assert await batched.merge_histories("alpha", batch) == expected
        assert [p.step for p in expected["4"]] == [5, 6, 7, 8, 9, 10]  # capped at window_len
        assert expected["1"][2].values["loss"] == 0.5  # a repeated step keeps its last value
        assert await batched.load_history("alpha", "2") == await single.load_history("alpha",
                                                                                     "2")
    finally:
        await single.delete_prefix()
        await single.aclose()
        await batched.aclose()
