"""Benchmark the bot over HTTP (not collected by pytest; run it by hand and read the figures).

    PYTHONPATH=. .venv/bin/python tests/bench/bench_bot.py [--requests 200]

Uses the real Sweeper on the bundled replay recording, the real Redis on 127.0.0.1:6379 under
a throw-away key prefix (deleted afterwards), the fake Slack Web API, and signed requests sent
over real HTTP. Prints:

* ack latency p50/p99 of ``/jobs`` (time until the HTTP 200 comes back),
* time to the full answer from a warm cache (request sent -> response_url received),
* probe collections for 50 concurrent ``/jobs`` on a cold cache (target: one per cluster).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
import uuid
from pathlib import Path

from bot.cli import DEMO_RECORDING
from bot.config_source import ConfigSource
from bot.sweep import Sweeper
from probes.config import ReplayCluster
from tests.bot.builders import FakeClock
from tests.bot.conftest import Harness, make_config, make_store, running_bot
from tests.bot.fake_slack import FakeSlack


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def timed_command(h: Harness) -> tuple[float, float]:
    """(ack seconds, full answer seconds) for one /jobs."""
    start = time.perf_counter()
    status, hook = await h.command("/jobs")
    acked = time.perf_counter()
    assert status == 200
    await h.slack.wait_for(hook)
    return acked - start, time.perf_counter() - start


async def main(requests: int) -> None:
    prefix = f"jt-bench-{uuid.uuid4().hex[:8]}:"
    slack = FakeSlack()
    await slack.start()
    store = make_store(prefix)
    with tempfile.TemporaryDirectory() as tmp:
        config = make_config(prefix, Path(tmp), cache_seconds=3600.0).model_copy(
            update={"clusters": (ReplayCluster(name="alpha", path=str(DEMO_RECORDING)),)})
        clock = FakeClock()
        sweeper = Sweeper(lambda: config, state=store, clock=clock)
        try:
            async with running_bot(slack, store, sweeper, clock,  # type: ignore[arg-type]
                                   config=ConfigSource.fixed(config)) as h:
                cold = await asyncio.gather(*(timed_command(h) for _ in range(50)))
                collections = sweeper.probe_collections
                warm = [await timed_command(h) for _ in range(requests)]
        finally:
            await sweeper.aclose()
            await store.delete_prefix()
            await store.aclose()
            await slack.stop()
    acks = [a for a, _ in warm]
    fulls = [f for _, f in warm]
    print(f"/jobs ack latency over HTTP ({requests} sequential, warm cache): "
          f"p50 {percentile(acks, 0.5) * 1000:.1f} ms, p99 {percentile(acks, 0.99) * 1000:.1f} ms")
    print(f"full answer from warm cache: p50 {percentile(fulls, 0.5) * 1000:.1f} ms, "
          f"p99 {percentile(fulls, 0.99) * 1000:.1f} ms, "
          f"mean {statistics.mean(fulls) * 1000:.1f} ms")
    print(f"50 concurrent /jobs on a cold cache: {collections} probe collection(s) for 1 cluster; "
          f"ack p99 {percentile([a for a, _ in cold], 0.99) * 1000:.1f} ms, "
          f"last answer after {max(f for _, f in cold) * 1000:.0f} ms")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=200)
    asyncio.run(main(parser.parse_args().requests))
