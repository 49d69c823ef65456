"""A run whose log starts past its first steps resumed from a checkpoint: no first launch.

Replayed on the real SLURM: a verl chain (TIMEOUT at step 12, its afterany successor resumed
from ``global_step_10`` logging steps 11..16) and an OpenRLHF 0.8.0 chain (resumed at step 28).
``jobtables sweep`` read each successor as a relaunch (the TIMEOUT attempt of the same name is
in the sweep) and flagged nothing; ``jobtables job <successor>``, which asks SLURM for that job
only, saw no earlier attempt and flagged it ``deep-probe`` ("first launch, still in its first
steps"): the same job, two different rows. The log says it: a first launch logs from its first
steps; a history whose first logged step lies beyond the run's logging cadence (twice its
spacing, and past step 1) continues an earlier attempt.
"""

from __future__ import annotations

import pytest

from tests.report.factories import facts, healthy_rl, judge, points, record


@pytest.mark.parametrize(("first_step", "every", "probed"), [
    (1, 1, True),  # a brand-new launch in its first steps
    (0, 1, True),  # one that logs a step 0 (verl's validation before training)
    (10, 10, True),  # a new launch logging every 10 steps (HF logging_steps=10)
    (11, 1, False),  # resumed from global_step_10 (verl), steps 11..16
    (28, 1, False),  # resumed at step 28 (OpenRLHF)
])
def test_a_resumed_run_alone_is_no_first_launch(first_step: int, every: int,
                                                probed: bool) -> None:
    pts = points(healthy_rl(6))
    pts = tuple(p.model_copy(update={"step": first_step + i * every})
                for i, p in enumerate(pts))
    detail = judge(facts(record(), pts))
    assert ("deep-probe" in detail.report.flags) is probed
