"""A trial tree that could not be read is unknown, never "no result.json at all".

Replayed on the real SLURM: jtuser's eval (eval-qwen7b-x-tbench-private) writing Harbor trials
under a ``jobs/`` dir of mode 700, swept as the ``jobtables`` SSH user. The collector's open
failed with Permission denied, the error was dropped, and the row read ``STALL: no result.json
at all for 1m`` (eval_stall_minutes = 1; at the default 60 min the same false stall comes an
hour in) while the log kept printing Harbor's progress and engine 200s. The rulebook: a failed
fetch is indistinguishable from an idle job, so it says nothing about the job. Now the tree
carries the read error; the stall is judged on the log's silence alone (as with no tree to
list) and the Trend says the tree could not be read.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from probes.logs.parse import parse_log
from probes.models import JobFacts, JobState
from probes.slurm.assemble import trial_tree
from tests.report.factories import judge, log, record

ROOT = "/home/jtuser/jt/eval/jobs"
DENIED = {ROOT: {"exists": False, "jobs": {}, "error": f"[Errno 13] Permission denied: '{ROOT}'"}}
LOG = ("2026-12-04T10:05:01Z INF Registered tunnel connection connIndex=0 event=0\n"
       "⠋ 18/89 Mean: 0.278 ━━━━━━━━━━━━━━━━━━━ 0:12:31 0:20:02\n")


def _report(name: str, log_age_min: float, raw: dict = DENIED):  # type: ignore[no-untyped-def]
    now = datetime.now(UTC)
    rec = record(name, state=JobState.RUNNING, start_time=now - timedelta(minutes=90),
                 submit_time=now - timedelta(minutes=91), elapsed_s=5400)
    mtime = now - timedelta(minutes=log_age_min)
    facts = JobFacts(record=rec, log=log(text=LOG, mtime=mtime),
                     summary=parse_log(LOG, mtime=mtime), trials=trial_tree(raw))
    return judge(facts, now=now).report


def test_the_tree_carries_its_read_error() -> None:
    tree = trial_tree(DENIED)
    assert tree is not None and not tree.exists
    assert tree.error is not None and "Permission denied" in tree.error


def test_the_note_names_the_whole_root() -> None:
    """The Trend squeezes the path to its width; the job's note keeps it whole."""
    now = datetime.now(UTC)
    facts = JobFacts(record=record("eval-x", state=JobState.RUNNING,
                                   start_time=now - timedelta(minutes=5), elapsed_s=300),
                     log=log(text=LOG, mtime=now), summary=parse_log(LOG, mtime=now),
                     trials=trial_tree(DENIED))
    assert f"Permission denied: '{ROOT}'" in judge(facts, now=now).note


def test_an_unreadable_tree_under_a_live_log_is_no_stall() -> None:
    report = _report("eval-qwen7b-x-tbench-private", log_age_min=0.5)
    assert "stall" not in report.flags, report.trend
    assert "no result.json" not in report.trend
    assert "unreadable" in report.trend, report.trend
    assert report.metrics.get("trials") == 18.0  # Harbor's own line still counts


def test_an_unreadable_tree_under_a_silent_log_is_a_stall_on_the_log() -> None:
    report = _report("eval-qwen7b-x-tbench-private", log_age_min=75)
    assert "stall" in report.flags
    assert "no new log line" in report.trend, report.trend


def test_a_datagen_run_with_an_unreadable_tree_is_not_hung_while_its_log_moves() -> None:
    report = _report("datagen-swe-private", log_age_min=0.5)
    assert "stall" not in report.flags, report.trend
    assert "unreadable" in report.trend, report.trend
