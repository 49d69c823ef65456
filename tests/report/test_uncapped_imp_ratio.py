"""An importance-ratio mean taken before the cap is no TIS health read (rulebook §RL).

The rulebook reads TIS health on the *capped* ``tis/imp_ratio_mean`` (~0.84-1.56) and warns
that a mean of the raw per-token ratio is "dominated by outlier tokens (a single ~20-nat
disagreement gives exp(20)~5e8)": millions are normal on healthy runs. Two trainers print
exactly that raw mean:

- SkyRL (NovaSky-AI/SkyRL ``skyrl/backends/skyrl_train/utils/off_policy_correction_utils.py``,
  2026-08): ``metrics["is_ratio_mean"] = masked_mean(is_ratio, loss_mask)`` with
  ``is_ratio = safe_exp_delta(old_log_probs - rollout_logprobs, clip=20.0)``, computed before
  any TIS cap or mask;
- verl (``verl/trainer/ppo/rollout_corr_helper.py``, 2026-01; ``mismatch_helper.py`` before):
  "Compute IS weight metrics (BEFORE truncation ...)": ``rollout_is_mean`` is the mean of the
  weights safety-bounded at exp(+-20) only.

A healthy SkyRL run whose batch held one outlier token (mean 4853, 0.02 % of tokens capped)
read warning ``imp-ratio-out-of-range`` 'TIS imp_ratio 4853 out of range'. Capping only lowers
a weight, so the capped mean is at most the raw one: a raw mean *below* the range still says
the capped mean is out of range, and the capped share still says how much was truncated.
"""

from __future__ import annotations

import pprint

import pytest

from probes.logs.metric_names import canonical_values
from tests.report.factories import judge
from tests.report.test_judge_rl_rulebook import _from_log

RAY = "(skyrl_entrypoint pid=48213) "


def _skyrl_log(raw_means: list[float], capped: float = 0.0002) -> str:
    """SkyRL's ``Step N:`` pprint dict (floats as ``ConsoleLogger.stringify_floats`` writes)."""
    lines = [RAY + "INFO | skyrl.train.entrypoints.main_base:run:301 - Total training steps: 100"]
    for step, raw in enumerate(raw_means, start=1):
        metrics = {"policy/grad_norm": 0.21, "policy/policy_entropy": 0.58,
                   "policy/policy_loss": -0.01, "policy/loss_metrics/clip_ratio": 0.0015,
                   "policy/loss_metrics/is_ratio_mean": raw,
                   "policy/loss_metrics/tis_token_clip_high_ratio": capped,
                   "reward/avg_raw_reward": 0.3, "trainer/global_step": step}
        lines.append(RAY + f"INFO | skyrl.train.utils.tracking:log:189 - Step {step}: ")
        body = pprint.pformat({k: f"{v:.4f}" if isinstance(v, float) else v
                               for k, v in metrics.items()})
        lines.extend(RAY + line for line in body.split("\n"))
    return "\n".join(lines) + "\n"


def _verl_log(raw_means: list[float], high: float = 0.0004) -> str:
    """verl's console line (``concat_dict_to_str``: ``step:N - key:value - ...``)."""
    return "".join(
        f"step:{step} - actor/entropy:0.52 - actor/grad_norm:0.18 - actor/pg_loss:-0.003 - "
        f"critic/score/mean:0.41 - rollout_corr/rollout_is_mean:{raw} - "
        f"rollout_corr/rollout_is_ratio_fraction_high:{high}\n"
        for step, raw in enumerate(raw_means, start=1))


@pytest.mark.parametrize("raw", ["policy/loss_metrics/is_ratio_mean",
                                 "rollout_corr/rollout_is_mean", "mismatch/rollout_is_mean",
                                 "actor/rollout_corr/rollout_is_mean"])
def test_a_raw_ratio_mean_is_not_the_capped_mean(raw: str) -> None:
    assert canonical_values({raw: 3.1e6}, {}) == {"imp_ratio_uncapped_mean": 3.1e6}


@pytest.mark.parametrize("log", [_skyrl_log([1.01] * 8 + [4853.2]),
                                 _verl_log([1.02] * 8 + [4.85e8])])
def test_one_outlier_token_in_a_healthy_run_raises_nothing(log: str) -> None:
    report = judge(_from_log(log, name="rl-tis-run")).report
    assert "imp-ratio-out-of-range" not in report.flags, report.trend
    assert report.verdict == "healthy", (report.verdict, report.trend)
    assert "imp_ratio_mean" not in report.metrics
    assert report.metrics["imp_ratio_uncapped_mean"] > 1000


@pytest.mark.parametrize("log", [_skyrl_log([0.9] * 8 + [0.62]), _verl_log([0.9] * 8 + [0.62])])
def test_a_raw_mean_below_the_range_is_still_out_of_range(log: str) -> None:
    """The capped mean is at most the raw one: below 0.84 raw is below 0.84 capped."""
    report = judge(_from_log(log, name="rl-tis-run")).report
    assert "imp-ratio-out-of-range" in report.flags and report.verdict == "warning"
    assert "0.62" in report.trend


@pytest.mark.parametrize("log", [_skyrl_log([1.01] * 9, capped=0.05),
                                 _verl_log([1.02] * 8 + [4.85e8], high=0.05)])
def test_the_capped_share_still_judges_a_run_with_a_raw_mean(log: str) -> None:
    report = judge(_from_log(log, name="rl-tis-run")).report
    assert "imp-ratio-out-of-range" in report.flags
    assert "TIS capped fraction 5.0%" in report.trend


def test_a_capped_mean_is_still_judged_on_both_sides() -> None:
    """TRL clamps (``*_truncate``) or zeroes (``*_mask``) its ratio at C_max before the mean:
    its ``sampling/importance_sampling_ratio/mean`` stays the capped mean."""
    assert canonical_values({"sampling/importance_sampling_ratio/mean": 2.1}, {}) == {
        "imp_ratio_mean": 2.1}
    log = "".join(f"step:{s} - actor/entropy:0.52 - actor/grad_norm:0.18 - "
                  f"critic/score/mean:0.41 - tis/imp_ratio_mean:{v}\n"
                  for s, v in enumerate([1.0] * 8 + [2.1], start=1))
    report = judge(_from_log(log, name="rl-tis-run")).report
    assert "imp-ratio-out-of-range" in report.flags and "TIS imp_ratio 2.10" in report.trend


@pytest.mark.parametrize(("raw", "cell"), [(1.02, "imp 1.02"), (4.85e8, "imp >10")])
def test_the_row_shows_a_raw_mean_only_while_it_reads_as_a_ratio(raw: float, cell: str) -> None:
    from tests.report.test_tables import make_job, make_report, table_for

    job = make_job("rl-verl", "rl", step=3, metrics={"reward": 0.5, "entropy": 0.5,
                                                      "imp_ratio_uncapped_mean": raw})
    assert cell in table_for(make_report(job), "rl")
