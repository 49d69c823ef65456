"""A job pending with ``DependencyNeverSatisfied`` will never start: it is no buffer filling.

Replayed on the real SLURM 22.05: ``rl-lc-ok-r2`` queued ``--dependency=afterok:1512`` behind a
walltime run; 1512 TIMEOUT, and SLURM left the dependant pending with reason
DependencyNeverSatisfied (no ``kill_invalid_depend``), for ever. The TIMEOUT's row said so, but
the dependant itself sat in the 'Filling buffer' table, verdict buffering, no recommendation,
like any job waiting its turn (the rulebook's buffer table is for queue admission and bring-up).
"""

from __future__ import annotations

import pytest

from probes.models import JobFacts, JobState
from tests.report.factories import judge, record


@pytest.mark.parametrize("name", ["rl-lc-ok-r2", "sft-llama-r2", "datagen-x-r2", "misc-upload"])
def test_a_dependant_that_will_never_start_is_stalled_with_a_diagnose(name: str) -> None:
    job = JobFacts(record=record(name, "1513", JobState.PENDING,
                                 reason="DependencyNeverSatisfied",
                                 dependency="afterok:1512(failed)", depends_on=("1512",)))
    report = judge(job).report
    assert "buffer-filling" not in report.flags and report.verdict == "stalled"
    assert "never start" in report.trend
    assert report.recommendation is not None and report.recommendation.action == "diagnose"
    assert "1512" in report.recommendation.why


def test_a_dependant_still_waiting_is_buffering() -> None:
    job = JobFacts(record=record("rl-lc-any", "1511", JobState.PENDING, reason="Dependency",
                                 dependency="afterany:1510(unfulfilled)", depends_on=("1510",)))
    report = judge(job).report
    assert report.verdict == "buffering"
