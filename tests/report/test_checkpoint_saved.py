"""The RL Trend's "Checkpoint saved" needs a durable checkpoint behind it, not a log line.

Seed: "Banked steps come from durable evidence, not a progress line ... An exports/global_step_N
signals completion only on a finished run; a running job also writes periodic saves there."
"""

from __future__ import annotations

from pathlib import Path

import pytest

from probes.models import CheckpointListing
from probes.slurm.checkpoints import read_checkpoints_local
from tests.report.factories import facts, healthy_rl, judge, points, record

STEP = 20


def _trend(saved: tuple[int, ...], listing: CheckpointListing | None) -> str:
    job = facts(record(), points(healthy_rl(STEP), first_step=1),
                summary_kw={"checkpoint_steps": saved})
    return judge(job.model_copy(update={"checkpoints": listing})).report.trend


@pytest.mark.parametrize(("saved", "listing", "shown"), [
    pytest.param((10, 20), None, False, id="log-says-saved-nothing-on-disk"),
    pytest.param((10, 20), CheckpointListing(steps=(10,)), False, id="log-ahead-of-disk"),
    pytest.param((10, 20), CheckpointListing(steps=(10, 20)), True, id="log-and-disk-agree"),
    pytest.param((), CheckpointListing(steps=(10, 20)), True, id="disk-alone-at-the-step"),
    pytest.param((), CheckpointListing(steps=(10,), export_steps=(20,)), False,
                 id="export-of-a-running-job-is-no-checkpoint"),
])
def test_checkpoint_saved_needs_durable_evidence(
        saved: tuple[int, ...], listing: CheckpointListing | None, shown: bool) -> None:
    """Only a durable step directory at the current step reads "Checkpoint saved"."""
    assert ("Checkpoint saved" in _trend(saved, listing)) is shown


def test_in_flight_save_above_the_tracker_is_not_saved(tmp_path: Path) -> None:
    """verl layout (reconstructed from verl's source): ``global_step_20`` exists but the tracker
    still says 10 (the save is in flight), so step 20 is not "Checkpoint saved" yet."""
    exp = tmp_path / "checkpoints" / "proj" / "exp"
    for step in (10, 20):
        (exp / f"global_step_{step}").mkdir(parents=True)
    (exp / "latest_checkpointed_iteration.txt").write_text("10")
    root = str(tmp_path / "checkpoints")
    assert "Checkpoint saved" not in _trend((10, 20), read_checkpoints_local([root]))
    (exp / "latest_checkpointed_iteration.txt").write_text("20")
    assert "Checkpoint saved" in _trend((10, 20), read_checkpoints_local([root]))
