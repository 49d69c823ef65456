"""Judgement settings: bucket routing and every threshold of the rulebook.

Policy: the defaults are the seed's numbers (``monitor-job-tables.md``) and the contract's
§5 definitions, named so a reader sees where each comes from. Everything is configurable from
``jobtables.toml``; nothing else in ``report`` hard-codes a threshold.
"""

from __future__ import annotations

import re
from functools import lru_cache

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator


class _Strict(BaseModel):
    # Every threshold is a finite number (TOML has inf and nan; nan made every test False).
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)


class BucketRules(_Strict):
    """Regexes on the job name (case-insensitive); precedence in :mod:`report.buckets`:
    catch-all task keywords (``other``), then the name's leading token, then inner keywords."""

    rl: tuple[str, ...] = ("^rl[-_]", "grpo", "ppo", "dapo", "rloo")
    sft: tuple[str, ...] = ("^sft[-_]", "sft")
    datagen: tuple[str, ...] = ("^datagen[-_]", "datagen")
    eval: tuple[str, ...] = ("^eval[-_]", "eval")
    other: tuple[str, ...] = (
        "consolidat", r"pre-?tokeni[sz]", r"(?:^|[-_])upload", r"(?:^|[-_])push(?:$|[-_])",
        r"gpu[-_]?ci", r"(?:^|[-_])ci(?:$|[-_])", r"(?:image|docker)[-_]?build",
    )
    """Catch-all tasks of any domain (seed: consolidate, pretokenize, uploads, image builds,
    GPU-CI): ``datagen-consolidate-x`` and ``rl-upload-x`` are one-line catch-all rows."""
    side_tasks: tuple[str, ...] = (
        r"(?:^|[-_])smoke(?:$|[-_])", r"(?:^|[-_])probes?(?:$|[-_])",
        r"(?:^|[-_])measure(?:ments?)?(?:$|[-_])",
    )
    """Catch-all tasks of any domain but RL (seed: feature smoke tests, measurement and grid
    probes): ``smoke-sft-x`` and ``sft-grid-probe-mbs8`` are catch-all rows; an RL smoke test
    stays RL, where the deep-probe rule reads it."""

    @field_validator("rl", "sft", "datagen", "eval", "other", "side_tasks")
    @classmethod
    def _compiles(cls, patterns: tuple[str, ...]) -> tuple[str, ...]:
        for pattern in patterns:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"bad regex {pattern!r}: {exc}") from exc
        return patterns


class Thresholds(_Strict):
    """The seed's thresholds; see CONTRACT §5. Counts are at least 1 (an empty window has no
    mean), factors and bounds at least 0."""

    window: int = Field(10, ge=1)
    """Previous logged values forming a metric's window."""
    min_window: int = Field(5, ge=1)
    """A windowed test needs at least this many values before it can fire."""
    grad_norm_abs: float = Field(1.0, ge=0)
    grad_norm_window_factor: float = Field(2.0, ge=0)
    grad_norm_warning_steps: int = Field(2, ge=1)
    entropy_rel_change: float = Field(0.30, ge=0)
    log_ratio_window_factor: float = Field(2.0, ge=0)
    log_ratio_max_bound_factor: float = Field(10.0, ge=0)
    pass_rate_min: float = Field(0.10, ge=0, le=1)
    pass_rate_trials: int = Field(100, ge=1)
    collapse_min_signals: int = Field(2, ge=1)
    collapse_recent_steps: int = Field(5, ge=1)
    clip_ratio_max: float = Field(0.01, ge=0, le=1)
    imp_ratio_low: float = Field(0.84, ge=0)
    imp_ratio_high: float = Field(1.56, ge=0)
    imp_ratio_capped_max: float = Field(0.01, ge=0, le=1)
    sft_grad_explosion_factor: float = Field(10.0, ge=0)
    dead_engine_turns: float = Field(1.05, ge=0)
    """avg_turns at or below this is a dead-engine datagen run (seed: ≈ 1.0)."""
    eval_stall_minutes: float = Field(60.0, ge=0)
    zombie_grace_minutes: float = Field(10.0, ge=0)
    """Eval: every trial done, RUNNING, and no result.json for this long (nor this long since
    the job's start): a zombie. Before it, the job is writing its result and exiting."""
    engine_idle_minutes: float = Field(10.0, ge=0)
    datagen_hung_minutes: float = Field(120.0, ge=0)
    stall_step_multiple: float = Field(5.0, ge=0)
    """RL/SFT: no new step for this many of the run's own step times is a stall."""
    stall_min_minutes: float = Field(30.0, ge=0)
    auth_failures_min: int = Field(3, ge=1)
    # Standard-RL substitute checks (seed: "reward/avg_raw_reward, banked-step cadence plus
    # durable checkpoints, timing/*, generate/avg_num_tokens") and degenerate rollouts.
    dead_reward_abs: float = Field(0.0, ge=0)
    """Reward "flat at 0": every window value has ``abs(reward) <= dead_reward_abs``."""
    dead_response_tokens: float = Field(1.5, ge=0)
    """Responses "about 1 token": every window avg_num_tokens at or below this."""
    dead_entropy_max: float = Field(1e-3, ge=0)
    """Entropy "about 0": every window value at or below this."""
    checkpoint_cadence_factor: float = Field(2.0, ge=0)
    """Warn when the newest durable checkpoint lags the step by more than this many cadences."""
    # Per-token log-ratio health (seed: "mean ~0.005-0.02, max < 0.5, gt_50pct ≈ 0, position
    # buckets even"); a small mean is the seqnorm regime, never a problem.
    log_ratio_mean_max: float = Field(0.02, ge=0)
    log_ratio_max_max: float = Field(0.5, ge=0)
    gt_50pct_max: float = Field(0.0, ge=0)
    log_ratio_bucket_spread: float = Field(3.0, ge=0)
    """Position buckets are uneven when the largest bucket mean exceeds this × the smallest."""

    @model_validator(mode="after")
    def _pairs_can_fire(self) -> Thresholds:
        # Either pair written the wrong way round passed as valid and turned a rule off (no
        # window holds min_window values: every windowed signal, the collapse rule with it)
        # or on for every run (no ratio lies in an empty range).
        if self.min_window > self.window:
            raise ValueError(f"min_window {self.min_window} is more than window {self.window}: "
                             "no window could hold enough values, every windowed test "
                             "(entropy, log_ratio, grad_norm's window) would be off")
        if self.imp_ratio_low > self.imp_ratio_high:
            raise ValueError(f"imp_ratio_low {self.imp_ratio_low:g} is above imp_ratio_high "
                             f"{self.imp_ratio_high:g}: every ratio would be out of range")
        return self


class ReportSettings(_Strict):
    """Everything ``report`` needs to judge and present."""

    buckets: BucketRules = Field(default_factory=BucketRules)
    thresholds: Thresholds = Field(default_factory=Thresholds)
    width: int = 100
    """Every line of every table fits this many columns."""
    no_kill: bool = False
    ablation_patterns: tuple[str, ...] = (
        "spike[-_]?mitig", "ablat", "zclip", "z[-_]clip", "spike[-_]?skip", "skip[-_]?spikes?",
        r"loss_mode=\S*clip",
    )
    """Regexes marking spike-mitigation ablations (never auto-cancelled), searched in the job
    name and in every set ``key=value`` entry of the printed config (``report.fingerprint``)."""


@lru_cache(maxsize=256)
def compiled(patterns: tuple[str, ...]) -> tuple[re.Pattern[str], ...]:
    """``patterns`` compiled case-insensitively, once per rule set: they are validated when
    the config is loaded, and a sweep judges hundreds of jobs with the same few."""
    return tuple(re.compile(p, re.IGNORECASE) for p in patterns)


class DeepProbeSettings(BaseModel):
    """Thresholds of the deep probe's checks (``[deep_probe]`` in the config). Counts are at
    least 1 (``latest_steps = 0`` sliced every step as the latest), shares and factors at
    least 0, shares at most 1; none is inf or nan."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    latest_steps: int = Field(2, ge=1)
    garbage_char_share: float = Field(0.2, ge=0, le=1)
    """A sample is noise when this share of its characters is non-printable or U+FFFD."""
    noisy_sample_share: float = Field(0.5, ge=0, le=1)
    """A step is noise when this share of its samples is (garbage or one repeated token)."""
    repeat_token_share: float = Field(0.6, ge=0, le=1)
    repeat_min_tokens: int = Field(8, ge=1)
    compression_factor: float = Field(2.0, ge=0)
    compression_min_bytes: int = Field(256, ge=0)
    log_ratio_jump: float = Field(5.0, ge=0)
    collapsed_group_share: float = Field(0.5, ge=0, le=1)
    ngram_overlap: float = Field(0.9, ge=0, le=1)
    starved_gen_share: float = Field(0.9, ge=0, le=1)
    starved_tokens_per_s: float = Field(1.0, ge=0)
    missing_steps: int = Field(2, ge=0)
    unfinished_trial_minutes: float = Field(60.0, ge=0)
    """No sampled trial ended, the oldest started this long ago: zero trials completing
    (the rulebook's "no result.json for 60+ min")."""
    reward_range: tuple[float, float] | None = None

    @field_validator("reward_range")
    @classmethod
    def _low_first(cls, v: tuple[float, float] | None) -> tuple[float, float] | None:
        if v is not None and v[0] > v[1]:
            raise ValueError(f"[{v[0]:g}, {v[1]:g}]: write the low bound first "
                             "(every reward would read as outside it)")
        return v
