"""A run whose every sampled trial died is told once, truly: no "older trials completed".

Found with ``jobtables probe`` on the real SLURM 22.05 (job 185): an agentic RL run (SkyRL's
flat Harbor ``trials_dir`` named in its config dump) whose 40 trials all ended in
``EnvironmentStartTimeoutError`` with no verifier result read KILL with two reasons, the whole
sample's "zero trials completing: all 40 sampled trials ... ended in an exception" and then
"zero trials completing now: the newest 13 of 40 ...; older trials completed" -- false: no
older trial completed. The newest-third rule exists so a run that died after healthy steps is
not excused by its older trials; when the whole sample is already dead it has nothing to add.
"""

from __future__ import annotations

import pytest

from probes.rollouts import RolloutFacts, TrialSample, TrialSampleSet
from report.deep_probe import judge_rollouts


def _run(older: str | None, newest: str, n: int = 40) -> RolloutFacts:
    """``n`` trials one second apart: the first two thirds end in ``older`` (None: solved),
    the newest third in ``newest``; a dead sandbox leaves no verifier result."""
    trials = []
    for i in range(n):
        stamp = f"2026-12-05T11:{43 + i // 60:02d}:{i % 60:02d}+00:00"
        kind = newest if i >= 2 * n // 3 else older
        trials.append(TrialSample(name=f"task-{i:03d}__abcdefg", exception_type=kind,
                                  reward=1.0 if kind is None else None,
                                  started_at=stamp, finished_at=stamp))
    return RolloutFacts(trials=TrialSampleSet(listed=n, sampled=tuple(trials)))


def test_a_wholly_dead_sample_gets_one_true_reason() -> None:
    """Every trial dead: KILL on the whole sample, and no reason claims older ones completed."""
    result = judge_rollouts(_run("EnvironmentStartTimeoutError", "EnvironmentStartTimeoutError"))
    assert result.verdict == "KILL"
    assert [r.split(":")[0] for r in result.reasons] == ["zero trials completing"]
    assert not any("older trials completed" in r for r in result.reasons), result.reasons


@pytest.mark.parametrize("older", [None, "AgentTimeoutError"])
def test_a_run_that_died_after_healthy_trials_is_still_told_now(older: str | None) -> None:
    """Near miss: older trials solved (or timed out: a passthrough, completed), the newest third
    dead: the "now" reason, which is true there, still fires."""
    result = judge_rollouts(_run(older, "EnvironmentStartTimeoutError"))
    assert result.verdict == "KILL"
    assert any(r.startswith("zero trials completing now: the newest ") and
               r.endswith("older trials completed") for r in result.reasons), result.reasons
