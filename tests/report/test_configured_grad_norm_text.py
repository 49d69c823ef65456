"""The RL row's words name the grad-norm numbers the rule was judged with.

CONTRACT §5: every rule number is configurable. Replayed on the real SLURM (a SkyRL v0.3
console run, policy/raw_grad_norm 16.3 with entropy -73% at step 26) under
``[thresholds] grad_norm_abs = 10``: the flags and the recommendation followed the 10
('grad_norm 16.3 > 10'), but the Trend read 'COLLAPSE: grad_norm 16.30 (>1.0), ...', the
default's number, and the early warning 'grad_norm ... >1.0 for 2+ steps' whatever
``grad_norm_abs`` and ``grad_norm_warning_steps`` said.
"""

from __future__ import annotations

from report.settings import ReportSettings, Thresholds
from tests.report.factories import facts, healthy_rl, judge, points, record, with_last


def _trend(thresholds: Thresholds, **series: list[float | None]) -> str:
    job = facts(record("rl-grpo-thresholds", "51"), points(healthy_rl(16, **series)))
    return judge(job, settings=ReportSettings(thresholds=thresholds)).report.trend


def test_a_collapse_names_the_configured_absolute_bound() -> None:
    """grad_norm 16.3 over a configured bound of 10 reads "(>10.0)", never the default's 1.0."""
    trend = _trend(Thresholds(grad_norm_abs=10.0),
                   grad_norm=with_last([0.2] * 16, 16.3), entropy=with_last([0.5] * 16, 0.1))
    assert trend.startswith("COLLAPSE: grad_norm 16.30 (>10.0),"), trend


def test_a_window_spike_under_the_configured_bound_reads_as_a_window_multiple() -> None:
    """grad_norm 6 under a bound of 10 fired on its window (0.2): '30.0× window', not '>1.0'."""
    trend = _trend(Thresholds(grad_norm_abs=10.0),
                   grad_norm=with_last([0.2] * 16, 6.0), entropy=with_last([0.5] * 16, 0.1))
    assert trend.startswith("COLLAPSE: grad_norm 6.00 (30.0× window),"), trend


def test_the_early_warning_names_the_configured_bound_and_steps() -> None:
    """Three steps over a bound of 2 (grad_norm_warning_steps = 3) read ">2.0 for 3+ steps"."""
    trend = _trend(Thresholds(grad_norm_abs=2.0, grad_norm_warning_steps=3,
                              grad_norm_window_factor=100.0),
                   grad_norm=with_last([0.2] * 16, 2.5, 2.6, 2.7))
    assert trend == "grad_norm 2.70 >2.0 for 3+ steps: collapse risk", trend


def test_a_recovered_warning_names_the_configured_bound() -> None:
    """A pair over a bound of 2 that came back under it names that bound."""
    trend = _trend(Thresholds(grad_norm_abs=2.0, grad_norm_window_factor=100.0),
                   grad_norm=with_last([0.2] * 16, 2.5, 2.6, 0.3))
    assert trend == "grad_norm >2.0 on steps 14–15, now 0.3: collapse risk", trend
