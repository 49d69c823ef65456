"""A sweep past its ``timeout_s`` stops parsing. The cluster is reported as timed out, and the
logs not parsed yet are never parsed: no CPU work of a sweep that has given up goes on in a
worker thread, whether the parsing is the answer's early folds (a job folded as its line
arrives) or the folds after the answer (``fold_all``).

The real collector runs locally on real logs (``tests.probes.slurm.test_stream``); the log
parser is the real one, its first call held until the sweep has given up (as a 50 MB line or a
pathological tail would hold it), then let go: the calls made after that are what the timeout
failed to stop."""

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


class _HeldParse:
    """``parse_log``, its first call (in the threads ``where`` accepts) held until released;
    calls from other threads raise (their early fold fails: folded again after the answer)."""

    def __init__(self, where: str) -> None:
        self.real = assemble.parse_log
        self.where = where
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
            self.release.wait(20)
        return self.real(*args, **kw)


@pytest.mark.parametrize("where", ["early", "after"])
async def test_a_timed_out_sweep_parses_no_more_logs(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str) -> None:
    squeue_bin, _ = world(tmp_path, JOBS)
    parse = _HeldParse(where)
    monkeypatch.setattr(assemble, "parse_log", parse)
    done = threading.Event()
    real_fold_all = early.fold_all

    def fold_all(*args: Any, **kw: Any) -> Any:
        try:
            return real_fold_all(*args, **kw)
        finally:
            done.set()

    monkeypatch.setattr(probe, "fold_all", fold_all)
    cluster = _cluster().model_copy(update={"timeout_s": 2.0})
    facts = await SlurmProbe(cluster, clock=lambda: NOW,
                             runner_factory=Collector(squeue_bin).factory).collect()
    assert parse.held.is_set()
    parse.release.set()
    assert facts.status == "unreachable"
    assert "2s" in (facts.detail or "")
    # Every parse the threads would still make is made by the time they are idle.
    await asyncio.wrap_future(_reader_thread().submit(lambda: None))
    if where == "after":
        assert await asyncio.to_thread(done.wait, 20)
    assert len(parse.calls) <= 2, parse.calls
