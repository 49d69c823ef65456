"""A cancelled run reads as cancelled: its collapse is why it stopped, not a call to act now.

Found judging a SkyRL-shaped run that collapsed on its last step (grad_norm 3.1, entropy −52 %)
and was then ``scancel``ed: its row read verdict ``collapse``, Trend 'COLLAPSE: grad_norm 3.10
(>1.0), ...' exactly as a live collapsing run's (the RL table has no State column), no
recommendation, and the daily summary counted it 'COLLAPSE' for the whole ``recent_hours``. The
cancel was the collapse rule's first half; its second, the salvage, is still to make sure of.
A cancelled run whose last grad norms were above 1.0 read verdict ``warning`` (a prediction
about steps it will never take).
"""

from __future__ import annotations

from typing import Any

from probes.models import JobState
from report.models import Report
from report.sweep_summary import summary_lines
from tests.report.factories import NOW, facts, healthy_rl, judge, points, record, with_last

COLLAPSED = healthy_rl(grad_norm=with_last([0.2] * 12, 3.1), entropy=with_last([0.5] * 12, 0.24))


def _cancelled(name: str = "rl-run", series: dict[str, Any] | None = None) -> Any:
    return judge(facts(record(name, "41", JobState.CANCELLED), points(series or COLLAPSED),
                       checkpoints=[10])).report


def test_a_cancelled_collapse_reads_cancelled_and_names_the_salvage() -> None:
    """Verdict done, Trend 'Cancelled; COLLAPSE: ...' (whole in the cell), the collapse flag
    kept as evidence, and a diagnose naming the banked step before the collapse to salvage."""
    report = _cancelled()
    assert report.verdict == "done"
    assert "collapse" in report.flags
    assert report.trend == "Cancelled; COLLAPSE: grad_norm 3.10 (>1.0), entropy −52%"
    assert report.recommendation is not None and report.recommendation.action == "diagnose"
    why = report.recommendation.why
    assert why.startswith("collapse at step 12: grad_norm 3.1 > 1")
    assert "banked step 10" in why and "rollouts" in why
    line = "\n".join(summary_lines(Report(generated_at=NOW, clusters=[], jobs=[report])))
    assert "COLLAPSE" not in line


def test_a_cancelled_run_is_no_warning() -> None:
    """Grad norm above 1.0 on its last two steps: a cancelled run takes no more steps."""
    report = _cancelled(series=healthy_rl(grad_norm=with_last([0.2] * 12, 1.3, 1.45)))
    assert (report.verdict, report.trend, report.recommendation) == ("done", "Cancelled", None)


def test_a_cancelled_ablation_has_nothing_to_salvage_for() -> None:
    """A spike-mitigation ablation's collapse is its experiment's result: no diagnose."""
    report = _cancelled("rl-zclip-ablation")
    assert report.verdict == "done" and report.recommendation is None
    assert report.trend.startswith("Cancelled; COLLAPSE")
