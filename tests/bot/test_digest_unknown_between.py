"""A trouble read ``unknown`` between two sweeps keeps its recovery told (follow-up of 752db61).

752db61 stopped telling 'recovered' from ``unknown`` (a log fetch failing: told nowhere), but
the seen record keeps only the last verdict: a collapse the thread told, then a sweep whose
log fetch failed (unknown), then healthy again, was never told recovered; before 752db61 it
read 'recovered — was unknown'. The record keeps the told trouble through an unknown read
(``report.changes.through_untold``, applied by ``bot.digest.seen_now``): the recovery is told
from it, and the same trouble read again after the blip is no new change.
"""

from __future__ import annotations

from bot.digest import seen_now
from probes.models import JobState
from report.changes import diff
from report.models import JobReport, Report
from tests.report.factories import report_job, report_of

R = JobState.RUNNING


def _report(verdict: str) -> Report:
    row: JobReport = report_job("rl-grpo", "rl", job_id="4242", state=R, verdict=verdict,
                                cluster="alpha")
    return report_of(row)


def _told(verdicts: list[str]) -> list[tuple[str, str]]:
    """The changes each sweep after the first tells, the seen record carried between them."""
    seen = seen_now(None, _report(verdicts[0]))
    told = []
    for verdict in verdicts[1:]:
        report = _report(verdict)
        told += [(c.kind, c.why) for c in diff(seen, report)]
        seen = seen_now(seen, report)
    return told


def test_a_collapse_read_unknown_then_healthy_is_told_recovered() -> None:
    assert _told(["collapse", "unknown", "healthy"]) == [("recovered", "was collapse")]


def test_the_same_collapse_after_an_unknown_read_is_no_new_change() -> None:
    assert _told(["collapse", "unknown", "collapse"]) == []


def test_unknown_between_healthy_reads_stays_quiet() -> None:
    assert _told(["healthy", "unknown", "healthy"]) == []
