"""A sweep past its ``timeout_s`` stops parsing. The cluster is reported read in part (the
jobs not parsed ``fetch-failed`` naming the deadline: ``test_deadline_partial.py``), and the
logs not parsed yet are never parsed: no CPU work of a sweep that has given up goes on in a
worker thread, whether the parsing is the answer's early folds (a job folded as its line
arrives) or the folds after the answer (``fold_all``).

The real collector runs locally on real logs (``tests.probes.slurm.test_stream``); the log
parser is the real one, its first call held until the sweep has given up (as a 50 MB line or a
pathological tail would hold it), then let go: the calls made after that are what the timeout
failed to stop. The sweep gives up when the test says: its deadline is an hour away on the
event loop's clock, which jumps an hour on once the first parse is held and the collector's
whole answer is in (no real seconds spent waiting, and no deadline passing before a parse
is under way on a loaded machine, as the 2 s one did)."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest

from probes.slurm import assemble, early, probe
from probes.slurm.answer import _reader_thread
from probes.slurm.probe import SlurmProbe
from tests.probes.slurm.test_stream import NOW, Collector, _cluster, world

JOBS = 12
TIMEOUT_S = 3600.0


class LoopClock:
    """The running loop's clock (``loop.time``, which asyncio's timeouts read), moved on by
    :meth:`jump` from any thread."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop, self.real, self.offset = loop, loop.time, 0.0

    def time(self) -> float:
        return self.real() + self.offset

    def jump(self, seconds: float) -> None:
        """Move the clock on by ``seconds``, on the loop's thread (which this wakes)."""
        def move() -> None:
            self.offset += seconds
        self.loop.call_soon_threadsafe(move)


class Deadline:
    """Passes the sweep's deadline (the clock jumps :data:`TIMEOUT_S`) once every one of
    ``waiting`` has been :meth:`reached`, from whichever thread reaches the last."""

    def __init__(self, clock: LoopClock, *waiting: str) -> None:
        self.clock, self.waiting, self.lock = clock, set(waiting), threading.Lock()

    def reached(self, what: str) -> None:
        with self.lock:
            if what not in self.waiting:
                return
            self.waiting.discard(what)
            if not self.waiting:
                self.clock.jump(TIMEOUT_S)


class _Answered(Collector):
    """The collector, telling ``deadline`` when its answer is in (every line received)."""

    def __init__(self, squeue_bin: Path, deadline: Deadline) -> None:
        super().__init__(squeue_bin)
        self.deadline = deadline

    async def run_streaming(self, *args: Any, **kw: Any) -> Any:
        res = await super().run_streaming(*args, **kw)
        self.deadline.reached("answered")
        return res


class _HeldParse:
    """``parse_log``, its first call (in the threads ``where`` accepts) held until released;
    calls from other threads raise (their early fold fails: folded again after the answer)."""

    def __init__(self, where: str, on_held: Any) -> None:
        self.real = assemble.parse_log
        self.where = where
        self.on_held = on_held
        self.calls: list[str] = []
        self.held = threading.Event()
        self.release = threading.Event()

    def __call__(self, *args: Any, **kw: Any) -> Any:
        name = threading.current_thread().name
        if (name.startswith("collector-answer")) != (self.where == "early"):
            raise RuntimeError("not folded here")
        self.calls.append(name)
        if len(self.calls) == 1:
            self.held.set()
            self.on_held()
            self.release.wait(20)
        return self.real(*args, **kw)


@pytest.mark.parametrize("where", ["early", "after"])
async def test_a_timed_out_sweep_parses_no_more_logs(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str) -> None:
    squeue_bin, _ = world(tmp_path, JOBS)
    clock = LoopClock(asyncio.get_running_loop())
    monkeypatch.setattr(clock.loop, "time", clock.time)
    deadline = Deadline(clock, "held", "answered")
    parse = _HeldParse(where, on_held=lambda: deadline.reached("held"))
    monkeypatch.setattr(assemble, "parse_log", parse)
    done = threading.Event()
    real_fold_all = early.fold_all

    def fold_all(*args: Any, **kw: Any) -> Any:
        try:
            return real_fold_all(*args, **kw)
        finally:
            done.set()

    monkeypatch.setattr(probe, "fold_all", fold_all)
    cluster = _cluster().model_copy(update={"timeout_s": TIMEOUT_S})
    facts = await SlurmProbe(cluster, clock=lambda: NOW,
                             runner_factory=_Answered(squeue_bin, deadline).factory).collect()
    assert parse.held.is_set()
    parse.release.set()
    assert facts.status == "ok"  # read in part
    assert f"{TIMEOUT_S:g}s sweep deadline" in (facts.detail or "")
    assert len(facts.jobs) == JOBS
    # Every parse the threads would still make is made by the time they are idle.
    await asyncio.wrap_future(_reader_thread().submit(lambda: None))
    if where == "after":
        assert await asyncio.to_thread(done.wait, 20)
    assert len(parse.calls) <= 2, parse.calls
