"""Issue 11's RL rules, rule by rule: dead rollouts, shaping precision, log-ratio health,
config-declared ablations, pass@N / z-clip in the trend, banking cadence and timing/* (the
deep-probe fingerprint is in ``test_rl_fingerprint.py``).

Logs in each trainer's format: verl (real formatter and real config dumps), SkyRL (rebuilt from
source), TRL (real library); see tests/fixtures/generators/README.md.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from probes.logs.parse import parse_log
from probes.models import CheckpointListing, JobFacts, JobState, RunFingerprint
from report.settings import ReportSettings
from tests.report.factories import (
    facts,
    healthy_rl,
    judge,
    log,
    points,
    record,
    with_last,
)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
COLLAPSING = healthy_rl(grad_norm=with_last([0.2] * 12, 3.2), entropy=with_last([0.5] * 12, 0.19))


def _rl(series: dict[str, Any] | None = None, name: str = "rl-run", **kw: Any) -> JobFacts:
    rec_kw = kw.pop("rec", {})
    state = rec_kw.pop("state", JobState.RUNNING)
    return facts(record(name, state=state, **rec_kw), points(series or healthy_rl()), **kw)


def _with_summary(job: JobFacts, **update: Any) -> JobFacts:
    assert job.summary is not None
    return job.model_copy(update={"summary": job.summary.model_copy(update=update)})


def _from_log(text: str | bytes, name: str = "rl-run", job_id: str = "100",
              state: JobState = JobState.RUNNING, **rec: Any) -> JobFacts:
    """A job whose summary is the real parser's reading of ``text`` (fresh log, read fine)."""
    summary = parse_log(text)
    summary = summary.model_copy(update={"last_timestamp": None})
    return JobFacts(record=record(name, job_id=job_id, state=state, **rec),
                    log=log(path=f"/w/{job_id}.out"), summary=summary)


def test_skyrl_collapse_is_seen_with_the_wandb_logger() -> None:
    """SkyRL's default ``trainer.logger=wandb`` prints no per-step dict: the collapse is read
    from the status line alone, as with the console logger."""
    where = FIXTURES / "skyrl-rebuilt"
    console = judge(_from_log((where / "console_v03_collapse.log").read_bytes())).report
    wandb = judge(_from_log((where / "wandb_v03_collapse.log").read_bytes())).report
    assert "collapse" in console.flags
    assert wandb.verdict == console.verdict and wandb.flags == console.flags
    assert wandb.trend == console.trend


# --- dead rollouts -----------------------------------------------------------------------------

@pytest.mark.parametrize(
    ("extra", "dead", "why"),
    [
        ({"reward": [0.0] * 12}, True, "reward flat at 0"),
        ({"avg_num_tokens": [1.0] * 12}, True, "responses ~1.00 token"),
        ({"entropy": [0.0] * 12}, True, "entropy ~0"),
        ({"entropy": [2e-4] * 12}, True, "entropy ~0"),
        ({"grad_norm": [0.0] * 12}, True, "grad norm exactly 0"),
        # dead for the window's newest 5+ steps: dead now, whatever came before in the window
        ({"entropy": [0.5] * 5 + [0.0] * 7}, True, "entropy ~0 for 7 steps"),
        ({"grad_norm": [0.4] * 7 + [0.0] * 5}, True, "grad norm exactly 0 for 5 steps"),
        # near-misses
        ({"reward": with_last([0.0] * 12, 0.1)}, False, ""),  # one reward in the window
        ({"reward": [0.0] * 4}, False, ""),  # window too short to judge
        ({"avg_num_tokens": [2.0] * 12}, False, ""),
        ({"entropy": [5e-3] * 12}, False, ""),
        ({"grad_norm": [1e-5] * 12}, False, ""),  # seqnorm global-denom regime, not dead
        ({"grad_norm": with_last([0.0] * 12, 1e-7)}, False, ""),
        ({"entropy": [0.5] * 8 + [0.0] * 4}, False, ""),  # only 4 dead steps yet
    ],
)
def test_dead_rollouts(extra: dict[str, list[float | None]], dead: bool, why: str) -> None:
    """Degenerate rollouts over the window: flag, warning, deep_probe; near-misses stay healthy."""
    job = judge(_rl(healthy_rl(**extra))).report
    assert ("dead-rollouts" in job.flags) is dead
    if dead:
        assert job.verdict == "warning" and job.trend.startswith("DEAD ROLLOUTS: " + why)
        assert job.recommendation is not None and job.recommendation.action == "deep_probe"
        assert "rl-job-health-deep-dive" in job.recommendation.why
    else:
        assert job.verdict == "healthy"


@pytest.mark.parametrize(
    ("rewards", "dead"),
    [
        ([0.0] * 6, False),  # a hard task's first steps: no reward yet, rollouts alive
        ([0.0] * 9, False),
        ([0.0] * 10, True),  # a whole window never rewarded: no learning signal
        ([0.3, 0.3, 0.2] + [0.0] * 5, True),  # rewarded, then flat at 0: died
    ],
)
def test_a_healthy_run_that_starts_at_reward_0_is_not_dead(rewards: list[float],
                                                            dead: bool) -> None:
    """A run whose reward has been 0 since its first step, with real responses, entropy and
    gradients, merely starts at reward 0: dead-rollouts needs a whole window of it (a
    reward that was there and fell to 0 is read after min_window, as before)."""
    job = judge(_rl(healthy_rl(len(rewards), reward=rewards))).report
    assert ("dead-rollouts" in job.flags) is dead
    if dead:
        assert job.trend.startswith("DEAD ROLLOUTS: reward flat at 0")
    else:
        assert job.verdict == "healthy" and "DEAD" not in job.trend
    # the other signs of a dead run are read from the first min_window steps, as before
    gone = judge(_rl(healthy_rl(len(rewards), reward=rewards,
                                entropy=[0.0] * len(rewards)))).report
    assert "dead-rollouts" in gone.flags and "entropy ~0" in gone.trend


@pytest.mark.parametrize(
    ("steps", "dead"),
    [
        (range(301, 309), True),  # a tail read mid-run: its first step is not the run's
        (range(201, 209), True),  # a run resumed at 200 (its earlier steps were rewarded)
        (range(10, 90, 10), False),  # TRL logging every 10 steps from its first: a start
        (range(0, 8), False),  # a trainer that logs step 0
    ],
)
def test_reward_0_since_the_first_step_means_the_runs_first_step(steps: range,
                                                                 dead: bool) -> None:
    """"Reward 0 since the run's first logged step" (review of 8c3d531) holds only where the
    history begins at the run's first logging step: 8 zeros read from a tail that starts at
    step 301, or from a run resumed at step 200, are a reward that fell flat (read after
    min_window), not a hard task's first steps."""
    series = healthy_rl(len(steps), reward=[0.0] * len(steps))
    pts = tuple(p.model_copy(update={"step": s}) for p, s in zip(points(series), steps,
                                                                   strict=True))
    job = judge(facts(record("rl-run"), pts)).report
    assert ("dead-rollouts" in job.flags) is dead
    if dead:
        assert job.trend.startswith("DEAD ROLLOUTS: reward flat at 0 for 8 steps")
    else:
        assert job.verdict == "healthy"


def test_dead_rollouts_on_a_completed_run_is_a_warning_to_probe() -> None:
    """A COMPLETED run keeps the flag and, as CONTRACT §6 says, verdict warning and
    deep_probe: not its cleanup, which would ship a model that had stopped learning (see
    tests/probes/slurm/test_e2e_dead_rollouts_completed.py)."""
    job = judge(_rl(healthy_rl(reward=[0.0] * 12), rec={"state": JobState.COMPLETED})).report
    assert "dead-rollouts" in job.flags and job.verdict == "warning"
    assert job.recommendation is not None and job.recommendation.action == "deep_probe"


def test_collapse_outranks_dead_rollouts() -> None:
    """A collapsing run whose reward is flat at 0 is still cancelled, not probed."""
    job = judge(_rl({**COLLAPSING, "reward": [0.0] * 12})).report
    assert {"collapse", "dead-rollouts"} <= set(job.flags) and job.verdict == "collapse"
    assert job.recommendation is not None and job.recommendation.action == "cancel_and_salvage"


def _verl_zeroed(version: str) -> str:
    """verl's real console lines with the score and response length forced to degenerate."""
    text = (FIXTURES / f"verl-{version}/console.log").read_text()
    text = re.sub(r"critic/score/mean:[^ ]+", "critic/score/mean:np.float64(0.0)", text)
    return re.sub(r"response_length/mean:[^ ]+", "response_length/mean:np.float64(1.0)", text)


def _skyrl_zeroed() -> str:
    text = (FIXTURES / "skyrl-rebuilt/console_v03.log").read_text()
    text = re.sub(r"reward/avg_raw_reward: [0-9.e-]+", "reward/avg_raw_reward: 0.0", text)
    return re.sub(r"'reward/avg_raw_reward': '[^']+'", "'reward/avg_raw_reward': '0.0000'", text)


def _trl_zeroed() -> str:
    text = (FIXTURES / "trl-1.16.0/grpo_healthy.out").read_text()
    return re.sub(r"'(reward|rewards/reward_vowels/mean)': '[^']+'", r"'\1': '0'", text)


@pytest.mark.parametrize(
    ("trainer", "text", "why"),
    [
        ("verl 0.9.1 (real formatter)", lambda: _verl_zeroed("0.9.1"), "reward flat at 0"),
        ("verl 0.4.1 (real formatter)", lambda: _verl_zeroed("0.4.1"), "reward flat at 0"),
        ("SkyRL (rebuilt)", _skyrl_zeroed, "reward flat at 0"),
        ("TRL 1.16.0 (real library)", _trl_zeroed, "reward flat at 0"),
    ],
)
def test_dead_rollouts_in_each_trainer_format(trainer: str, text: Any, why: str) -> None:
    """The rule reads the real trainers' printed metrics through the parser's aliases."""
    job = judge(_from_log(text())).report
    assert "dead-rollouts" in job.flags, trainer
    assert why in job.trend or (job.recommendation is not None and why in job.recommendation.why)


def test_a_real_grpo_run_dead_for_its_last_steps_is_not_healthy() -> None:
    """TRL 1.16.0's real GRPO run whose last 8 steps have entropy 0 and grad norm exactly 0
    (one live step at 0.048 / 1.19 before them, inside the 10-step window): it read
    ``healthy`` with one entropy signal watched; it is a dead run to deep-probe."""
    job = judge(_from_log((FIXTURES / "trl-1.16.0/grpo_collapse.out").read_bytes())).report
    assert "dead-rollouts" in job.flags and job.verdict != "healthy"
    assert job.trend.startswith("DEAD ROLLOUTS: entropy ~0 for 8 steps")
    assert job.recommendation is not None and job.recommendation.action == "deep_probe"
    assert "grad norm exactly 0 for 8 steps" in job.recommendation.why


@pytest.mark.parametrize(
    "fixture", ["verl-0.9.1/console.log", "verl-0.4.1/console.log",
                "skyrl-rebuilt/console_v03.log", "trl-1.16.0/grpo_healthy.out"],
)
def test_healthy_real_logs_are_not_dead(fixture: str) -> None:
    """Near-miss: the healthy fixtures of every trainer never read as dead rollouts."""
    assert "dead-rollouts" not in judge(_from_log((FIXTURES / fixture).read_bytes())).report.flags


# --- shaping, decided on the most precise reward -----------------------------------------------

@pytest.mark.parametrize(
    ("reward", "rollouts", "flag", "suffix", "note"),
    [
        (0.25, 5120, False, " (base)", False),  # 1280/5120
        (0.26643798508224387, 5120, True, " (shaped)", False),  # full precision: fractional
        (0.2664, 5120, False, "", True),  # 4 decimals × 5120: ±0.256, could be whole
        (0.531, 8, True, " (shaped)", False),  # 3 decimals × 8 = 4.248 ± 0.004: fractional
        (0.768, 256, True, " (shaped)", False),
    ],
)
def test_shaping_on_printed_precision(
    reward: float, rollouts: int, flag: bool, suffix: str, note: bool
) -> None:
    """Integrality is judged on the value as printed; an undecidable case says so."""
    job = _with_summary(_rl(healthy_rl(reward=[reward] * 12)),
                        fingerprint=RunFingerprint(rollouts_per_step=rollouts))
    detail = judge(job)
    assert ("shaping-active" in detail.report.flags) is flag
    assert detail.display_name == "rl-run" + suffix
    assert ("shaping undecidable" in detail.note) is note


def test_rollouts_from_the_config_dump_beat_the_parser_lines() -> None:
    """prompts × samples from the printed config is the rollouts_per_step used."""
    job = _with_summary(_rl(healthy_rl(reward=[0.25] * 12)), rollouts_per_step=7,
                        fingerprint=RunFingerprint(rollouts_per_step=256))
    assert judge(job).display_name == "rl-run (base)"


def test_skyrl_full_precision_line_decides_where_the_display_value_cannot() -> None:
    """SkyRL (rebuilt): the reward line's full value decides; the 4-decimal dict alone cannot."""
    text = (FIXTURES / "skyrl-rebuilt/console_v03.log").read_text()
    job = _with_summary(_from_log(text), fingerprint=RunFingerprint(rollouts_per_step=5120))
    assert judge(job).display_name == "rl-run (shaped)"
    display_only = "\n".join(ln for ln in text.splitlines() if "avg_raw_reward: " not in ln)
    job = _with_summary(_from_log(display_only),
                        fingerprint=RunFingerprint(rollouts_per_step=5120))
    detail = judge(job)
    assert detail.display_name == "rl-run" and "shaping undecidable" in detail.note


def test_verl_config_dump_gives_rollouts_per_step() -> None:
    """verl (real config dump + real formatter): 32 prompts × 8 samples; full-precision scores."""
    detail = judge(_from_log((FIXTURES / "verl-0.9.1/config_a.log").read_bytes()))
    assert detail.display_name == "rl-run (shaped)" and "shaping-active" in detail.report.flags
    assert "ablation-exempt" not in detail.report.flags  # verl's default clip settings


# --- log-ratio health ---------------------------------------------------------------------------

@pytest.mark.parametrize(
    ("extra", "warned", "text"),
    [
        ({"log_ratio_abs_mean": [0.03] * 12}, True, "mean 0.03 >0.02"),
        ({"log_ratio_abs_max": [0.6] * 12}, True, "max 0.6 ≥0.5"),
        ({"n_tokens_dp_gt_50pct": [3.0] * 12}, True, "gt_50pct 3.00"),
        ({"log_ratio_pos_0": [0.005] * 12, "log_ratio_pos_1": [0.03] * 12}, True,
         "position buckets uneven"),
        # healthy ranges and near-misses
        ({"log_ratio_abs_mean": [0.02] * 12, "log_ratio_abs_max": [0.49] * 12,
          "n_tokens_dp_gt_50pct": [0.0] * 12}, False, ""),
        ({"log_ratio_abs_mean": [1e-5] * 12, "log_ratio_abs_max": [1e-4] * 12}, False, ""),
        ({"log_ratio_pos_0": [0.010] * 12, "log_ratio_pos_1": [0.012] * 12}, False, ""),
    ],
)
def test_log_ratio_health(extra: dict[str, list[float | None]], warned: bool, text: str) -> None:
    """Outside mean ~0.005–0.02, max < 0.5, gt_50pct ≈ 0 or even buckets: a warning."""
    job = judge(_rl(healthy_rl(**extra))).report
    assert (job.verdict == "warning") is warned
    if warned:
        assert text in job.trend and job.flags == []


# --- ablations from the config, z-clip and pass@N -----------------------------------------------

@pytest.mark.parametrize(
    ("config", "exempt"),
    [
        ({"actor.zclip.enabled": "true", "actor.zclip.z_thresh": "2.5"}, True),
        ({"actor_rollout_ref.actor.policy_loss.loss_mode": "clip-cov"}, True),
        ({"trainer.skip_spikes": "true"}, True),
        ({"actor.zclip.enabled": "false", "actor.zclip.z_thresh": "2.5"}, False),  # switched off
        ({"actor_rollout_ref.actor.policy_loss.loss_mode": "vanilla",
          "actor_rollout_ref.actor.policy_loss.clip_cov_lb": "1.0"}, False),  # verl defaults
        ({"actor_rollout_ref.actor.clip_ratio_c": "3.0"}, False),  # verl's default dual clip
        ({"trainer.skip_spikes": "false"}, False),
    ],
)
def test_ablation_recognised_from_the_config(config: dict[str, str], exempt: bool) -> None:
    """A config-declared spike mitigation is never auto-cancelled, whatever the run is called."""
    job = _with_summary(_rl(COLLAPSING), fingerprint=RunFingerprint(config=config))
    report = judge(job).report
    assert ("ablation-exempt" in report.flags) is exempt
    assert report.recommendation is not None
    assert report.recommendation.action == ("none" if exempt else "cancel_and_salvage")


def test_ablation_pattern_list_is_configurable() -> None:
    """A team's own pattern (here ``grad_guard``) marks the ablation from the config."""
    job = _with_summary(_rl(COLLAPSING),
                        fingerprint=RunFingerprint(config={"actor.grad_guard": "on"}))
    settings = ReportSettings(ablation_patterns=("grad_guard",))
    assert "ablation-exempt" in judge(job, settings=settings).report.flags
    assert "ablation-exempt" not in judge(job).report.flags


def test_pass_at_n_and_z_clip_triggers_in_the_trend() -> None:
    """pass@N (N from the config's samples per prompt) and z-clip triggers are shown."""
    series = healthy_rl(pass_at_n=[0.62] * 12, z_clip_triggered=[3.0] * 12)
    job = _with_summary(_rl(series), fingerprint=RunFingerprint(samples_per_prompt=8))
    report = judge(job).report
    assert "pass@8 0.62" in report.trend and "z-clip 3.00×" in report.trend
    assert report.metrics["z_clip_triggered"] == 3.0


def test_z_clip_triggered_is_parsed_from_skyrl_dicts() -> None:
    """``policy/z_clip/triggered`` in a SkyRL step dict becomes ``z_clip_triggered``."""
    text = (FIXTURES / "skyrl-rebuilt/console_v03.log").read_text()
    text = text.replace(" 'policy/policy_entropy':",
                        " 'policy/z_clip/triggered': 2,\n(skyrl_entrypoint pid=48213)  "
                        "'policy/policy_entropy':")
    summary = parse_log(text)
    assert summary.points[-1].values["z_clip_triggered"] == 2.0


# --- banked-step cadence ------------------------------------------------------------------------

@pytest.mark.parametrize(
    ("saved", "on_disk", "step", "warned", "text"),
    [
        ((10, 20, 30, 40), (10,), 45, True, "No durable checkpoint since step 10"),
        ((10, 20, 30), (), 35, True, "No durable checkpoint on disk"),
        ((10, 20, 30, 40), (10, 20, 30, 40), 45, False, ""),
        ((10, 20), (10,), 25, False, ""),  # lag 15 < 2 × cadence 10
        ((), (), 45, False, ""),  # no cadence known: nothing to judge
    ],
)
def test_banked_step_cadence(
    saved: tuple[int, ...], on_disk: tuple[int, ...], step: int, warned: bool, text: str
) -> None:
    """A live run whose durable checkpoints stopped landing at its save cadence is a warning."""
    job = facts(record(), points(healthy_rl(step), first_step=1),
                summary_kw={"checkpoint_steps": saved})
    job = job.model_copy(update={"checkpoints": CheckpointListing(steps=on_disk)})
    report = judge(job).report
    assert (report.verdict == "warning") is warned
    assert ("No durable checkpoint" in report.trend) is warned
    assert text in report.trend


# --- timing/* as the standard-RL rate -----------------------------------------------------------

def test_timing_step_is_the_rate_when_the_log_has_no_bar() -> None:
    """verl's ``timing_s/step`` (real formatter): the window mean is the run's sec_per_step."""
    text = "\n".join(ln for ln in (FIXTURES / "verl-0.9.1/console.log").read_text().splitlines()
                     if "Training Progress" not in ln)
    job = _from_log(text)
    assert job.summary is not None and job.summary.sec_per_step is None
    steps = [p.values["sec_per_step"] for p in job.summary.points][-10:]
    rate = judge(job).report.metrics["sec_per_step"]
    assert rate == pytest.approx(sum(steps) / len(steps))


def test_the_logs_trailing_rate_wins_over_timing() -> None:
    """With a training bar, the parser's trailing-window rate is the one shown."""
    job = _from_log((FIXTURES / "verl-0.9.1/console.log").read_bytes())
    assert job.summary is not None and job.summary.sec_per_step is not None
    assert judge(job).report.metrics["sec_per_step"] == job.summary.sec_per_step


# --- a grad norm printed 0 by a fixed-decimal printer --------------------------------------------

def _grad_zeroed(fixture: str, pattern: str, zero: str) -> str:
    text = (FIXTURES / fixture).read_text()
    if fixture.startswith("skyrl"):  # the dict only: no status line printing finer values
        text = "".join(line for line in text.splitlines(keepends=True)
                       if "'final_loss'" not in line)
    return re.sub(pattern, zero, text)


@pytest.mark.parametrize(
    ("trainer", "fixture", "pattern", "zero", "dead"),
    [
        # verl < 0.5 prints {v:.3f}: a seqnorm grad norm of 2e-5 is 0.000, so no proof of 0
        ("verl 0.4.1", "verl-0.4.1/console.log", r"actor/grad_norm:[0-9.]+",
         "actor/grad_norm:0.000", False),
        # SkyRL's step dict prints 4 decimals; without the status line nothing finer is read
        ("SkyRL dict only", "skyrl-rebuilt/console_v04.log",
         r"'policy/(raw_)?grad_norm': '[^']+'", r"'policy/\1grad_norm': '0.0000'", False),
        # prime-rl prints 'Grad. Norm' with 4 decimals
        ("prime-rl", "prime-rl-rebuilt/rl_job.log", r"Grad\. Norm [0-9.]+", "Grad. Norm 0.0000",
         False),
        # verl >= 0.5 prints full floats: its 0.0 is an exact zero, dead as before
        ("verl 0.9.1", "verl-0.9.1/console.log", r"actor/grad_norm:np\.float64\([^)]+\)",
         "actor/grad_norm:np.float64(0.0)", True),
    ],
)
def test_a_grad_norm_printed_0_is_dead_only_where_the_log_could_print_less(
        trainer: str, fixture: str, pattern: str, zero: str, dead: bool) -> None:
    """Rulebook: "Under seqnorm global-denom, grad/policy_loss/log_ratio are genuinely ~1e-5 or
    smaller — that is the regime, NOT vanishing gradient". A trainer printing 3 or 4 decimals
    prints that regime's grad norm as 0: the run read 'DEAD ROLLOUTS: grad norm exactly 0',
    verdict warning, with a deep probe recommended. Now the zero is a note on the job; a
    trainer printing full floats still proves a zero."""
    text = _grad_zeroed(fixture, pattern, zero)
    job = judge(_from_log(text)).report
    summary = parse_log(text)
    grads = [p.values.get("grad_norm") for p in summary.points[-10:]]
    assert grads and all(g == 0.0 for g in grads), (trainer, grads)  # the edit took
    assert ("dead-rollouts" in job.flags) is dead, (trainer, job.trend)
    if not dead:
        note = judge(_from_log(text)).note
        assert note is not None and "below the log's 4-decimal precision" in note, note


def test_a_fixed_decimal_log_with_a_finer_grad_norm_proves_its_zeros() -> None:
    """SkyRL whose status line printed the grad norm at full precision, then exactly 0: dead."""
    history = healthy_rl(grad_norm=[2.123456e-05] * 4 + [0.0] * 8)
    job = judge(_with_summary(_rl(history), formats=("skyrl",))).report
    assert "dead-rollouts" in job.flags and "grad norm exactly 0 for 8 steps" in job.trend
    coarse = healthy_rl(grad_norm=[0.0213] * 4 + [0.0] * 8)
    job = judge(_with_summary(_rl(coarse), formats=("skyrl",))).report
    assert "dead-rollouts" not in job.flags and job.verdict == "healthy"
