"""A log last written before the job started says nothing about this job's silence.

Replayed on the real SLURM 22.05 as jtuser (umask 077, so the ``jobs/`` tree is unreadable to
the ``jobtables`` SSH user): an eval and a datagen run each a walltime TIMEOUT appending to
``logs/run.log`` (``--open-mode=append``), the restart queued 5 hours (the log's and tree's
mtimes set back 5 h with ``touch -d``) and then started, still in bring-up with no line of its
own. ``jobtables sweep`` read, 20 s after the restart started, ``STALL: no new log line for
5h00m`` (eval, diagnose) and ``HUNG: no log line for 5h00m (trial tree unreadable)`` with both
``stall`` and ``buffer-filling`` (datagen): the log's silence was timed from its mtime, the
predecessor's last write, where the trial tree's silence is timed from no earlier than the
job's own start. Now both silences are, and a hung datagen run is no bring-up.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from probes.logs.parse import parse_log
from probes.models import JobFacts, JobState, TrialTree
from probes.slurm.assemble import trial_tree
from report.models import JobReport
from tests.report.factories import NOW, judge, log, record, tree, trial

ROOT = "/home/jtuser/jt-tests/timeflags/run/jobs"
DENIED = {ROOT: {"exists": False, "jobs": {}, "error": f"[Errno 13] Permission denied: '{ROOT}'"}}
PREDECESSOR = (
    "2026-12-05T09:50:34Z INF Registered tunnel connection connIndex=0 event=0 ip=198.41.192.7\n"
    "⠋  30/300 Mean: 0.333 ━━━━━━━━━━━━━━━━━━━ 0:12:31 0:20:02\n"
    "slurmstepd-vm: error: *** JOB 110 ON vm CANCELLED AT 2026-12-05T09:53:03 DUE TO TIME "
    "LIMIT ***\n"
)
"""What the restart's own part of the appended log holds: nothing after its predecessor's end
marker (probes.logs.attempts cuts it off); the file's mtime is that end."""


def _report(name: str, ran_min: float, trials: TrialTree | None, *,
            log_age_min: float = 300, text: str = "") -> JobReport:
    mtime = NOW - timedelta(minutes=log_age_min)
    facts = JobFacts(
        record=record(name, state=JobState.RUNNING, start_time=NOW - timedelta(minutes=ran_min),
                      elapsed_s=int(ran_min * 60)),
        log=log(text=text, mtime=mtime, size=len(PREDECESSOR.encode())),
        summary=parse_log(text, mtime=mtime).model_copy(update={"line_count": 3}),
        trials=trials)
    return judge(facts).report


def _old_tree() -> TrialTree:
    """The predecessor's 20 finished trials, written 5 h ago (readable)."""
    old = NOW - timedelta(minutes=300)
    return tree([trial(started_at=old - timedelta(minutes=5), finished_at=old)] * 20,
                newest_result_at=old)


NAMES = ["eval-qwen3-x-tbench-append", "datagen-tb-append"]


@pytest.mark.parametrize("name", NAMES)
def test_a_restart_under_its_predecessors_old_log_is_no_stall(name: str) -> None:
    """Started 1 minute ago, the appended log last written 5 h ago, the tree unreadable."""
    report = _report(name, 1, trial_tree(DENIED))
    assert "stall" not in report.flags, report.trend
    assert "5h00m" not in report.trend, report.trend


@pytest.mark.parametrize("name", NAMES)
def test_a_restart_silent_since_its_start_is_timed_from_its_start(name: str) -> None:
    """2.5 h in with no line of its own: past both windows, a stall of 2h30m, not 5h00m."""
    report = _report(name, 150, trial_tree(DENIED))
    assert "stall" in report.flags and report.verdict == "stalled", report.trend
    assert "2h30m" in report.trend and "5h00m" not in report.trend, report.trend
    assert "buffer-filling" not in report.flags


def test_a_resumed_datagen_run_hung_since_its_start_names_one_silence() -> None:
    """A readable tree and the log both last written before the start: the run has been
    silent since its start (2h30m), its log no longer than that."""
    report = _report("datagen-tb-append", 150, _old_tree())
    assert "stall" in report.flags, report.trend
    assert report.trend.startswith("HUNG: no new trial or log line for 2h30m"), report.trend


def test_a_datagen_run_with_no_log_and_no_trial_past_the_window_is_hung_not_filling() -> None:
    """No log found and no trial 2.5 h in: hung, not in the buffer table as well."""
    facts = JobFacts(
        record=record("datagen-tb-nolog", state=JobState.RUNNING,
                      start_time=NOW - timedelta(minutes=150), elapsed_s=9000),
        log=log(status="missing", path=None, mtime=None, size=None))
    report = judge(facts).report
    assert "stall" in report.flags and report.verdict == "stalled", report.flags
    assert "buffer-filling" not in report.flags, report.flags


@pytest.mark.parametrize("name", NAMES)
def test_a_log_written_since_the_start_keeps_its_own_age(name: str) -> None:
    """Near miss: the job's own line 20 minutes ago (after its start) is its log's age: a
    datagen run whose log spoke 20 min ago is not hung; an unreadable eval not stalled."""
    text = "⠋  30/300 Mean: 0.333 ━━━━━━━━━━━━━━━━━━━ 0:12:31 0:20:02\n"
    report = _report(name, 150, trial_tree(DENIED), log_age_min=20, text=text)
    assert "stall" not in report.flags, report.trend


def test_a_hung_run_whose_log_was_not_found_says_so() -> None:
    """No log found: the Trend says the trials' silence, not a log line's it never read."""
    old = NOW - timedelta(minutes=150)
    facts = JobFacts(
        record=record("datagen-tb-nolog", state=JobState.RUNNING,
                      start_time=NOW - timedelta(minutes=180), elapsed_s=10800),
        log=log(status="missing", path=None, mtime=None, size=None),
        trials=tree([trial(started_at=old - timedelta(minutes=5), finished_at=old)] * 20,
                    newest_result_at=old))
    report = judge(facts).report
    assert "stall" in report.flags, report.trend
    assert report.trend.startswith("HUNG: no new trial for 2h30m (no log found)"), report.trend
