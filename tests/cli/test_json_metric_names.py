"""`--format json`'s ``metrics`` holds CONTRACT §4's canonical names only.

CONTRACT §3: ``metrics`` is "canonical name -> latest value (section 4)". `jobtables demo
--format json` printed ``log_ratio_batch_max`` there (a built-in alias's target for SkyRL's
``policy/rollout_train_logprobs_abs_diff_max``, no §4 name), as it would the positional
``log_ratio_pos_N`` buckets and ``z_clip_triggered``: a script holding the contract's list
met a name it has no meaning for. They are left out of ``metrics`` (the job object keeps
exactly the contract's keys); `jobtables job`'s ``history`` still carries them.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bot.cli import DEMO_RECORDING, main

SECTION_4 = frozenset({
    # RL
    "reward", "pass_at_n", "policy_loss", "entropy", "grad_norm", "clip_ratio", "imp_ratio_mean",
    "imp_ratio_capped_fraction", "log_ratio_abs_mean", "log_ratio_abs_p99", "log_ratio_abs_max",
    "n_tokens_dp_gt_50pct", "avg_num_tokens", "rollout_train_prob_diff_mean",
    # SFT
    "loss", "learning_rate", "epoch", "sec_per_step",
    # Datagen
    "chunks_done", "chunks_total", "trials", "avg_turns", "mean_reward", "exc_pct",
    # Eval
    "trials_total", "pass_rate", "top_exception",
})
"""CONTRACT §4, copied word for word (grad_norm once; SFT and Datagen repeat it and trials)."""


def test_the_sweeps_metrics_are_section_4_names(capsys: pytest.CaptureFixture[str]) -> None:
    """Every job's ``metrics`` key is a §4 name."""
    assert main(["demo", "--format", "json"]) == 0
    jobs = json.loads(capsys.readouterr().out)["jobs"]
    assert any(job["metrics"] for job in jobs)
    for job in jobs:
        assert set(job["metrics"]) <= SECTION_4, (job["job_id"], job["metrics"])


def test_one_jobs_metrics_are_section_4_names(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`jobtables job ID --format json` too; its ``history`` keeps the other names."""
    config = tmp_path / "jobtables.toml"
    config.write_text(f'[[clusters]]\nname = "demo"\nkind = "replay"\npath = "{DEMO_RECORDING}"\n')
    assert main(["job", "40880", "--config", str(config), "--format", "json"]) == 0
    job = json.loads(capsys.readouterr().out)
    assert set(job["metrics"]) <= SECTION_4, job["metrics"]
    assert "grad_norm" in job["metrics"]
    assert any("log_ratio_batch_max" in point["values"] for point in job["history"])
