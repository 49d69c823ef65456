"""A durable step beyond the run's total is not evidence that the run reached its total.

Review of 418fc7c ("a durable checkpoint or export at the total still reads done"): it took any
step >= the total. A verl GRPO run initialised from an SFT checkpoint in its workdir prints
that path in its config dump ('path': '<workdir>/checkpoints/sft-base/global_step_500/
huggingface'), the collector searches the folders a log names, and banked_step read 500: a
run that exited 0 at step 30 of 100 with no finish line read done, cleanup (its trial tree to
reap), instead of incomplete-run. A run saves its final state at its total (verl's last step,
SkyRL's final checkpoint and export, HF's checkpoint-<max_steps>, Megatron's iter_<train_iters>),
never beyond it: only a step at the total says the run got there.
"""

from __future__ import annotations

from probes.models import CheckpointListing
from tests.report.factories import judge
from tests.report.test_rl_completed_short import SKYRL, _completed


def test_a_step_past_the_total_is_someone_elses() -> None:
    """30 of 100 in the log, a global_step_500 on disk: incomplete-run, diagnose."""
    stray = CheckpointListing(roots=("/w/checkpoints",), steps=(20, 500))
    report = judge(_completed(SKYRL, stray)).report
    assert "incomplete-run" in report.flags
    assert report.recommendation is not None and report.recommendation.action == "diagnose"


def test_a_step_at_the_total_still_says_done() -> None:
    """global_step_100 of a 100-step run: done, cleanup (418fc7c)."""
    durable = CheckpointListing(roots=("/w/checkpoints",), steps=(20, 100))
    report = judge(_completed(SKYRL, durable)).report
    assert report.verdict == "done" and "incomplete-run" not in report.flags
