"""Every number of CONTRACT §5 is a ``[thresholds]`` key the rules are judged by.

§5: "Rule definitions (defaults; every number configurable)". For each number of its table and
prose, a run is built that the default judges one way, and the same run is judged again with
only that key changed: the flag (or verdict) must follow the key. Found while checking this
on the real SLURM: the numbers were used, but a Trend still quoted the default's grad-norm
bound (tests/report/test_configured_grad_norm_text.py).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from probes.models import JobState
from report.models import JobReport
from report.settings import ReportSettings, Thresholds
from tests.report.factories import NOW, facts, healthy_rl, judge, points, record, tree, trial


def _rl(th: dict[str, Any], *, trials: Any = None, **series: list[float | None]) -> JobReport:
    job = facts(record("rl-grpo-numbers", "61"), points(healthy_rl(len(next(iter(
        series.values()))), **series)), trials=trials)
    return judge(job, settings=ReportSettings(thresholds=Thresholds(**th))).report


def _sft(th: dict[str, Any], grad_norm: list[float]) -> JobReport:
    series = {"loss": [1.5 - 0.01 * i for i in range(len(grad_norm))], "grad_norm": grad_norm}
    job = facts(record("sft-numbers", "62"), points(series))
    return judge(job, settings=ReportSettings(thresholds=Thresholds(**th))).report


def _trials(passed_old: int, passed_new: int) -> Any:
    """200 ended trials, oldest first: the older 100 with ``passed_old`` scored above 0."""
    rewards = ([1.0] * passed_old + [0.0] * (100 - passed_old)
               + [1.0] * passed_new + [0.0] * (100 - passed_new))
    return tree([trial(r, name=f"t{i}", finished_at=NOW - timedelta(minutes=300 - i))
                 for i, r in enumerate(rewards)])


FLAT = [0.1] * 12
# (section 5's number, the key changed, the run judged under given thresholds, and what the
# default reads and the changed key does not: a flag, a verdict, or with "!" the other way)
CASES: list[tuple[str, dict[str, Any], Any, str]] = [
    ("window 10", {"window": 3, "min_window": 3},
     lambda th: _rl(th, grad_norm=[0.1] * 10 + [0.4, 0.4, 0.4, 0.7]), "signal:grad_norm"),
    ("min_window 5", {"min_window": 4},
     lambda th: _rl(th, grad_norm=[0.1, 0.1, 0.1, 0.1, 0.5]), "!signal:grad_norm"),
    ("grad_norm > 1.0", {"grad_norm_abs": 1.5},
     lambda th: _rl(th, grad_norm=[0.9] * 12 + [1.2]), "signal:grad_norm"),
    ("grad_norm > 2 x window", {"grad_norm_window_factor": 4.0},
     lambda th: _rl(th, grad_norm=[*FLAT, 0.3]), "signal:grad_norm"),
    ("entropy 0.30 x trend", {"entropy_rel_change": 0.5},
     lambda th: _rl(th, entropy=[0.5] * 12 + [0.3]), "signal:entropy"),
    ("log_ratio 2 x window", {"log_ratio_window_factor": 4.0},
     lambda th: _rl(th, log_ratio_abs_mean=[0.01] * 12 + [0.03]), "signal:log_ratio"),
    ("log_ratio max under 10 x its window", {"log_ratio_max_bound_factor": 1.2},
     lambda th: _rl(th, log_ratio_abs_mean=[0.01] * 12 + [0.03],
                    log_ratio_abs_max=[0.3] * 12 + [0.45]), "signal:log_ratio"),
    ("pass_rate under 10 %", {"pass_rate_min": 0.04},
     lambda th: _rl(th, trials=_trials(100, 5), reward=[0.4] * 12), "signal:pass_rate"),
    ("pass_rate over the last 100 trials", {"pass_rate_trials": 200},
     lambda th: _rl(th, trials=_trials(100, 5), reward=[0.4] * 12), "signal:pass_rate"),
    ("collapse: >= 2 signals", {"collapse_min_signals": 3},
     lambda th: _rl(th, grad_norm=[*FLAT, 3.0], entropy=[0.5] * 12 + [0.1]), "collapse"),
    ("collapse on one of the last 5 steps", {"collapse_recent_steps": 2},
     lambda th: _rl(th, grad_norm=[*FLAT, 3.0, 0.1, 0.1, 0.1],
                    entropy=[0.5] * 12 + [0.1, 0.5, 0.5, 0.5]), "collapse"),
    ("grad_norm > 1.0 on 2 consecutive steps: warning", {"grad_norm_warning_steps": 3},
     lambda th: _rl(th, grad_norm=[0.9] * 12 + [1.2, 1.3]), "verdict:warning"),
    ("SFT grad-explosion 10 x window", {"sft_grad_explosion_factor": 40.0},
     lambda th: _sft(th, [0.8] * 12 + [25.0]), "grad-explosion"),
]


def _reads(report: JobReport, what: str) -> bool:
    if what.startswith("verdict:"):
        return report.verdict == what.removeprefix("verdict:")
    return what in report.flags


@pytest.mark.parametrize(("number", "changed", "run", "what"), CASES,
                         ids=[case[0] for case in CASES])
def test_each_section_5_number_is_the_configured_one(
    number: str, changed: dict[str, Any], run: Any, what: str
) -> None:
    """The default judges the run one way; the changed key judges it the other way."""
    negated = what.startswith("!")
    what = what.removeprefix("!")
    default, configured = run({}), run(changed)
    assert default.state is JobState.RUNNING
    assert _reads(default, what) is not negated, (number, default.flags, default.trend)
    assert _reads(configured, what) is negated, (number, configured.flags, configured.trend)
