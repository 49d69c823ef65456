"""verl's rollout-correction (TIS) metrics, judged from the console line verl prints.

verl >= 2025-10 logs its importance-sampling weights under ``rollout_corr/``
(``rollout_corr/rollout_is_mean``, before that ``mismatch/rollout_is_mean``): the mean of
pi_train / pi_rollout, computed "BEFORE truncation" (rollout_corr_helper.py), so it is the
uncapped mean (``imp_ratio_uncapped_mean``, tests/report/test_uncapped_imp_ratio.py), and
``rollout_is_ratio_fraction_high``, the share above the cap (the rulebook's
``imp_ratio_capped_fraction``). Replayed as a real SLURM job
(tests/fixtures/rl-dryrun/generate.py), a run whose ratio sat at 2.3, 18 % of it truncated,
read healthy: the TIS rule never saw it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from probes.logs.metric_names import canonical_values
from tests.report.factories import judge
from tests.report.test_judge_rl_rulebook import _from_log

LOG = Path(__file__).resolve().parents[1] / "fixtures" / "rl-dryrun" / "verl_rollout_corr_tis.log"


# actor/rollout_corr/: verl computing the correction in the actor (bypass mode) logs it there
@pytest.mark.parametrize("prefix", ["rollout_corr/", "mismatch/", "actor/rollout_corr/"])
def test_verl_rollout_is_mean_is_the_tis_ratio(prefix: str) -> None:
    got = canonical_values({f"{prefix}rollout_is_mean": 1.02, f"{prefix}rollout_is_std": 0.2,
                            f"{prefix}rollout_is_seq_mean": 0.7}, {})
    assert got == {"imp_ratio_uncapped_mean": 1.02}


def test_a_verl_run_with_its_tis_ratio_out_of_range_is_a_warning() -> None:
    report = judge(_from_log(LOG.read_bytes(), name="rl-verl-tis-dapo")).report
    assert report.metrics["imp_ratio_uncapped_mean"] == pytest.approx(2.33)
    assert "imp-ratio-out-of-range" in report.flags
    assert report.verdict == "warning"
    assert "TIS capped fraction 18.0%" in report.trend
    # the huge rollout/train prob diff is reported, never a signal
    assert report.metrics["rollout_train_prob_diff_mean"] == pytest.approx(3.7e9)
    assert not any(flag.startswith("signal:") for flag in report.flags)


def _healthy_text() -> str:
    """The run with its ratio healthy: mean ~1.0 and 0.2 % of the weights above the cap (the
    recorded run, its ratio at 2.3, truncated 18 %)."""
    return (LOG.read_text()
            .replace("rollout_corr/rollout_is_mean:2.3", "rollout_corr/rollout_is_mean:1.0")
            .replace("rollout_is_ratio_fraction_high:0.18", "rollout_is_ratio_fraction_high:0.002"))


def test_a_healthy_ratio_stays_healthy() -> None:
    text = _healthy_text()
    report = judge(_from_log(text, name="rl-verl-tis-dapo")).report
    assert report.metrics["imp_ratio_uncapped_mean"] == pytest.approx(1.03)
    assert "imp-ratio-out-of-range" not in report.flags
    assert report.verdict == "healthy"


@pytest.mark.parametrize("prefix", ["rollout_corr/", "mismatch/", "actor/rollout_corr/"])
def test_verl_fraction_high_is_the_capped_fraction(prefix: str) -> None:
    """verl's share of IS weights above the upper threshold (truncated): the rulebook's
    tis/imp_ratio_capped_fraction; its _low sibling is not."""
    got = canonical_values({f"{prefix}rollout_is_ratio_fraction_high": 0.004,
                            f"{prefix}rollout_is_ratio_fraction_low": 0.2}, {})
    assert got == {"imp_ratio_capped_fraction": 0.004}


def test_a_verl_run_truncating_routinely_is_a_warning_that_says_so() -> None:
    """The mean in range (1.0) but 4.5 % of the weights capped: imp-ratio-out-of-range, and
    the trend names the capped share, not the mean's range."""
    text = _healthy_text().replace("rollout_is_ratio_fraction_high:0.002",
                                   "rollout_is_ratio_fraction_high:0.045")
    report = judge(_from_log(text, name="rl-verl-tis-dapo")).report
    assert report.metrics["imp_ratio_capped_fraction"] == pytest.approx(0.045)
    assert "imp-ratio-out-of-range" in report.flags and report.verdict == "warning"
    assert "TIS capped fraction 4.5%" in report.trend
