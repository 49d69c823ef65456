"""A trial's result.json that is there but cannot be read is a finished trial, counted and said.

Replayed under a real sbatch job as jtuser (308, eval-dg-retry): Harbor (0.26.0's format, its own
models, a trial every 5 s, two trials retried as Harbor retries them) finished all 14 trials,
its job result.json ``finished_at`` set and ``n_completed_trials`` 14; one trial's result.json
was left mode 000 and another cut off mid-write. The job stayed RUNNING (the wrapper slept).
``jobtables sweep`` read it ``healthy``, Trials 12/14, for 25 minutes and on: the zombie the
rulebook names ("all trials done but job RUNNING") was never raised, later to be taken for a
stall, and nothing said two result.json files were unreadable. Harbor writes a trial's
result.json only as the trial ends, so one that exists is a finished trial, its reward
unknown: the Trials count (and the zombie rule) counts it, its pass-rate does not, and the
Trend says how many could not be read.
"""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from probes.logs.parse import parse_log
from probes.models import JobFacts
from probes.remote.collector import collect_trials
from probes.slurm.assemble import trial_tree
from report.models import JobDetail
from tests.report.factories import judge, log, record
from tests.report.test_harbor_dryrun_datagen import MAKE

NOW = datetime.now(UTC)


def _tree(jobs: Path, *, spoil: int) -> None:
    """12 finished trials, ``spoil`` of them left unreadable: one cut short mid-write, one
    whose result.json cannot be opened as a file (what mode 000 is to the SSH user, made so
    it holds for root too)."""
    MAKE.write(jobs / "2026-12-05__18-01-00", {"pass": 6, "fail": 4, "timeout": 2}, total=12,
               seed=8, minutes_ago=60, finished=True)
    results = sorted((jobs / "2026-12-05__18-01-00").glob("*/result.json"))
    if spoil >= 1:
        text = results[0].read_text()
        results[0].write_text(text[: len(text) // 2])
    if spoil >= 2:
        results[1].unlink()
        results[1].mkdir()
    old = time.time() - 30 * 60  # the last trial ended half an hour ago
    for path in (jobs / "2026-12-05__18-01-00").rglob("*"):
        os.utime(path, (old, old), follow_symlinks=False)


def _row(jobs: Path) -> JobDetail:
    start = NOW - timedelta(minutes=70)
    tree = trial_tree(collect_trials([str(jobs)]), started=start)
    assert tree is not None
    rec = record("eval-dg-retry", start_time=start, submit_time=start, elapsed_s=4200)
    facts = JobFacts(record=rec, log=log(mtime=NOW - timedelta(minutes=30)),
                     summary=parse_log("waiting\n"), trials=tree)
    return judge(facts, now=NOW)


def test_unreadable_result_files_count_as_finished_trials_and_are_said(tmp_path: Path) -> None:
    _tree(tmp_path / "jobs", spoil=2)
    detail = _row(tmp_path / "jobs")
    row = detail.report
    assert row.metrics["trials"] == 12 and row.metrics["trials_total"] == 12, row.metrics
    assert "zombie" in row.flags, (row.flags, row.trend)
    assert row.metrics["pass_rate"] == 0.5  # over the 10 read: 5 passed
    assert "2 trial result.json file(s) there but unreadable" in detail.note, detail.note


def test_a_tree_read_whole_is_unchanged(tmp_path: Path) -> None:
    """Near miss: every result.json readable: the same zombie, nothing said of unreadable."""
    _tree(tmp_path / "jobs", spoil=0)
    detail = _row(tmp_path / "jobs")
    assert detail.report.metrics["trials"] == 12 and "zombie" in detail.report.flags
    assert "unreadable" not in detail.note
