"""A datagen TIMEOUT that finished no trial stranded no traces.

Replayed on the real SLURM 22.05 as jtuser (datagen-tb-timeout-empty): a datagen run whose
Harbor job dir held its 16 started trials and not one result.json when its walltime ended it
(the engine never answered). ``jobtables job`` read ``TIMEOUT stranded traces; consolidate
manually``, ``stranded-traces``, recommendation ``consolidate_manually`` "traces are on disk at
<root>": there were none to consolidate. The rulebook's stranded traces are traces on disk that
the killed upload did not push; a tree read whole with no finished trial (and no Harbor row
counting one) has none: no ``stranded-traces``, ``diagnose`` why it generated nothing. A tree
that could not be read, or no trial root at all (a non-Harbor generator), is unknown: the
rule stands.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from probes.models import JobFacts, JobState, TrialTree
from report.models import JobReport
from tests.report.factories import NOW, facts, judge, record, tree, trial


def _report(trials: TrialTree | None, log_text_done: int | None = None) -> JobReport:
    rec = record("datagen-tb-timeout-empty", state=JobState.TIMEOUT,
                 start_time=NOW - timedelta(minutes=62), elapsed_s=3720,
                 end_time=NOW - timedelta(minutes=1))
    job: JobFacts = facts(rec, trials=trials, summary_kw={
        "line_count": 2, **({"harbor_done": log_text_done, "harbor_total": 600}
                            if log_text_done is not None else {})})
    return judge(job).report


def test_a_timeout_with_no_finished_trial_stranded_nothing() -> None:
    report = _report(tree([], root="/w/jobs", newest_result_at=None, trials_total=600))
    assert "stranded-traces" not in report.flags, report.trend
    assert report.recommendation is not None
    assert report.recommendation.action == "diagnose", report.recommendation
    assert "no trial" in report.trend, report.trend


@pytest.mark.parametrize("trials", [
    tree([trial()] * 5, root="/w/jobs"),                          # traces on disk
    TrialTree(root="/w/jobs", exists=False,
              error="[Errno 13] Permission denied: '/w/jobs'"),   # unknown
    None,                                                         # no trial root: unknown
])
def test_a_timeout_with_traces_or_unknown_ones_stranded_them(trials: TrialTree | None) -> None:
    report = _report(trials)
    assert "stranded-traces" in report.flags, report.trend
    assert report.recommendation is not None
    assert report.recommendation.action == "consolidate_manually"


def test_harbors_row_counting_trials_done_is_traces_on_disk() -> None:
    """A tree listing no result.json but a log whose Harbor row counts 40 done: trust the row
    (a count cut short, a tree read in part): traces stranded."""
    report = _report(tree([], root="/w/jobs", newest_result_at=None), log_text_done=40)
    assert "stranded-traces" in report.flags, report.trend
