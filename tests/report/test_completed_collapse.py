"""An RL run that COMPLETED on a collapsed policy is diagnosed, not routed to cleanup.

Found replaying a verl console that collapsed on its last two steps (grad_norm 3.1, entropy
−49 %) and exited 0: the row read verdict ``collapse`` and recommendation ``cleanup``
('rl-standard-job-cleanup'), and the owner's job-end DM a plain '✅ ... completed.'. Its final
weights are past the collapse: the collapse rule's salvage (the last checkpoint before it, the
rollouts) comes before any cleanup, as a completed SFT run whose loss went NaN or whose
gradient stopped is a ``diagnose``. A spike-mitigation ablation keeps its cleanup: the collapse
is its experiment's result.
"""

from __future__ import annotations

from typing import Any

from probes.models import JobState
from tests.report.factories import facts, healthy_rl, judge, points, record, with_last

COLLAPSED_AT_END = healthy_rl(grad_norm=with_last([0.2] * 12, 3.1),
                              entropy=with_last([0.5] * 12, 0.24))


def _completed(name: str = "rl-run", series: dict[str, Any] | None = None) -> Any:
    return judge(facts(record(name, "41", JobState.COMPLETED), points(series or COLLAPSED_AT_END),
                       checkpoints=[10]))


def test_a_run_completed_on_a_collapse_is_diagnosed_naming_what_to_salvage() -> None:
    """Collapse on its last step: diagnose, naming the step, the banked step before it and the
    cleanup routine that waits."""
    report = _completed().report
    assert "collapse" in report.flags and report.verdict == "collapse"
    assert report.recommendation is not None and report.recommendation.action == "diagnose"
    why = report.recommendation.why
    assert why.startswith("collapse at step 12: grad_norm 3.1 > 1")
    assert "banked step 10" in why and "rl-standard-job-cleanup" in why


def test_near_misses_keep_their_cleanup() -> None:
    """A calm completed run, and an ablation's collapse (its result), are routed to cleanup."""
    calm = _completed(series=healthy_rl()).report
    ablation = _completed("rl-zclip-ablation").report
    for report in (calm, ablation):
        assert report.recommendation is not None
        assert report.recommendation.action == "cleanup"
        assert report.recommendation.why == "rl-standard-job-cleanup"
