"""A job that writes its own log into ``{workdir}/logs/`` has that log found, not log-missing.

Replayed on the real SLURM 22.05: ``sbatch -o /dev/null --chdir W`` of a script that does
``mkdir -p logs; ... > logs/rl-verl-a5_${SLURM_JOB_ID}.out`` (job 36, a running verl run). The
sweep and ``jobtables job 36`` read ``log-missing``, 'No log found (/dev/null)', verdict unknown:
only the workdir itself and StdOut's parent were listed. A ``logs/`` directory under the workdir
is where launch scripts commonly put their own ``*_<jobid>.out`` (seed: "ls the workdir for any
*_<jobid>.out"; the live log sits in the same workdir under a different name). One more
non-recursive listing of a conventional directory, never a ``find``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from probes.remote import collector
from tests.probes.remote.test_collector import _log, _request


@pytest.mark.parametrize("stdout", ["/dev/null", "{w}/nosuch/4242.out", None])
@pytest.mark.parametrize("sub", ["logs", "log"])
def test_own_log_under_workdir_logs_is_found(tmp_path: Path, stdout: str | None,
                                             sub: str) -> None:
    """StdOut discarded, absent or unset: ``{workdir}/logs/*_<jobid>.out`` is the log."""
    (tmp_path / sub).mkdir()
    (tmp_path / sub / "rl-verl_4242.out").write_text("step:1 - actor/entropy:0.5\n")
    given = stdout.format(w=tmp_path) if stdout else None
    log = _log(collector.collect(_request(tmp_path, stdout=given)))
    assert (log["status"], log["path"], log["text"]) == (
        "mismatch", str(tmp_path / sub / "rl-verl_4242.out"), "step:1 - actor/entropy:0.5\n")


def test_workdir_log_beats_an_older_one_under_logs(tmp_path: Path) -> None:
    """Both places hold a candidate: the newest is read, as among the workdir's own."""
    import os

    (tmp_path / "logs").mkdir()
    old, new = tmp_path / "logs" / "a_4242.out", tmp_path / "b_4242.out"
    old.write_text("old\n")
    new.write_text("new\n")
    os.utime(old, (1_000, 1_000))
    log = _log(collector.collect(_request(tmp_path, stdout="/dev/null")))
    assert (log["status"], log["path"]) == ("mismatch", str(new))


def test_other_jobs_logs_under_logs_are_not_taken(tmp_path: Path) -> None:
    """Near miss: ``logs/`` holds only another job's log: still missing."""
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "train_4243.out").write_text("other job\n")
    log = _log(collector.collect(_request(tmp_path, stdout="/dev/null")))
    assert (log["status"], log["path"]) == ("missing", None)


def test_a_logs_link_out_of_the_workdir_is_not_followed(tmp_path: Path) -> None:
    """``logs`` a symlink elsewhere: not listed (only the workdir and StdOut's parent, which
    the user named, are followed as links)."""
    elsewhere = tmp_path / "elsewhere"
    work = tmp_path / "work"
    elsewhere.mkdir()
    work.mkdir()
    (elsewhere / "train_4242.out").write_text("not the workdir's\n")
    (work / "logs").symlink_to(elsewhere)
    log = _log(collector.collect(_request(work, stdout="/dev/null")))
    assert (log["status"], log["path"]) == ("missing", None)


@pytest.mark.parametrize("stdout", ["/dev/null", "{w}/gone_4242.out"])
def test_the_jobs_own_log_beats_its_engines_newer_one(tmp_path: Path, stdout: str) -> None:
    """``vllm serve ... > vllm_$SLURM_JOB_ID.log &`` beside ``python train.py >
    logs/train_$SLURM_JOB_ID.out``: the engine's log, written every 10 s, is the newer, but it
    is the engine's (read for the launch checks), not the job's; with no other candidate it
    would still be read."""
    import os

    (tmp_path / "logs").mkdir()
    train, engine = tmp_path / "logs" / "train_4242.out", tmp_path / "vllm_4242.log"
    train.write_text("step:1 - actor/entropy:0.5\n")
    engine.write_text("INFO 12-05 10:00:01 [loggers.py:123] Engine 000: Running: 3 reqs\n")
    os.utime(train, (1_700_000_000, 1_700_000_000))
    os.utime(engine, (1_700_000_600, 1_700_000_600))
    log = _log(collector.collect(_request(tmp_path, stdout=stdout.format(w=tmp_path))))
    assert (log["status"], log["path"]) == ("mismatch", str(train))
    train.unlink()
    log = _log(collector.collect(_request(tmp_path, stdout=stdout.format(w=tmp_path))))
    assert (log["status"], log["path"]) == ("mismatch", str(engine))
