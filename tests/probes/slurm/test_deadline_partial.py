"""A SLURM sweep past its ``timeout_s`` is read in part: the jobs parsed by then stand.

Found on the real SLURM as jtuser (``tests/probes/slurm/test_e2e_deadline_partial.py``): one
user's jobs printing 1 MiB of ``%|`` lines each took the CLI's parsing past the cluster's
deadline, and the cluster read ``unreachable: sweep timed out after 60s``, every job gone. Here
the real collector runs locally on real logs, the real parser reads them, and the parse of one
job is held (as a pathological log holds it) while the loop's clock jumps past the deadline:
the jobs parsed before it are reported read, squeue's document lists every job, the others are
``fetch-failed`` naming the deadline, and the cluster is ``ok`` with a detail saying so. The
held parse is the answer's early fold (with and without the collector's fast listing, whose
job lines come before the head, so the head is still queued behind the held fold) or a fold
after the answer (``fold_all``); the bot's resuming sweep (``collect_since``) gets the read
jobs' states only, and the bot's Sweeper keeps the probe's answer (its own bound is the
deadline plus a grace: equal to it, it took the answer away, the cluster 'sweep timed out').
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest

from bot.sweep import Sweeper
from probes.models import ClusterFacts
from probes.slurm import assemble, cursors
from probes.slurm.answer import _reader_thread
from probes.slurm.probe import SlurmProbe
from tests.bot.builders import FakeClock
from tests.bot.conftest import make_config
from tests.probes.slurm.test_stream import NO_LISTING, NOW, _cluster, world
from tests.probes.slurm.test_sweep_timeout_parses import (
    TIMEOUT_S,
    Deadline,
    LoopClock,
    _Answered,
)

JOBS = 8
READ = 3
DETAIL = (f"read in part: {JOBS - READ} of {JOBS} jobs' logs not read within the "
          f"{TIMEOUT_S:g}s sweep deadline (timeout_s)")


class _HeldAt:
    """``parse_log``, its call number ``READ + 1`` held until released (in the threads
    ``where`` accepts; calls from the others raise: those jobs are folded in the other)."""

    def __init__(self, real: Any, where: str, on_held: Any) -> None:
        self.real = real
        self.where = where
        self.on_held = on_held
        self.calls = 0
        self.held = threading.Event()
        self.release = threading.Event()

    def __call__(self, *args: Any, **kw: Any) -> Any:
        name = threading.current_thread().name
        if (name.startswith("collector-answer")) != (self.where == "early"):
            raise RuntimeError("not folded here")
        self.calls += 1
        if self.calls == READ + 1:
            self.held.set()
            self.on_held()
            self.release.wait(20)
        return self.real(*args, **kw)


def _alter(listing: bool) -> Any:
    return None if listing else (lambda run, script: NO_LISTING)


async def _held_sweep(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str, *,
                      listing: bool, collect: Any,
                      parser: tuple[Any, str] = (assemble, "parse_log"),
                      ) -> tuple[Any, list[str]]:
    squeue_bin, ids = world(tmp_path, JOBS)
    clock = LoopClock(asyncio.get_running_loop())
    monkeypatch.setattr(clock.loop, "time", clock.time)
    deadline = Deadline(clock, "held", "answered")
    parse = _HeldAt(getattr(*parser), where, on_held=lambda: deadline.reached("held"))
    monkeypatch.setattr(*parser, parse)
    runner = _Answered(squeue_bin, deadline)
    runner._alter = _alter(listing)
    try:
        got = await collect(runner)
    finally:
        parse.release.set()
    assert parse.held.is_set()
    await asyncio.wrap_future(_reader_thread().submit(lambda: None))  # the held fold ended
    return got, ids


def _assert_read_in_part(facts: ClusterFacts, ids: list[str]) -> set[str]:
    assert facts.status == "ok", facts.detail
    assert facts.detail == DETAIL
    assert sorted(j.record.job_id for j in facts.jobs) == ids  # every job squeue listed
    read = {j.record.job_id for j in facts.jobs if j.log is not None and j.log.status == "ok"}
    assert len(read) == READ
    for job in facts.jobs:
        assert job.log is not None
        if job.record.job_id in read:  # parsed before the deadline: stands as parsed
            assert job.summary is not None and job.summary.points
            assert job.summary.points[-1].step == 40
        else:
            assert job.log.status == "failed"
            assert job.log.error == f"not read within the {TIMEOUT_S:g}s sweep deadline " \
                                    "(timeout_s)"
    return read


@pytest.mark.parametrize(("where", "listing"), [("early", True), ("early", False),
                                                ("after", True)])
async def test_a_sweep_past_its_deadline_reports_what_it_read(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str, listing: bool) -> None:
    cluster = _cluster().model_copy(update={"timeout_s": TIMEOUT_S})

    async def collect(runner: _Answered) -> ClusterFacts:
        return await SlurmProbe(cluster, clock=lambda: NOW, runner_factory=runner.factory
                                ).collect()

    facts, ids = await _held_sweep(tmp_path, monkeypatch, where, listing=listing,
                                     collect=collect)
    _assert_read_in_part(facts, ids)


async def test_a_resuming_sweep_keeps_the_read_jobs_states(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cluster = _cluster().model_copy(update={"timeout_s": TIMEOUT_S})

    async def collect(runner: _Answered) -> Any:
        return await SlurmProbe(cluster, clock=lambda: NOW, runner_factory=runner.factory
                                ).collect_since({})

    (facts, states), ids = await _held_sweep(tmp_path, monkeypatch, "early", listing=True,
                                             collect=collect, parser=(cursors, "parse_increment"))
    read = _assert_read_in_part(facts, ids)
    assert set(states) == read  # an unread job's stored state is left as it was


async def test_the_bots_sweeper_keeps_the_probes_partial_answer(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cluster = _cluster().model_copy(update={"timeout_s": TIMEOUT_S})
    config = make_config("deadline-partial:", tmp_path).model_copy(
        update={"clusters": (cluster,)})

    async def collect(runner: _Answered) -> Any:
        def factory(c: Any, **kw: Any) -> SlurmProbe:
            return SlurmProbe(c, clock=lambda: NOW, runner_factory=runner.factory, **kw)
        sweeper = Sweeper(lambda: config, probe_factory=factory, clock=FakeClock(NOW))
        return await sweeper.sweep()

    result, ids = await _held_sweep(tmp_path, monkeypatch, "early", listing=True,
                                    collect=collect)
    (facts,) = result.facts
    _assert_read_in_part(facts, ids)
    assert sorted(j.job_id for j in result.report.jobs) == ids
