"""An SFT grad explosion (a seed red flag) tells the user what to do, not ``null``.

Found live (sbatch as jtuser, 7712 sft-gradx-recs: tests/fixtures/hf-transformers-5.24.0/
sft_healthy.out's first 30 per-step dicts, then {'loss': '3.912', 'grad_norm': '48.31', ...}):
jobtables sweep --format json read flags ['grad-explosion'], verdict warning, trend 'Grad
explosion at step 31: 48.31' and recommendation null. The seed lists grad explosion among the
SFT red flags beside loss -> NaN (whose row asks to diagnose and resume from the last good
checkpoint): the row now asks for a diagnosis naming the step, the value, the window mean, and
the last banked checkpoint before it to resume from should the loss follow.
"""

from __future__ import annotations

from probes.models import JobState
from report.models import JobReport
from tests.report.factories import facts, judge, points, record, with_last


def _report(grad_last: float, banked: list[int] | None = None,
            loss_last: float = 1.4) -> JobReport:
    series = {"loss": with_last([2.0 - 0.05 * i for i in range(14)], loss_last),
              "grad_norm": with_last([0.8] * 14, grad_last)}
    return judge(facts(record("sft-llama-2ep", state=JobState.RUNNING), points(series),
                       checkpoints=banked)).report


def test_a_grad_explosion_asks_for_a_diagnosis() -> None:
    report = _report(48.31, [10, 14])
    assert report.flags == ["grad-explosion"] and report.verdict == "warning"
    assert report.recommendation is not None and report.recommendation.action == "diagnose"
    why = report.recommendation.why
    assert why.startswith("grad explosion at step 14: grad_norm 48.31 (> 10× window mean 0.8)")
    assert "banked step 10" in why and "banked step 14" not in why


def test_without_a_banked_step_it_says_so() -> None:
    rec = _report(48.31).recommendation
    assert rec is not None and "no banked checkpoint before it found" in rec.why


def test_near_miss_and_nan_loss_win() -> None:
    """Under 10x the window: no flag, no recommendation; a NaN loss's advice outranks it."""
    calm = _report(7.9)
    assert calm.flags == [] and calm.recommendation is None
    rec = _report(float("nan"), loss_last=float("nan")).recommendation
    assert rec is not None and rec.why.startswith("Loss → NaN")
