"""A collapse's salvage names the last banked checkpoint BEFORE the collapse began.

Found live (sbatch as jtuser, SkyRL console_v03_collapse.log replayed up to step 30, saves
global_step_10/20/30 in the run's ckpts): the row read ``cancel_and_salvage`` "collapse at step
30: grad_norm 6.16 > 1; entropy ... ; salvage the last banked checkpoint and the rollouts
first" with banked_step 30 -- the last banked checkpoint IS the collapsed step's save. The
seed's "cancel + salvage" keeps the weights from before the collapse: a save at or after the
step it began on holds collapsed weights, so the salvage names the last one before it, or says
that none is safe.
"""

from __future__ import annotations

from typing import Any

from probes.models import JobState
from tests.report.factories import facts, healthy_rl, judge, points, record, with_last

# Two signals (grad_norm > 1, entropy off its trend) on the last two of 14 steps: onset 13.
LAST_TWO = healthy_rl(14, grad_norm=with_last([0.2] * 14, 3.1, 3.4),
                      entropy=with_last([0.5] * 14, 0.24, 0.12))
# Collapsed on each of the last 7 steps (more than the 5 recent steps scanned): onset 14.
SEVEN = healthy_rl(20, grad_norm=with_last([0.2] * 20, *[3.0 + i for i in range(7)]),
                   entropy=with_last([0.5] * 20, *[0.5 * 0.5 ** (i + 1) for i in range(7)]))


def _why(series: dict[str, Any], banked: list[int], state: JobState = JobState.RUNNING) -> str:
    report = judge(facts(record("rl-run", "41", state), points(series),
                         checkpoints=banked)).report
    assert "collapse" in report.flags and report.recommendation is not None
    return report.recommendation.why


def test_a_save_at_the_collapse_step_is_not_the_salvage() -> None:
    """Saves at 10 and 13, collapse began at 13: salvage 10, not 13 (near miss: 12 is)."""
    why = _why(LAST_TWO, [10, 13])
    assert "banked step 10 (the last before the collapse began at step 13)" in why
    assert "banked step 13" not in why and "the last banked checkpoint" not in why
    assert "banked step 12 (" in _why(LAST_TWO, [10, 12, 13])


def test_no_save_before_the_collapse_says_none_is_safe() -> None:
    why = _why(LAST_TWO, [13, 14])
    assert "no banked checkpoint is safe" in why and "before the collapse began at step 13" in why
    assert "banked step" not in why


def test_the_onset_is_found_back_past_the_recent_steps() -> None:
    """Collapsed on 14..20, only 16..20 are the recent steps: a save at 15 is collapsed too."""
    why = _why(SEVEN, [10, 15, 20])
    assert "banked step 10 (the last before the collapse began at step 14)" in why


def test_completed_and_cancelled_name_the_same_target() -> None:
    for state in (JobState.COMPLETED, JobState.CANCELLED):
        why = _why(LAST_TWO, [10, 13], state)
        assert "banked step 10 (the last before the collapse began at step 13)" in why
