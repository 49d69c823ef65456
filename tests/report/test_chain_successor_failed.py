"""A walltime TIMEOUT whose restart then failed is no chain restart (rulebook, cross-cutting).

The rulebook: "Chain-restart TIMEOUTs are normal ... when a walltime-limited job TIMEOUTs and
its afterany successor is RUNNING/PENDING"; CONTRACT §6 ``chain-restart``: "TIMEOUT whose
afterany successor is pending or running". A restart that ran and ended is still named (a
chain A -> B -> C that moved past B, or finished), but one that FAILED stopped the run there:
the TIMEOUT read 'restarting', 'Walltime TIMEOUT; normal chain restart -> 3131 (failed)',
flag ``chain-restart``, as if the run went on.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from probes.models import JobState
from tests.report.test_chain_ran import _attempt, _rows

M = timedelta(minutes=1)


@pytest.mark.parametrize("state", [JobState.FAILED, JobState.OUT_OF_MEMORY,
                                   JobState.NODE_FAIL])
def test_a_timeout_whose_restart_failed_says_the_chain_stopped(state: JobState) -> None:
    rows = _rows(_attempt("3130", 9 * M, 8 * M), _attempt("3131", 8 * M, 6 * M, state))
    row = rows["3130"]
    assert "chain-restart" not in row.flags and row.successor is None
    assert row.verdict == "failed", row.trend
    assert "restart 3131" in row.trend and "chain stopped" in row.trend
    assert row.recommendation is not None and row.recommendation.action == "diagnose"
    assert "3131" in row.recommendation.why
    assert rows["3131"].verdict == "failed"  # the restart's own row says why it failed


@pytest.mark.parametrize("state", [JobState.TIMEOUT, JobState.COMPLETED])
def test_a_restart_that_went_on_or_finished_is_still_the_chain(state: JobState) -> None:
    """Near miss: a restart that itself hit its walltime (the chain moved on) or finished."""
    rows = _rows(_attempt("3130", 9 * M, 8 * M), _attempt("3131", 8 * M, 6 * M, state))
    assert rows["3130"].verdict == "restarting" and "chain-restart" in rows["3130"].flags


def test_a_planned_stop_whose_restart_failed_says_the_chain_stopped() -> None:
    """A COMPLETED run that stopped at its time budget (NeMo-RL's 'Timeout has been reached,
    stopping training early') is read as a TIMEOUT's chain: its restart that ran (the
    fallback: same name and workdir, started at its end) and FAILED stopped it there. It read
    'Stopped at time budget; no successor queued', as if no restart had been queued."""
    from tests.report.factories import record
    from tests.report.test_planned_stop import END, NEMO, _facts, _judge

    failed = record("rl-nemo-grpo", "101", JobState.FAILED, dependency="", depends_on=(),
                    submit_time=END - timedelta(hours=1), start_time=END,
                    end_time=END + timedelta(minutes=5))
    report = _judge(_facts(NEMO.read_text()), failed)
    assert "chain-restart" not in report.flags and report.successor is None
    assert "restart 101 failed: chain stopped" in report.trend, report.trend
    assert report.recommendation is not None and report.recommendation.action == "diagnose"
    assert "101" in report.recommendation.why


@pytest.mark.parametrize("after", [JobState.RUNNING, JobState.PENDING, JobState.COMPLETED,
                                   JobState.CANCELLED])
def test_a_run_that_went_on_past_its_failed_restart_did_not_stop_there(after: JobState) -> None:
    """An ``afterany`` chain releases its next link whatever the last one's end: 3130 TIMEOUT,
    its restart 3131 FAILED, 3132 resumed the run (running, queued, finished it, or ran and
    was cancelled: the run stopped at that cancel, told by 3132's own row). 3130
    read 'restart 3131 failed: chain stopped', verdict failed, beside the run going on: one
    failure counted twice, and a finished run's first link left failed."""
    rows = _rows(_attempt("3130", 9 * M, 8 * M), _attempt("3131", 8 * M, 6 * M, JobState.FAILED),
                 _attempt("3132", 5 * M, 4 * M, after))
    row = rows["3130"]
    assert "chain stopped" not in row.trend and row.verdict == "restarting", row.trend
    assert row.successor == "3131" and "chain-restart" in row.flags
    assert rows["3131"].verdict == "failed"  # the failure is told on its own row
