"""A banked step is a training run's (RL, SFT). A dry-run of the bot on the real SLURM showed
``/job`` of a GPU-CI array reading "Banked step: 10": it ran in the same workdir as an RL run
whose ``checkpoints/global_step_10`` the checkpoint search found. A datagen, eval or catch-all
job beside a training run (an upload of its checkpoints, a CI run) banks nothing; a TIMEOUT
of one is not told to resume from another run's step."""

from __future__ import annotations

import pytest

from probes.models import JobState
from tests.report.factories import facts, judge, record


@pytest.mark.parametrize("name", ["gpu-ci-smoke", "datagen-swe-shards", "eval-qwen7b-x-swe",
                                  "upload-rl-grpo-ckpt"])
def test_a_job_that_trains_nothing_banks_no_step(name: str) -> None:
    detail = judge(facts(record(name), checkpoints=[10, 20]))
    assert detail.report.bucket in ("other", "datagen", "eval")
    assert detail.report.banked_step is None


def test_a_timeout_of_a_job_that_trains_nothing_names_no_banked_step() -> None:
    detail = judge(facts(record("gpu-ci-smoke", state=JobState.TIMEOUT), checkpoints=[10]))
    assert detail.report.banked_step is None
    assert "banked" not in str(detail.report.recommendation)


@pytest.mark.parametrize("name", ["rl-grpo-qwen7b", "sft-llama8b-2ep"])
def test_a_training_run_keeps_its_banked_step(name: str) -> None:
    assert judge(facts(record(name), checkpoints=[10, 20])).report.banked_step == 20
