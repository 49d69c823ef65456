"""The log-ratio signal when the trainer's max is not read (TRL GRPO, SkyRL).

TRL's ``sampling/sampling_logp_difference/max`` and SkyRL's
``policy/rollout_train_logprobs_abs_diff_max`` are one token's |log ratio| over the whole batch
(a single outlier, a few nats on a healthy run), so neither maps to ``log_ratio_abs_max``
(0883b4b). The signal ("``log_ratio_abs_mean`` > 2x its window while the max stays bounded")
then reads the mean alone: a steady mean beside wild raw maxes fires nothing and no health
warning, a mean risen past 2x its window fires whatever the raw max did at that step, and a
window stored before the change (holding maxes) neither blocks nor fires it.
"""

from __future__ import annotations

import pytest

from probes.logs.parse import parse_log
from probes.models import MetricPoint
from report.models import JobDetail
from report.settings import Thresholds
from report.signals import evaluate_step
from tests.report.factories import facts, judge, record

MAXES = (0.41, 4.38, 2.9, 6.1, 0.8, 3.3, 5.2, 1.7, 4.9, 2.2, 3.8, 5.9)
"""One outlier token's |log ratio| a step (healthy runs print a few nats)."""


def _trl(mean: float, top: float, step: int) -> str:
    """A TRL GRPO step as the HF Trainer prints it: the bar, then its dict."""
    bar = f" {step * 100 // 200:2d}%|          | {step}/200 [01:40<31:40, 10.00s/it]\n"
    return bar + (
        f"{{'loss': 0.0123, 'grad_norm': 0.5312, 'learning_rate': 1e-06, 'reward': 0.4375, "
        f"'sampling/sampling_logp_difference/mean': {mean}, "
        f"'sampling/sampling_logp_difference/max': {top}, "
        f"'sampling/importance_sampling_ratio/mean': 1.0021, 'entropy': 0.5521, "
        f"'epoch': {step / 200}}}\n")


def _skyrl(mean: float, top: float, step: int) -> str:
    """A SkyRL step as its tracking logger prints it (``Step N:`` and the pprint'ed dict)."""
    sk = "(skyrl_entrypoint pid=48213) "
    keys = {"policy/grad_norm": "0.2143", "policy/policy_entropy": "0.5127",
            "policy/rollout_train_logprobs_abs_diff_max": f"{top}",
            "policy/rollout_train_logprobs_abs_diff_mean": f"{mean}",
            "reward/avg_raw_reward": "0.4062", "trainer/global_step": str(step)}
    items = sorted(keys.items())
    body = "\n".join(f"{sk}{'{' if i == 0 else ' '}{k!r}: {v}{'}' if i == len(items) - 1 else ','}"
                     for i, (k, v) in enumerate(items))
    return (f"{sk}2026-12-04 14:31:07.412 | INFO     | skyrl.train.utils.tracking:log:189 - "
            f"Step {step}: \n{body}\n")


FORMATS = [pytest.param(_trl, id="trl"), pytest.param(_skyrl, id="skyrl")]


def _read(line, means: list[float]) -> JobDetail:
    text = "".join(line(mean, MAXES[i % len(MAXES)], i + 1) for i, mean in enumerate(means))
    summary = parse_log(text)
    assert all("log_ratio_abs_max" not in p.values for p in summary.points)
    return judge(facts(record("grpo-run", "7"), summary.points))


def _log_ratio(detail: JobDetail) -> list[bool]:
    return [e.fired for e in detail.evidence if e.signal == "log_ratio"]


@pytest.mark.parametrize("line", FORMATS)
def test_a_steady_mean_beside_outlier_maxes_fires_nothing(line) -> None:
    detail = _read(line, [0.0113, 0.0121, 0.0108, 0.0117, 0.0112, 0.0119, 0.0110, 0.0116,
                          0.0114, 0.0118, 0.0111, 0.0115])
    assert _log_ratio(detail) and not any(_log_ratio(detail))
    assert "signal:log_ratio" not in detail.report.flags
    assert "max" not in detail.report.trend  # no "log-ratio out of range: max ..."
    assert detail.report.metrics["log_ratio_abs_mean"] == pytest.approx(0.0115)


@pytest.mark.parametrize("line", FORMATS)
def test_a_mean_past_twice_its_window_fires_whatever_the_raw_max(line) -> None:
    detail = _read(line, [0.0113] * 11 + [0.0400])
    assert _log_ratio(detail)[-1] is True
    assert "signal:log_ratio" in detail.report.flags
    near_miss = _read(line, [0.0113] * 11 + [0.0220])  # 1.95x: not past 2x
    assert not any(_log_ratio(near_miss))


def test_a_window_stored_with_maxes_neither_blocks_nor_fires_it() -> None:
    """Points the window kept from before 0883b4b hold a max (even a huge one); the new points
    hold none: the mean test decides, on the same step, as for a run that never had one."""
    th = Thresholds()
    old = [MetricPoint(step=s, values={"log_ratio_abs_mean": 0.0113, "log_ratio_abs_max": 4.4})
           for s in range(1, 9)]
    for latest, fires in ((0.04, True), (0.012, False)):
        new = [MetricPoint(step=s, values={"log_ratio_abs_mean": 0.0113}) for s in (9, 10, 11)]
        history = [*old, *new, MetricPoint(step=12, values={"log_ratio_abs_mean": latest})]
        fired = [e for e in evaluate_step(history, len(history) - 1, th)
                 if e.signal == "log_ratio"]
        assert [e.fired for e in fired] == [fires]
        assert "unbounded" not in fired[0].why
