"""The deep probe's whole-sample rule reads Harbor's passthrough exceptions as the newest-third
rule does (rulebook: ContextLengthExceededError and AgentTimeoutError are benign, "the verifier
still scores, the rollout completes ... never the reason a job hangs or fails").

Trials shaped as SkyRL's Harbor runs leave them (a passthrough with no verifier_result: its
generator trains it as reward 0), as in ``test_deep_probe_judge._trials``.
"""

from __future__ import annotations

from probes.rollouts import RolloutFacts, TrialSample, TrialSampleSet
from report.deep_probe import judge_rollouts


def _sample(kinds: list[str | None], rewards: list[float | None]) -> RolloutFacts:
    trials = []
    for i, (kind, reward) in enumerate(zip(kinds, rewards, strict=True)):
        stamp = f"2026-12-05T05:{i:02d}:00+00:00"
        trials.append(TrialSample(name=f"task-{i:03d}__abcdefg", exception_type=kind,
                                  reward=reward, started_at=stamp, finished_at=stamp))
    return RolloutFacts(trials=TrialSampleSet(listed=len(trials), sampled=tuple(trials)))


def test_a_sample_of_passthroughs_is_no_zero_completing() -> None:
    """Every sampled trial a context overflow or an agent timeout, none verified: the rollouts
    completed (trained as reward 0), so the probe's reason is the all-zero reward they leave,
    never 'zero trials completing ... ended in an exception' (which blamed the passthroughs)."""
    kinds = ["ContextLengthExceededError", "AgentTimeoutError"] * 6
    result = judge_rollouts(_sample(list(kinds), [None] * 12))
    assert result.verdict == "KILL"
    assert not any("zero trials completing" in r for r in result.reasons), result.reasons
    assert result.reasons[0].startswith("all-zero reward: 12/12 completed trials of 12 sampled "
                                        "score 0 (12 ended in passthrough exceptions")


def test_passthroughs_beside_real_failures_are_not_the_failure() -> None:
    """Real failures (sandboxes that never started) beside passthroughs: the passthroughs
    completed, so the sample is not 'zero completing'; solved passthrough-free trials beside
    passthroughs are healthy (NO-KILL)."""
    kinds: list[str | None] = ["EnvironmentStartTimeoutError"] * 8 + ["AgentTimeoutError"] * 8
    rewards: list[float | None] = [None] * 8 + [0.0, 1.0] * 4
    assert judge_rollouts(_sample(kinds, rewards)).verdict == "NO-KILL"
    real = judge_rollouts(_sample(["EnvironmentStartTimeoutError"] * 16, [None] * 16))
    assert real.reasons[0].startswith("zero trials completing: all 16 sampled trials")
