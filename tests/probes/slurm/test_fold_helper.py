"""The forked fold helper (probes.slurm.helper): a one-shot cold sweep folds some jobs on
another core, with exactly the facts the parent would give, and nothing depends on it.

The real collector streams real logs (``tests.probes.slurm.test_stream``'s world); the helper
is a real forked child. Where it must fail, it is killed with SIGKILL mid-sweep.
"""

from __future__ import annotations

import os
import signal
from datetime import UTC, datetime
from pathlib import Path

import pytest

from probes.remote.script import build_collector_script
from probes.slurm import helper
from probes.slurm.answer import AnswerReader, stream_answer
from probes.slurm.early import EarlyFolds, fold_all, folder
from probes.slurm.probe import SlurmProbe
from tests.probes.slurm.test_stream import NOW, USER, Collector, _cluster, _probe, world

pytestmark = pytest.mark.skipif(helper._cores() < 2, reason="no second core for a helper")


async def _fold(tmp: Path, jobs: int, *, kill_after: int | None = None,
                ) -> tuple[EarlyFolds, list[object], list[object]]:
    """One streamed answer folded with a helper; (early, records, facts) and the facts a
    plain fold of the same answer gives."""
    squeue_bin, _ = world(tmp, jobs)
    fold = folder(None, aliases={}, benign_patterns=())
    early = EarlyFolds(fold, cluster="s", now=NOW, users=(USER,),
                       since=datetime(2000, 1, 1, tzinfo=UTC), helper=True)
    killed: list[int] = []

    def on_job(key: str, entry: dict[str, object], raw: bytes | None) -> None:
        early.job(key, entry, raw)
        live = early.helper
        if kill_after is not None and live is not None and not killed \
                and len(live.sent) >= kill_after:
            os.kill(live.pid, signal.SIGKILL)
            killed.append(live.pid)

    reader = AnswerReader(on_head=early.head, on_job=on_job)
    script = build_collector_script(SlurmProbe(_cluster())._queue_request(NOW, [USER], None,
                                                                           False))
    with helper.allow(busy_too=True):  # a helper whatever else this machine runs
        await stream_answer(Collector(squeue_bin), script, reader)
    records = [early.records[k] for k in reader.jobs]
    facts, _ = fold_all(records, reader.jobs, early, fold, stateful=False)
    plain, _ = fold_all(records, reader.jobs, None, fold, stateful=False)
    assert kill_after is None or killed
    return early, list(facts), list(plain)


async def test_the_helper_folds_what_the_parent_would(tmp_path: Path) -> None:
    early, facts, plain = await _fold(tmp_path, 12)
    assert early.helped > 0 and early.helper is None  # it folded some, and it has ended
    assert facts == plain


async def test_a_helper_killed_midway_costs_nothing_but_time(tmp_path: Path) -> None:
    """SIGKILLed after it was handed 2 jobs: whatever it had not answered the parent folds."""
    early, facts, plain = await _fold(tmp_path, 12, kill_after=2)
    assert early.helped <= 2 and facts == plain


async def test_no_helper_unless_a_one_shot_command_allows_it(tmp_path: Path) -> None:
    """Outside ``allow()`` (the bot) a cold sweep forks nothing, and gives the same facts."""
    squeue_bin, ids = world(tmp_path, 6)
    fold = folder(None, aliases={}, benign_patterns=())
    assert helper.FoldHelper.start(fold, {}) is None
    facts = await _probe(Collector(squeue_bin)).collect()
    with helper.allow(busy_too=True):
        helped = await _probe(Collector(squeue_bin)).collect()
    assert [j.record.job_id for j in facts.jobs] == ids and facts.jobs == helped.jobs
    assert helper._state["live"] == 0  # every helper forked was reaped
