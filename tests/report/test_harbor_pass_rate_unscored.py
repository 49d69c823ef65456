"""An eval's pass-rate is the fraction of its finished trials with reward > 0.

Replayed on the real SLURM: eval-qwen7b-x-tbench-instant, 32 finished trials of which 30 ended
at once in NonZeroAgentExitCodeError (null output tokens, no verifier result) and 2 passed,
read pass-rate 1.00 beside its INSTANT-FAIL flag, while Harbor's own progress line said
``32/100 Mean: 0.062``: the rate was taken over the 2 scored trials only. The rulebook's
pass-rate is the "fraction with reward > 0" and CONTRACT §5's ``signal:pass_rate`` counts "the
last 100 trials": a trial that finished unscored did not pass (Harbor's Mean counts it 0).
With no trial scored at all (no verifier) the pass-rate stays unknown, never 0.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from tests.report.factories import judge
from tests.report.test_harbor_dryrun_datagen import MAKE, _facts

_LOG = "2026-12-04 00:00:01 INFO cloudflared: Registered tunnel connection connIndex=0\n"


def test_instant_failures_count_as_not_passed(tmp_path: Path) -> None:
    jobs = tmp_path / "jobs"
    MAKE.write(jobs / "2026-12-04__09-40-00", {"instant": 30, "pass": 2, "inflight": 16},
               total=100, seed=90, minutes_ago=20)
    report = judge(_facts(jobs, _LOG, "eval-qwen7b-x-tbench"), now=datetime.now(UTC)).report
    assert "instant-fail" in report.flags
    assert report.metrics.get("pass_rate") == 2 / 32, report.metrics


def test_no_verifier_leaves_the_pass_rate_unknown(tmp_path: Path) -> None:
    """Near-miss: nothing scored at all is no 0 pass-rate."""
    jobs = tmp_path / "jobs"
    MAKE.write(jobs / "2026-12-04__09-40-00", {"fail": 12, "inflight": 4}, total=100, seed=91,
               minutes_ago=20, verifier_disabled=True)
    report = judge(_facts(jobs, _LOG, "eval-qwen7b-x-tbench"), now=datetime.now(UTC)).report
    assert "pass_rate" not in report.metrics, report.metrics
