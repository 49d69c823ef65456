"""A trials dir the log names that holds nothing does not hide the run's Harbor job dirs found
under the configured ``trial_roots``.

Replayed under a real sbatch job as jtuser (310, datagen-dg-loggedempty): the batch script made
``trials/`` and printed ``Trials dir: $PWD/trials`` (a wrapper's habit, SkyRL's line), then ran
Harbor into the default ``jobs/`` (Harbor 0.26.0's layout, its own models). ``jobtables sweep``
read the empty logged dir as the run's tree: no Chunks, no avg_turns, no exc%, the Trials cell
only the progress row's 10. The logged dir still wins when it holds trials (it is the run's
own), and an empty one is kept when the roots hold only an earlier run's job dirs.
"""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from probes.models import JobState
from probes.remote import collector
from probes.slurm.assemble import job_facts
from tests.report.factories import record
from tests.report.test_harbor_dryrun_datagen import MAKE


def _answer(workdir: Path, text: str) -> dict[str, Any]:
    out = workdir / "out_7300.log"
    out.write_text(text)
    request = {"tail_bytes": 1 << 20, "min_lines": 1,
               "jobs": [{"id": "7300", "stdout": str(out), "workdir": str(workdir), "offset": 0,
                         "completed": False, "checkpoint_roots": [],
                         "trial_roots": [str(workdir / "jobs")]}]}
    return collector.collect(request)["jobs"]["7300"]


def _facts(workdir: Path, text: str, started_ago_s: float = 600) -> Any:
    answer = _answer(workdir, text)
    rec = record("datagen-dg-loggedempty", job_id="7300", state=JobState.RUNNING,
                 workdir=str(workdir), stdout_path=str(workdir / "out_7300.log"),
                 start_time=datetime.now(UTC) - timedelta(seconds=started_ago_s))
    return job_facts(rec, answer, aliases={}, benign_patterns=())


def test_an_empty_logged_trials_dir_yields_to_the_roots_job_dirs(tmp_path: Path) -> None:
    (tmp_path / "trials").mkdir()
    MAKE.write(tmp_path / "jobs" / "chunk-00", {"pass": 4, "fail": 4, "timeout": 2,
                                               "inflight": 2}, total=12, turns=6, seed=3)
    facts = _facts(tmp_path, f"Trials dir: {tmp_path / 'trials'}\nStarting harbor job\n")
    tree = facts.trials
    assert tree is not None and tree.root == str(tmp_path / "jobs"), tree
    assert (tree.chunks_done, tree.chunks_total) == (0, 1)
    assert len(tree.trials) == 10


def test_a_logged_trials_dir_holding_trials_still_wins(tmp_path: Path) -> None:
    """Near miss: the logged dir is the run's own when it holds trials."""
    MAKE.write(tmp_path / "trials" / "run-a", {"pass": 3, "fail": 2}, total=5, seed=4)
    MAKE.write(tmp_path / "jobs" / "chunk-00", {"pass": 4, "fail": 4}, total=8, seed=5)
    facts = _facts(tmp_path, f"Trials dir: {tmp_path / 'trials'}\n")
    assert facts.trials is not None and facts.trials.root == str(tmp_path / "trials")


def test_an_empty_logged_dir_beside_an_earlier_runs_job_dirs_stays(tmp_path: Path) -> None:
    """Near miss: the root holds only job dirs last written before this job started (an
    earlier run's): they are not this run's trials, so its own (empty) dir stands."""
    (tmp_path / "trials").mkdir()
    MAKE.write(tmp_path / "jobs" / "chunk-00", {"pass": 4, "fail": 4}, total=8, seed=6,
               finished=True)
    old = time.time() - 7200
    for path in (tmp_path / "jobs").rglob("*"):
        os.utime(path, (old, old), follow_symlinks=False)
    facts = _facts(tmp_path, f"Trials dir: {tmp_path / 'trials'}\n")
    assert facts.trials is not None and facts.trials.root == str(tmp_path / "trials")
