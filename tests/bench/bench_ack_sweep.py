"""Benchmark: ``/jobs`` ack latency while a large sweep runs (not a pytest test).

    PYTHONPATH=. .venv/bin/python tests/bench/bench_ack_sweep.py [--copies 50]

The bundled recording's 19 jobs (real trainer logs of up to 800 KB) are repeated ``--copies``
times under fresh ids, held in memory (so no file reading is timed), and swept by the real
ReplayProbe and Sweeper inside the real bot over HTTP (real Redis under a throw-away prefix,
the fake Slack Web API). While a sweep runs, ``/jobs`` is sent again and again and the time
to its HTTP 200 recorded (each answer awaited before the next command). Printed side by side
in one run: the event loop's stall (how late a 10 ms sleep wakes) while the probe assembles
facts parsing in a worker thread (as shipped) and on the loop (``asyncio.to_thread`` replaced
by an inline call); the stall during a whole sweep (judging and rendering included); the
``/jobs`` ack with no sweep and during one. Target: ack p99 < 100 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
import types
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bot.cli import DEMO_RECORDING
from bot.config_source import ConfigSource
from bot.sweep import Sweeper
from probes.config import ReplayCluster
from probes.slurm import replay
from tests.bench.bench_bot import percentile
from tests.bot.builders import FakeClock
from tests.bot.conftest import Harness, make_config, make_store, running_bot
from tests.bot.fake_slack import FakeSlack

__test__ = False


def big_recording(copies: int) -> tuple[dict[str, Any], list[Any], dict[str, Any]]:
    meta, records, collected = replay.load_recording(DEMO_RECORDING, "alpha")
    many, answers = [], {}
    for k in range(1, copies + 1):
        for r in records:
            job_id = f"{k}{r.job_id}"
            many.append(r.model_copy(update={"job_id": job_id}))
            answers[job_id] = collected.get(r.job_id)
    return meta, many, answers


async def acks_while(h: Harness, busy: asyncio.Task[Any] | None, floor: int) -> list[float]:
    """Ack seconds of /jobs, each answer awaited before the next, until ``busy`` ends (at
    least ``floor`` of them; with no ``busy`` task, exactly ``floor``)."""
    acks: list[float] = []
    while len(acks) < floor or (busy is not None and not busy.done()):
        start = time.perf_counter()
        status, hook = await h.command("/jobs")
        acks.append(time.perf_counter() - start)
        assert status == 200
        await h.slack.wait_for(hook, within=300.0)  # a 5,000-job sweep answers late
    return acks


async def lag_while(busy: asyncio.Task[Any], tick_s: float = 0.01) -> list[float]:
    """How late a 10 ms sleep wakes, again and again, until ``busy`` ends: the event loop's
    stall, i.e. the delay any ack would see on top of its own work."""
    lags: list[float] = []
    while not busy.done():
        start = time.perf_counter()
        await asyncio.sleep(tick_s)
        lags.append(time.perf_counter() - start - tick_s)
    return lags or [0.0]


def line(label: str, values: list[float], what: str, extra: str = "") -> str:
    return (f"{label:<44} n={len(values):4d}  {what} p50 {percentile(values, 0.5) * 1000:7.1f} ms"
            f"  p99 {percentile(values, 0.99) * 1000:7.1f} ms  max {max(values) * 1000:7.1f} ms"
            f" {extra}")


async def timed_task(coro: Any) -> tuple[asyncio.Task[Any], float]:
    return asyncio.create_task(coro), time.perf_counter()


async def probe_lag(copies: int) -> None:
    """Loop stall while the replay probe alone assembles facts: worker thread vs on the loop."""
    probe = replay.ReplayProbe(ReplayCluster(name="alpha", path=str(DEMO_RECORDING)))
    inline: Callable[..., Any] = lambda fn, *a, **kw: _done(fn(*a, **kw))  # noqa: E731
    for label, module in (("worker thread", asyncio),
                          ("on the event loop", types.SimpleNamespace(to_thread=inline))):
        replay.asyncio = module  # type: ignore[attr-defined]
        task, t0 = await timed_task(probe.collect())
        lags = await lag_while(task)
        facts = await task
        print(line(f"probe.collect, parsing {label}", lags, "loop stall",
                   f"({time.perf_counter() - t0:.1f}s, {len(facts.jobs)} jobs)"), flush=True)
    replay.asyncio = asyncio  # type: ignore[attr-defined]


async def main(copies: int) -> None:
    recording = big_recording(copies)
    replay.load_recording = lambda root, name: recording  # type: ignore[assignment,misc]
    await probe_lag(copies)
    prefix = f"jt-bench-{uuid.uuid4().hex[:8]}:"
    slack = FakeSlack()
    await slack.start()
    store = make_store(prefix)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            config = make_config(prefix, Path(tmp), cache_seconds=3600.0).model_copy(
                update={"clusters": (ReplayCluster(name="alpha", path=str(DEMO_RECORDING)),)})
            clock = FakeClock()
            # No sweep state: per-job Redis history merges would measure Redis, not the loop.
            sweeper = Sweeper(lambda: config, clock=clock)
            async with running_bot(slack, store, sweeper, clock,  # type: ignore[arg-type]
                                   config=ConfigSource.fixed(config)) as h:
                # Warm the cache: a cold /jobs answers "Sweeping…" at once and its tables only
                # when that sweep is cached, so wait for both (waiting for the first alone left
                # the cache cold on a busy machine: every ack measured was a "Sweeping…").
                _, hook = await h.command("/jobs")
                await h.slack.wait_for(hook, 2, within=600.0)
                print(line("/jobs, no sweep running", await acks_while(h, None, 20), "ack"))
                task, t0 = await timed_task(sweeper.sweep())
                lags = await lag_while(task)
                await task
                print(line("whole sweep (probe + judging + rendering)", lags, "loop stall",
                           f"({time.perf_counter() - t0:.1f}s)"), flush=True)
                task, t0 = await timed_task(sweeper.sweep())
                acks = await acks_while(h, task, 1)
                await task
                print(line("/jobs during a whole sweep", acks, "ack",
                           f"({time.perf_counter() - t0:.1f}s)"))
            await sweeper.aclose()
    finally:
        await store.delete_prefix()
        await store.aclose()
        await slack.stop()


async def _done(value: object) -> object:
    return value


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--copies", type=int, default=50)
    asyncio.run(main(parser.parse_args().copies))
