"""RL trainer logs (SkyRL, verl) through parse_log, and the canonical-name table."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from pathlib import Path
from textwrap import dedent

import pytest

from probes.logs.metric_names import canonical_name, canonical_values
from probes.logs.parse import parse_log

ESC = "\x1b"
RAY = "(skyrl_entrypoint pid=48213) "
LOGURU = "2026-02-12 14:31:07.412 | INFO     | skyrl.train.utils.tracking:log:189 - "


def skyrl_step(step: int, entropy: float, *, old_keys: bool = False, colour: bool = True) -> str:
    """One SkyRL console step as a Ray-prefixed, coloured loguru header plus a pprint dict."""
    grad = (
        [f"'policy/raw_grad_norm': '{0.3 + step / 100:.4f}'", "'policy/grad_norm': '0.1000'"]
        if old_keys
        else [f"'policy/grad_norm': '{0.2 + step / 100:.4f}'"]
    )
    clip = (
        "'policy/ppo_clip_ratio': '0.0021'"
        if old_keys
        else ("'policy/loss_metrics/clip_ratio': '0.0021'")
    )
    body = [
        "'generate/avg_num_tokens': '812.3125'",
        *grad,
        clip,
        f"'policy/policy_entropy': '{entropy:.4f}'",
        "'policy/policy_loss': '-0.0134'",
        "'reward/avg_pass_at_8': '0.6250'",
        "'reward/avg_raw_reward': '0.4062'",
        "'timing/step': '155.1840'",
        f"'trainer/global_step': {step}",
    ]
    header = f"{LOGURU}Step {step}: "
    if colour:
        header = f"{ESC}[32m{header}{ESC}[0m"
    lines = [f"{RAY}{header}"]
    lines.append(f"{RAY}{{{body[0]},")
    lines += [f"{RAY} {item}," for item in body[1:-1]]
    lines.append(f"{RAY} {body[-1]}}}")
    return "\n".join(lines) + "\n"


def reward_line(pass8: float, raw: float) -> str:
    """SkyRL's per-step reward line (raw Python floats, no step number)."""
    return (
        f"{RAY}{LOGURU}reward/avg_pass_at_8: {pass8}, reward/avg_raw_reward: {raw}, "
        "reward/mean_positive_reward: 0.8125\n"
    )


def test_skyrl_new_keys_with_ansi_and_ray_prefix() -> None:
    """v0.4+ SkyRL step dicts give canonical points in step order with 4-decimal strings read."""
    text = "".join(skyrl_step(s, 0.5 + s / 100) for s in (1, 2, 3))
    summary = parse_log(text)
    assert [p.step for p in summary.points] == [1, 2, 3]
    last = summary.points[-1].values
    assert last["entropy"] == pytest.approx(0.53)
    assert last["grad_norm"] == pytest.approx(0.23)
    assert last["clip_ratio"] == pytest.approx(0.0021)
    assert last["reward"] == pytest.approx(0.4062)
    assert last["pass_at_n"] == pytest.approx(0.625)
    assert last["policy_loss"] == pytest.approx(-0.0134)
    assert last["avg_num_tokens"] == pytest.approx(812.3125)
    assert "timing/step" not in last
    assert "skyrl" in summary.formats


def test_skyrl_old_keys_prefer_raw_grad_norm() -> None:
    """v0.1-0.3 prints both raw and clipped grad norm: the raw one is the canonical grad_norm."""
    summary = parse_log(skyrl_step(7, 0.5, old_keys=True, colour=False))
    values = summary.points[0].values
    assert values["grad_norm"] == pytest.approx(0.37)
    assert values["clip_ratio"] == pytest.approx(0.0021)


def test_skyrl_wall_time_and_timestamp_from_loguru_header() -> None:
    """The loguru timestamp on the Step header dates the point and the tail."""
    summary = parse_log(skyrl_step(4, 0.5))
    assert summary.points[0].wall_time is not None
    assert summary.last_timestamp is not None
    assert summary.last_timestamp.year == 2026


def test_tail_starting_mid_dict_drops_the_cut_dict() -> None:
    """A dict cut at the top of the tail is dropped; the next full step is read."""
    full = skyrl_step(11, 0.5) + skyrl_step(12, 0.6)
    lines = full.splitlines(keepends=True)
    cut = "".join(lines[4:])  # starts inside step 11's dict
    summary = parse_log(cut)
    assert [p.step for p in summary.points] == [12]
    assert summary.points[0].values["entropy"] == pytest.approx(0.6)


def test_reward_line_merges_into_following_step_dict() -> None:
    """The reward line precedes its step dict; the dict's own values win where both exist."""
    text = reward_line(0.75, 0.5) + skyrl_step(3, 0.5)
    values = parse_log(text).points[0].values
    assert values["reward"] == pytest.approx(0.4062)
    assert values["pass_at_n"] == pytest.approx(0.625)


def test_reward_line_alone_uses_the_skyrl_bar() -> None:
    """With the wandb logger only the reward line and the bar reach stdout."""
    text = (
        reward_line(0.75, 0.5)
        + "Training Batches Processed:  12%|█▏        | 12/100 [31:02<3:47:35, 155.18s/it]\n"
        + reward_line(0.5, 0.25)
    )
    summary = parse_log(text)
    assert [p.step for p in summary.points] == [12, 13]
    assert summary.points[0].values == {"pass_at_n": 0.75, "reward": 0.5}
    assert summary.total_steps == 100


def test_repeated_step_keeps_last_values() -> None:
    """A resumed run repeats a step: the later values replace the earlier ones, and the old
    run's steps after it are no longer the run's (``test_restart_segment``)."""
    text = skyrl_step(5, 0.4) + skyrl_step(6, 0.4) + skyrl_step(5, 0.9)
    summary = parse_log(text)
    assert [p.step for p in summary.points] == [5]
    assert summary.points[0].values["entropy"] == pytest.approx(0.9)
    text += skyrl_step(6, 0.7)
    summary = parse_log(text)
    assert [p.step for p in summary.points] == [5, 6]
    assert summary.points[1].values["entropy"] == pytest.approx(0.7)


def test_skyrl_finish_and_checkpoints() -> None:
    """`Training done!` finishes the run; save lines give checkpoint steps."""
    text = dedent(
        """\
        (skyrl_entrypoint pid=1) Successfully saved checkpoint for global_step_10 to: /ck/s10
        (skyrl_entrypoint pid=1) Successfully saved checkpoint for global_step_20 to: /ck/s20
        (skyrl_entrypoint pid=1) Resuming from global_step: 30
        (skyrl_entrypoint pid=1) 2026-02-12 14:31:07.412 | INFO     | x:y:1 - Training done!
        """
    )
    summary = parse_log(text)
    assert summary.checkpoint_steps == (10, 20)
    assert summary.finished


VERL_OLD = (
    "(main_task pid=144783) step:1 - global_seqlen/min:329312.000 - actor/kl_loss:0.001 - "
    "actor/pg_loss:-0.052 - actor/pg_clipfrac:0.000 - actor/ppo_kl:0.000 - "
    "actor/grad_norm:0.675 - actor/entropy:1.250 - critic/score/mean:0.312 - "
    "response_length/mean:512.000 - timing_s/step:60.000"
)
VERL_NEW = (
    "(TaskRunner pid=247607) step:2 - global_seqlen/min:159906 - "
    "actor/entropy:0.09767807275056839 - actor/pg_loss:np.float64(-0.0036091046008680547) - "
    "actor/pg_clipfrac:0.0012726205209868827 - actor/pg_clipfrac_lower:0.0 - "
    "actor/grad_norm:nan - actor/lr:1e-06 - critic/score/mean:np.float64(0.5) - "
    "response_length/mean:inf - training/global_step:2"
)


def test_verl_three_decimal_and_full_repr_lines() -> None:
    """verl lines before and after v0.5 (3-decimal and repr values, np.float64, nan/inf) parse."""
    summary = parse_log(VERL_OLD + "\n" + VERL_NEW + "\n")
    first, second = summary.points
    assert (first.step, second.step) == (1, 2)
    assert first.values == {
        "policy_loss": -0.052,
        "clip_ratio": 0.0,
        "grad_norm": 0.675,
        "entropy": 1.25,
        "reward": 0.312,
        "avg_num_tokens": 512.0,
        "sec_per_step": 60.0,  # timing_s/step (issue 11: standard-RL substitute check)
    }
    assert second.values["policy_loss"] == pytest.approx(-0.0036091046008680547)
    assert math.isnan(second.values["grad_norm"])
    assert math.isinf(second.values["avg_num_tokens"])
    assert second.values["reward"] == 0.5
    assert second.values["learning_rate"] == 1e-06
    assert summary.formats == ("verl",)


def test_verl_validation_only_step_is_not_a_point_and_final_validation_finishes() -> None:
    """`step:0` with only val-* keys adds no point; `Final validation metrics` means done."""
    text = (
        "(TaskRunner pid=1) step:0 - val-core/openai/gsm8k/acc/mean@1:0.508\n"
        "(TaskRunner pid=1) Total training steps: 140\n"
        "(TaskRunner pid=1) Training Progress:   1%|          | 1/140 [00:49<1:53:43, 49.09s/it]\n"
        "(TaskRunner pid=1) ('Final validation metrics: {...}')\n"
    )
    summary = parse_log(text)
    assert summary.points == ()
    assert summary.total_steps == 140
    assert summary.progress is not None and summary.progress.current == 1
    assert summary.finished


def test_skyrl_rebuilt_fixture_v04() -> None:
    """The rebuilt SkyRL v0.4 console log: 30 steps, SkyRL only, saves every 10, done."""
    path = Path(__file__).resolve().parents[2] / "fixtures" / "skyrl-rebuilt" / "console_v04.log"
    summary = parse_log(path.read_bytes())
    assert [p.step for p in summary.points] == list(range(1, 31))
    assert summary.formats == ("skyrl",)
    assert summary.total_steps == 100
    assert summary.checkpoint_steps == (10, 20, 30)
    assert summary.finished
    assert {"reward", "pass_at_n", "entropy", "grad_norm", "policy_loss"} <= set(
        summary.points[-1].values
    )


def test_nested_config_dump_is_not_a_metric_dict() -> None:
    """verl pprints its config as a nested dict with `clip_ratio`/`lr` keys: never a point."""
    text = (
        "(TaskRunner pid=1) {'actor_rollout_ref': {'actor': {'clip_ratio': 0.2,\n"
        "(TaskRunner pid=1)                                  'entropy_coeff': 0,\n"
        "(TaskRunner pid=1)                                  'optim': {'lr': 1e-06}}}}\n"
        "(TaskRunner pid=1) {'loss': 1.5, 'learning_rate': {'base': 0.1}}\n"
    )
    assert parse_log(text).points == ()


def test_user_aliases_win_over_builtins() -> None:
    """A `[metrics.aliases]` entry maps an unknown name and overrides a built-in one."""
    text = "step:3 - train/my_entropy:0.7 - actor/entropy:0.1 - custom/kl:0.2\n"
    values = parse_log(text, aliases={"train/my_entropy": "entropy"}).points[0].values
    assert values == {"entropy": 0.7}


def test_verl_before_0_4_1_names_its_entropy_entropy_loss() -> None:
    """verl 0.2-0.4.0 print the actor's mean entropy as ``actor/entropy_loss`` (its
    ``dp_actor``: ``entropy_loss = masked_mean(entropy)``); 0.4.1 renamed it ``actor/entropy``.
    It was not read: the collapse rule had no entropy for those runs."""
    text = ("(TaskRunner pid=144783) step:20 - actor/kl_loss:0.001 - actor/entropy_loss:0.200 "
            "- actor/pg_loss:-0.010 - actor/grad_norm:3.500 - critic/score/mean:0.500\n")
    values = parse_log(text).points[0].values
    assert values["entropy"] == 0.2 and values["grad_norm"] == 3.5
    both = "step:2 - actor/entropy:0.7 - actor/entropy_loss:0.1\n"
    assert parse_log(both).points[0].values["entropy"] == 0.7  # the current name wins


def test_ray_repeated_suffix_and_ip_prefix() -> None:
    """`, ip=` prefixes and Ray's `[repeated Nx across cluster]` suffix are stripped."""
    text = (
        "(TaskRunner pid=9, ip=10.0.0.7) step:4 - actor/entropy:0.2 [repeated 2x across cluster]\n"
    )
    assert parse_log(text).points[0].values == {"entropy": 0.2}


def test_rollouts_per_step_from_config_lines() -> None:
    """`n_samples_per_prompt` x `train_batch_size` printed in a config dump gives rollouts/step."""
    text = "  train_batch_size: 64\n  n_samples_per_prompt: 8\n"
    assert parse_log(text).rollouts_per_step == 512


def test_harbor_progress_row() -> None:
    """Harbor's `12/100 Mean: 0.417` row gives done/total/mean."""
    summary = parse_log("⠋ 12/100 Mean: 0.417 ━━━━━━━━━━╸━━━━━━━━━━ 0:05:12 0:32:10\n")
    assert (summary.harbor_done, summary.harbor_total, summary.harbor_mean) == (12, 100, 0.417)
    assert "harbor" in summary.formats


@pytest.mark.parametrize(
    ("raw", "canonical"),
    [
        ("reward/avg_raw_reward", "reward"),
        ("reward/avg_pass_at_8", "pass_at_n"),
        ("reward/avg_pass_at_16", "pass_at_n"),
        ("eval/all/pass_at_8", None),  # near miss: an eval metric, not the training pass@N
        ("policy/policy_loss", "policy_loss"),
        ("actor/pg_loss", "policy_loss"),
        ("policy/policy_entropy", "entropy"),
        ("actor/entropy", "entropy"),
        # verl <= 0.4.0: agg_loss(entropys), the mean entropy itself (the bonus is
        # entropy_coeff times it); it is no loss to minimise despite its name
        ("actor/entropy_loss", "entropy"),
        ("policy/raw_grad_norm", "grad_norm"),
        ("actor/grad_norm", "grad_norm"),
        ("critic/grad_norm", None),
        ("policy/ppo_clip_ratio", "clip_ratio"),
        ("policy/loss_metrics/clip_ratio", "clip_ratio"),
        ("actor/pg_clipfrac", "clip_ratio"),
        ("actor/pg_clipfrac_lower", None),
        ("clip_ratio/region_mean", "clip_ratio"),
        ("critic/score/mean", "reward"),
        ("critic/score/max", None),
        ("response_length/mean", "avg_num_tokens"),
        ("generate/avg_num_tokens", "avg_num_tokens"),
        ("tis/imp_ratio_mean", "imp_ratio_mean"),
        ("policy/tis/imp_ratio_capped_fraction", "imp_ratio_capped_fraction"),
        ("policy/tis/log_ratio_abs_mean", "log_ratio_abs_mean"),
        ("log_ratio_abs_p99", "log_ratio_abs_p99"),
        ("tis/log_ratio_abs_max", "log_ratio_abs_max"),
        ("tis/log_ratio_abs_maximum", None),
        ("tis/n_tokens_dp_gt_50pct", "n_tokens_dp_gt_50pct"),
        ("tis/n_tokens_dp_gt_10pct", None),
        ("policy/rollout_train_prob_diff_mean", "rollout_train_prob_diff_mean"),
        ("loss", "loss"),
        ("learning_rate", "learning_rate"),
        ("epoch", "epoch"),
        ("eval_loss", None),
        ("timing/step", "sec_per_step"),  # issue 11: timing/* is a standard-RL check
    ],
)
def test_canonical_name_table(raw: str, canonical: str | None) -> None:
    """Built-in aliases map trainer names to canonical ones; everything else is dropped."""
    assert canonical_name(raw, {}) == canonical


def test_canonical_values_rank_and_user_override() -> None:
    """Raw grad norm beats the clipped one; a user alias beats both."""
    raw = {"policy/grad_norm": 0.1, "policy/raw_grad_norm": 2.0, "my/gn": 9.0}
    assert canonical_values(raw, {}) == {"grad_norm": 2.0}
    assert canonical_values(raw, {"my/gn": "grad_norm"}) == {"grad_norm": 9.0}



@pytest.mark.parametrize("kind", ["v04", "v03_collapse"])
def test_skyrl_wandb_logger_reads_the_status_dict(kind: str) -> None:
    """With ``trainer.logger=wandb`` the step's loss, entropy and grad norm are only in the
    loguru ``logger.info(status)`` line: read at the bar's redraw with the reward line, each
    step's values equal the console tracker's (which rounds them to 4 decimals)."""
    where = Path(__file__).resolve().parents[2] / "fixtures" / "skyrl-rebuilt"
    console = parse_log((where / f"console_{kind}.log").read_bytes())
    wandb_text = (where / f"wandb_{kind}.log").read_text()
    assert "Step 5: " not in wandb_text and "policy_entropy" in wandb_text
    wandb = parse_log(wandb_text)
    assert [p.step for p in wandb.points] == [p.step for p in console.points]
    assert wandb.formats == ("skyrl",)
    for ours, theirs in zip(wandb.points, console.points, strict=True):
        for key in ("entropy", "grad_norm", "policy_loss", "reward"):
            assert ours.values[key] == pytest.approx(theirs.values[key], abs=6e-5), (ours, key)


# --- OpenRLHF: ``✨ Global step N: {status}`` ---------------------------------------------------

OPENRLHF = Path(__file__).resolve().parents[2] / "fixtures" / "openrlhf-rebuilt"


def test_openrlhf_global_step_lines() -> None:
    """OpenRLHF >= 0.8.5 logs each step's status as ``✨ Global step N: {...}`` (its async
    trainer without the sparkle), through its ``INFO MM-DD HH:MM:SS file.py:N]`` logger and
    the PPOTrainer actor's Ray prefix. Nothing of it was read (a healthy run sat in "Filling
    buffer"): each line is its step, the status mapped onto the collapse rule's names, the
    stamps give the rate; the eval line (``global_step 20, eval_metrics: {...}``) is no step."""
    text = (OPENRLHF / "ppo_global_steps.log").read_bytes()
    summary = parse_log(text, mtime=datetime(2026, 11, 30, 12, tzinfo=UTC))
    assert [p.step for p in summary.points] == list(range(9, 41))
    last = summary.points[-1].values
    assert set(last) == {"policy_loss", "learning_rate", "grad_norm", "entropy", "clip_ratio",
                         "reward", "avg_num_tokens"}
    assert last["learning_rate"] == 1e-06 and 0.15 <= last["grad_norm"] <= 0.35
    assert summary.points[-1].wall_time == datetime(2026, 11, 30, 11, 12, 3, tzinfo=UTC)
    assert summary.sec_per_step == pytest.approx(105.8, abs=2)
    assert "openrlhf" in summary.formats
    async_line = ("(PPOTrainerAsync pid=9) INFO 11-30 10:00:00 ppo_trainer_async.py:244] Global "
                  "step 7: {'policy_loss': 0.01, 'reward': 0.5, 'dynamic_filtering_pass_rate': "
                  "None, 'actor_grad_norm': nan}\n")
    point = parse_log(async_line).points[0]
    assert (point.step, point.values["reward"]) == (7, 0.5)
    assert math.isnan(point.values["grad_norm"])


@pytest.mark.parametrize("line", [
    "✨ Evaluation completed in 0:01:02, global_step 20, eval_metrics: {'eval_gsm8k_pass1': 0.6}",
    "Global step 5: {'a': {'policy_loss': 0.1}}",  # nested: no flat status dict
    "Global step 5: reward 0.5",
])
def test_openrlhf_near_misses(line: str) -> None:
    """Near-misses: an eval line, a nested dict, no dict: no step."""
    assert parse_log(line + "\n").points == ()


NEMO = Path(__file__).resolve().parents[2] / "fixtures" / "nemo-rl-rebuilt"
PRIME = Path(__file__).resolve().parents[2] / "fixtures" / "prime-rl-rebuilt"


def test_nemo_rl_step_banners_and_result_bullets() -> None:
    """NeMo-RL prints each step as ``===== Step N/M =====`` and, after training, ``📊 Training
    Results:`` bullets (``  • Loss: x``, ``  • Avg Reward: y``, ``  • Mean Generation Length:
    z``) and the ``⏱️  Timing:`` bullets; nothing else of a step reaches the console (its
    metrics dict goes to wandb/tensorboard). Nothing of it was read: a healthy run sat in
    "Filling buffer" with no step. M is the run's total steps; the validation bullets of a
    step (``    • Accuracy:``) are no training metric."""
    summary = parse_log((NEMO / "grpo_console.log").read_bytes())
    assert [p.step for p in summary.points] == list(range(1, 31))
    assert summary.total_steps == 100
    last = summary.points[-1].values
    assert set(last) == {"loss", "reward", "avg_num_tokens", "sec_per_step"}
    assert last["reward"] == pytest.approx(0.3965) and last["loss"] == pytest.approx(-0.0055)
    assert summary.checkpoint_steps == (10, 20, 30)  # "Saving checkpoint for step N..."
    assert "nemo-rl" in summary.formats


def test_nemo_rl_bullets_need_their_step_banner() -> None:
    """A bullet outside a step (setup's, or before the tail's first banner) is no step; an
    epoch banner is no step either."""
    text = ("  • Loss: 0.5000\n" + "=" * 25 + " Epoch 1/2 " + "=" * 25 + "\n"
            "  • Avg Reward: 0.2500\n")
    assert parse_log(text).points == ()


def test_prime_rl_step_lines_of_trainer_and_orchestrator() -> None:
    """prime-rl's job log holds its trainer's ``Step N | 1m 2s | Loss x | Entropy y | Mismatch
    KL | Grad. Norm z | LR ...`` and its orchestrator's ``Step N | ... | Reward r | ...`` (one
    step ahead), both through loguru with forced colours. Nothing of it was read. Each step's
    two lines make one point: the trainer's loss, entropy and pre-clipping grad norm with the
    orchestrator's reward; ``Trainable 250/256 (97.7%)`` is no metric."""
    summary = parse_log((PRIME / "rl_job.log").read_bytes())
    assert [p.step for p in summary.points] == list(range(1, 31))
    last = summary.points[-1].values
    assert set(last) >= {"reward", "loss", "entropy", "grad_norm", "learning_rate"}
    assert last["learning_rate"] == 1e-06 and last["grad_norm"] == pytest.approx(0.1285)
    assert last["reward"] == pytest.approx(0.4216) and last["entropy"] == pytest.approx(0.5555)
    assert all({"reward", "entropy", "grad_norm"} <= set(p.values) for p in summary.points)
    assert summary.checkpoint_steps == (10, 20)  # "Saving checkpoint at step N"
    assert "prime-rl" in summary.formats


@pytest.mark.parametrize(("line", "step", "values"), [
    ("10:00:00 SUCCESS Step 7 |   850ms | Loss 0.1000 | Grad. Norm nan | LR 3.00e-05",
     7, {"loss": 0.1, "sec_per_step": 0.85, "learning_rate": 3e-05}),
    ("Step 12 |  2h 3m | Reward 0.5000 | Error 1.0%", 12, {"reward": 0.5, "sec_per_step": 7380.0}),
])
def test_prime_rl_step_line_forms(line: str, step: int, values: dict[str, float]) -> None:
    point = parse_log(line + "\n").points[0]
    assert point.step == step
    assert {k: v for k, v in point.values.items() if k != "grad_norm"} == values


@pytest.mark.parametrize("line", [
    "Step 5 | reward is fine",  # no Label value part
    "Micro Step 3/8 | Loss 0.1",  # a micro step, not a step (logged at DEBUG)
    "Step 5: | Loss 0.1",
])
def test_prime_rl_near_misses(line: str) -> None:
    assert parse_log(line + "\n").points == ()
