"""A datagen job submitted after every chunk in its trial root was last written has generated
none of them yet: it is in bring-up, not "all 3 chunks done".

Replayed under a real sbatch job as jtuser (4855, datagen-dg-rerun): a new datagen run started
in the workdir of a finished one (jobs/chunk-00..02, Harbor 0.26.0's format, last written 35
minutes before the submission), its engine still starting. ``jobtables sweep`` read it Chunks
3/3, Trials 30, avg_turns 8.2, Trend "all 3 chunks done; job still running": the old run's
output as this one's. A datagen run's job dirs are its chunks whenever written (a chain
successor, submitted with ``afterany`` before its predecessor's last write, continues the
same run), so only a tree wholly last written before the job was submitted is set aside, as
an eval array's already is (``judge_eval.own_run_trials``); once the new run writes a chunk
the whole tree counts again.
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
from report.models import JobReport
from tests.report.factories import judge, log, record
from tests.report.test_harbor_dryrun_datagen import MAKE

NOW = datetime.now(UTC)


def _row(jobs: Path, *, submitted: datetime) -> JobReport:
    for i in range(3):
        MAKE.write(jobs / f"chunk-0{i}", {"pass": 4, "fail": 4, "timeout": 2}, total=10,
                   seed=20 + i, minutes_ago=120, finished=True)
    old = time.time() - 35 * 60
    for path in [jobs, *jobs.rglob("*")]:
        os.utime(path, (old, old), follow_symlinks=False)
    start = NOW - timedelta(minutes=1)
    tree = trial_tree(collect_trials([str(jobs)]), started=start)
    assert tree is not None
    rec = record("datagen-dg-rerun", start_time=start, submit_time=submitted, elapsed_s=60)
    facts = JobFacts(record=rec, log=log(mtime=NOW), trials=tree,
                     summary=parse_log("starting vllm engine...\n"))
    return judge(facts, now=NOW).report


def test_a_run_submitted_after_the_whole_tree_was_written_is_in_bring_up(tmp_path: Path) -> None:
    row = _row(tmp_path / "jobs", submitted=NOW - timedelta(minutes=2))
    assert "chunks_done" not in row.metrics and "trials" not in row.metrics, row.metrics
    assert "buffer-filling" in row.flags, (row.flags, row.trend)
    assert "chunks done" not in row.trend


def test_a_chain_successor_submitted_before_the_last_write_keeps_the_runs_chunks(
        tmp_path: Path) -> None:
    """Near miss: submitted (afterany) an hour ago, before its predecessor's last writes."""
    row = _row(tmp_path / "jobs", submitted=NOW - timedelta(hours=1))
    assert (row.metrics["chunks_done"], row.metrics["chunks_total"]) == (3, 3)
    assert row.metrics["trials"] == 30
