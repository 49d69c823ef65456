"""The RL collapse rule (seed: "≥2 fire same step → cancel + salvage"), signal by signal.

Policy, exactly as CONTRACT §5 with these documented decisions where it is silent:

- A metric's *window* on step t is the previous ``th.window`` finite values of that metric in
  the same run; steps where the metric is absent (or non-finite) do not count. A windowed test
  needs ``th.min_window`` values and cannot fire before that. *Trend* is the window mean.
- ``grad_norm``: fires on ``> th.grad_norm_abs`` (no window needed), on ``> factor × window
  mean``, or on a non-finite value. Tiny values (seqnorm global-denom, ~1e-5) are the regime,
  not vanishing gradients: nothing fires for being small.
- ``entropy``: two-sided, ``|e(t) − trend| > th.entropy_rel_change × |trend|``. A non-finite
  entropy fires (the policy's distribution is broken; IEEE would silently say "no").
- ``log_ratio``: ``log_ratio_abs_mean(t) > factor × window mean`` while ``log_ratio_abs_max``
  stays bounded (``< th.log_ratio_max_bound_factor × its own window mean``). A trainer that
  prints only the batch's largest gap (SkyRL, TRL: ``log_ratio_batch_max``, one token's, no
  per-token max) has that judged so instead: bounded against its own window is bounded. If
  the trainer emits neither, or the window is too short to judge, the max is treated as
  bounded and the mean test decides alone; a non-finite max is unbounded. A non-finite mean
  fires.
- ``pass_rate``: fewer than ``th.pass_rate_min`` of the last ``th.pass_rate_trials`` trials
  have reward > 0 (no reward counts as not > 0). It is evaluated only on the latest step
  (trials are not attributed to steps) and only with at least ``th.min_window`` trials; with
  no trial evidence (standard non-agentic RL) it is simply not evaluated, never an error.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from probes.models import MetricPoint, TrialResult
from report.models import SignalEvidence
from report.settings import Thresholds

SIGNAL_NAMES: tuple[str, ...] = ("grad_norm", "entropy", "log_ratio", "pass_rate")


# The scan's own results are frozen dataclasses, not models: they never leave ``report`` (the
# evidence they hold does, as validated ``SignalEvidence``), and validating the six of each RL
# job (about 12 us) checked only what this module had just built.
@dataclass(frozen=True)
class StepSignals:
    """The collapse signals evaluated on one logged step."""

    step: int
    evidence: tuple[SignalEvidence, ...]

    @property
    def fired(self) -> frozenset[str]:
        return frozenset(e.signal for e in self.evidence if e.fired)


@dataclass(frozen=True)
class CollapseScan:
    """The collapse rule applied to a run's most recent logged steps."""

    steps: tuple[StepSignals, ...] = ()
    """Per-step signals for the last ``collapse_recent_steps`` logged steps, oldest first."""
    collapse_step: int | None = None
    """The latest recent step on which at least ``collapse_min_signals`` fired."""
    latest_fired: frozenset[str] = frozenset()
    collapse_onset: int | None = None
    """The step the collapse began on: the first of the unbroken run of logged steps, each
    with ``collapse_min_signals`` fired, that holds the earliest collapsed recent step (looked
    for back through the whole history). A save at or after it holds collapsed weights: the
    salvage is the last banked checkpoint before it (seed: "cancel + salvage")."""
    grad_norm_run: tuple[int, int] | None = None
    """First and last step of the latest run of ``grad_norm_warning_steps``+ consecutive
    logged grad norms above the absolute threshold, when it ends on one of the last
    ``collapse_recent_steps`` logged values (the rulebook's "predicted collapse 2-5 steps
    early": the warning outlives a dip back under 1.0)."""

    @property
    def grad_norm_warning(self) -> bool:
        return self.grad_norm_run is not None

    @property
    def latest_evidence(self) -> tuple[SignalEvidence, ...]:
        return self.steps[-1].evidence if self.steps else ()

    @property
    def collapse_evidence(self) -> tuple[SignalEvidence, ...]:
        for s in self.steps:
            if s.step == self.collapse_step:
                return tuple(e for e in s.evidence if e.fired)
        return ()


def window_of(history: Sequence[MetricPoint], index: int, metric: str, size: int) -> list[float]:
    """Return the previous ``size`` finite values of ``metric`` before ``history[index]``."""
    values: list[float] = []
    for point in reversed(history[:index]):
        v = point.values.get(metric)
        if v is not None and math.isfinite(v):
            values.append(v)
            if len(values) == size:
                break
    values.reverse()
    return values


def recent_windows(
    history: Sequence[MetricPoint], start: int, metric: str, size: int,
) -> list[list[float]]:
    """``[window_of(history, i, metric, size) for i in range(start, len(history))]`` for
    ``0 <= start`` and ``size > 0``, in one backward pass: consecutive steps' windows overlap,
    so the finite values are collected once, from the last step back until ``size`` of them
    lie before ``start`` (or the history begins), and each window is a slice of those."""
    found: list[float] = []
    positions: list[int] = []
    before_start = 0
    for position in range(len(history) - 2, -1, -1):
        v = history[position].values.get(metric)
        if v is not None and math.isfinite(v):
            found.append(v)
            positions.append(position)
            if position < start:
                before_start += 1
                if before_start == size:
                    break
    found.reverse()
    positions.reverse()
    out = []
    count = 0  # of the values found that lie before the step, which grows with the step
    for index in range(start, len(history)):
        while count < len(positions) and positions[count] < index:
            count += 1
        out.append(found[max(0, count - size) : count])
    return out


class Windows:
    """Windows of the steps from ``start`` on, per metric, each metric's found in one pass
    (:func:`recent_windows`) the first time one is asked for; any other step's from
    :func:`window_of`."""

    def __init__(self, history: Sequence[MetricPoint], start: int, size: int) -> None:
        self.history, self.start, self.size = history, start, size
        self.cached: dict[str, list[list[float]]] = {}

    def of(self, index: int, metric: str) -> list[float]:
        if not 0 <= self.start <= index < len(self.history) or self.size <= 0:
            return window_of(self.history, index, metric, self.size)
        windows = self.cached.get(metric)
        if windows is None:
            windows = self.cached[metric] = recent_windows(
                self.history, self.start, metric, self.size)
        return list(windows[index - self.start])


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values)


def _grad_norm(
    history: Sequence[MetricPoint], index: int, th: Thresholds, windows: Windows,
) -> SignalEvidence | None:
    point = history[index]
    v = point.values.get("grad_norm")
    if v is None:
        return None
    win = windows.of(index, "grad_norm")
    mean = _mean(win) if len(win) >= th.min_window else None
    if not math.isfinite(v):
        fired, why = True, f"grad_norm {v} is not finite"
    elif v > th.grad_norm_abs:
        fired, why = True, f"grad_norm {v:.3g} > {th.grad_norm_abs:g}"
    elif mean is not None and mean > 0 and v > th.grad_norm_window_factor * mean:
        fired, why = True, f"grad_norm {v:.3g} > {th.grad_norm_window_factor:g}× window {mean:.3g}"
    else:
        fired, why = False, f"grad_norm {v:.3g} within bounds"
    return SignalEvidence(
        signal="grad_norm", step=point.step, value=v, window_mean=mean, window=tuple(win),
        fired=fired, why=why,
    )


def _entropy(
    history: Sequence[MetricPoint], index: int, th: Thresholds, windows: Windows,
) -> SignalEvidence | None:
    point = history[index]
    v = point.values.get("entropy")
    if v is None:
        return None
    win = windows.of(index, "entropy")
    trend = _mean(win) if len(win) >= th.min_window else None
    if not math.isfinite(v):
        fired, why = True, f"entropy {v} is not finite"
    elif trend is None:
        fired, why = False, f"entropy window has {len(win)} < {th.min_window} values"
    else:
        change = (v - trend) / abs(trend) if trend else math.inf
        fired = abs(v - trend) > th.entropy_rel_change * abs(trend)
        why = f"entropy {v:.3g} {change:+.0%} vs trend {trend:.3g}"
    return SignalEvidence(
        signal="entropy", step=point.step, value=v, window_mean=trend, window=tuple(win),
        fired=fired, why=why,
    )


def _max_bounded(
    history: Sequence[MetricPoint], index: int, th: Thresholds, windows: Windows,
) -> bool:
    values = history[index].values
    name = "log_ratio_abs_max" if "log_ratio_abs_max" in values else "log_ratio_batch_max"
    top = values.get(name)
    if top is None:
        return True  # not emitted: the mean test decides alone (module policy)
    if not math.isfinite(top):
        return False
    win = windows.of(index, name)
    if len(win) < th.min_window:
        return True
    return top < th.log_ratio_max_bound_factor * _mean(win)


def _log_ratio(
    history: Sequence[MetricPoint], index: int, th: Thresholds, windows: Windows,
) -> SignalEvidence | None:
    point = history[index]
    v = point.values.get("log_ratio_abs_mean")
    if v is None:
        return None
    win = windows.of(index, "log_ratio_abs_mean")
    mean = _mean(win) if len(win) >= th.min_window else None
    if not math.isfinite(v):
        fired, why = True, f"log_ratio_abs_mean {v} is not finite"
    elif mean is None:
        fired, why = False, f"log_ratio window has {len(win)} < {th.min_window} values"
    else:
        rising = v > th.log_ratio_window_factor * mean
        bounded = _max_bounded(history, index, th, windows)
        fired = rising and bounded
        why = f"log_ratio_abs_mean {v:.3g} = {v / mean:.1f}× window {mean:.3g}" if mean else (
            f"log_ratio_abs_mean {v:.3g} vs window 0"
        )
        if rising and not bounded:
            why += "; max unbounded"
    return SignalEvidence(
        signal="log_ratio", step=point.step, value=v, window_mean=mean, window=tuple(win),
        fired=fired, why=why,
    )


def pass_rate_evidence(
    trials: Sequence[TrialResult], step: int, th: Thresholds
) -> SignalEvidence | None:
    """Evaluate the pass-rate signal over the last ``th.pass_rate_trials`` trials."""
    recent = list(trials)[-th.pass_rate_trials :]
    if len(recent) < th.min_window:
        return None
    passed = sum(1 for t in recent if t.reward is not None and t.reward > 0)
    rate = passed / len(recent)
    return SignalEvidence(
        signal="pass_rate", step=step, value=rate, window_mean=None, window=(),
        fired=rate < th.pass_rate_min,
        why=f"pass-rate {rate:.0%} over last {len(recent)} trials (min {th.pass_rate_min:.0%})",
    )


def evaluate_step(
    history: Sequence[MetricPoint],
    index: int,
    th: Thresholds,
    *,
    trials: Sequence[TrialResult] | None = None,
    windows: Windows | None = None,
) -> list[SignalEvidence]:
    """Evaluate every applicable collapse signal on ``history[index]`` (fired or not);
    ``windows``: the scan's, shared by its steps."""
    # Alone, each window is looked up on its own (a scan's start past every step).
    windows = windows if windows is not None else Windows(history, len(history), th.window)
    evidence = [
        e
        for e in (_grad_norm(history, index, th, windows), _entropy(history, index, th, windows),
                  _log_ratio(history, index, th, windows))
        if e is not None
    ]
    if trials is not None and index == len(history) - 1:
        rate = pass_rate_evidence(trials, history[index].step, th)
        if rate is not None:
            evidence.append(rate)
    return evidence


def _grad_norm_run(history: Sequence[MetricPoint], th: Thresholds) -> tuple[int, int] | None:
    logged = [(p.step, p.values["grad_norm"]) for p in history if "grad_norm" in p.values]
    # A non-finite grad norm is worse than a large one, so it counts as "above".
    above = [not math.isfinite(v) or v > th.grad_norm_abs for _, v in logged]
    end = len(logged) - 1
    stop = max(-1, len(logged) - 1 - th.collapse_recent_steps)
    while end > stop:
        if not above[end]:
            end -= 1
            continue
        start = end
        while start > 0 and above[start - 1]:
            start -= 1
        if end - start + 1 >= th.grad_norm_warning_steps:
            return logged[start][0], logged[end][0]
        end = start - 1
    return None


def collapse_scan(
    history: Sequence[MetricPoint],
    th: Thresholds,
    *,
    trials: Sequence[TrialResult] | None = None,
) -> CollapseScan:
    """Apply the collapse rule to the last ``th.collapse_recent_steps`` logged steps."""
    if not history:
        return CollapseScan()
    start = max(0, len(history) - th.collapse_recent_steps)
    windows = Windows(history, start, th.window)
    steps = tuple(
        StepSignals(step=history[i].step,
                    evidence=tuple(evaluate_step(history, i, th, trials=trials, windows=windows)))
        for i in range(start, len(history))
    )
    collapsed = [s.step for s in steps if len(s.fired) >= th.collapse_min_signals]
    return CollapseScan(
        steps=steps,
        collapse_step=collapsed[-1] if collapsed else None,
        collapse_onset=_onset(history, start, steps, th, trials) if collapsed else None,
        latest_fired=steps[-1].fired,
        grad_norm_run=_grad_norm_run(history, th),
    )


def _onset(history: Sequence[MetricPoint], start: int, steps: Sequence[StepSignals],
           th: Thresholds, trials: Sequence[TrialResult] | None) -> int:
    """The step a collapse seen on the recent ``steps`` began on (:attr:`CollapseScan.
    collapse_onset`): its earliest collapsed recent step, extended back over earlier logged
    steps while each has ``collapse_min_signals`` fired (a step logging none of the signals'
    metrics neither ends nor extends the run)."""
    first = next(i for i, s in enumerate(steps) if len(s.fired) >= th.collapse_min_signals)
    onset = steps[first].step
    if first > 0:
        return onset  # a recent step before it did not collapse: the run began here
    for index in range(start - 1, -1, -1):
        evidence = evaluate_step(history, index, th, trials=trials)
        if not evidence:
            continue
        if sum(e.fired for e in evidence) < th.collapse_min_signals:
            break
        onset = history[index].step
    return onset
