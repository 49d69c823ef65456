"""A job back to healthy after a state the thread never told is no 'recovered' change.

Measured through the fake Slack: a log fetch failing every other sweep (a flaky login node:
``fetch-failed``, verdict ``unknown``, which is told nowhere) added a thread reply 'recovered:
sft-long — was unknown' each time it read again: 3 replies in six sweeps about a trouble the
thread never mentioned. Recovery is told from what the thread told (collapse, stalled), not
from ``unknown``, nor from ``warning``, whose beginning alone is told (a grad norm hovering at
1.0 read warning and healthy by turns: ``tests/bot/test_quiet_day.py``).
"""

from __future__ import annotations

from probes.models import JobState
from report.changes import Snapshot, change_of
from tests.report.factories import report_job

R = JobState.RUNNING


def test_healthy_again_after_an_unknown_read_is_quiet() -> None:
    """unknown or warning -> healthy says nothing; a told trouble's recovery is still told."""
    row = report_job("sft-long", "sft", job_id="6200", state=R, verdict="healthy")
    assert change_of(Snapshot(state=R, verdict="unknown"), row) is None
    assert change_of(Snapshot(state=R, verdict="warning"), row) is None
    change = change_of(Snapshot(state=R, verdict="collapse"), row)
    assert change is not None and change.kind == "recovered"
    change = change_of(Snapshot(state=R, verdict="stalled", stalled=True), row)
    assert change is not None and change.kind == "recovered"
