"""Eval: a share of trials whose sandbox never started is named, apart from agent timeouts.

Replayed on the real SLURM (sbatch, read through ``jobtables job ID``): ``eval-some-envstart``
with 125 of 300 trials finished, 35 of them ``EnvironmentStartTimeoutError`` (no agent phase, no
output, never scored: Harbor's null ``agent_result``/``verifier_result``), 20 agent timeouts,
30 passed. The row read top exc ``EnvStartTO`` and Trend "healthy", nothing else: 28 % of the
benchmark's trials never ran, and its pass-rate (0.24, unscored trials counted as not passing
as Harbor's Mean counts them) is deflated by the provider, not the model. The rulebook
distinguishes the two: an agent timeout is a passthrough exception, scored, and expected on
hard sets; a sandbox that never came up is infra. Below the never-started rule's half (the
``instant-fail`` flag), the Trend now says how many never started and why, without a flag.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from tests.report.factories import judge
from tests.report.test_harbor_dryrun_datagen import MAKE, _facts


def _report(tmp_path: Path, mix: dict[str, int]):  # type: ignore[no-untyped-def]
    jobs = tmp_path / "jobs"
    out = MAKE.write(jobs / "2026-12-04__14-55-00", mix, total=300, seed=13, shuffle=False)
    line = MAKE.progress_line(out["done"], out["total"], out["mean"])
    now = datetime.now(UTC)
    return judge(_facts(jobs, f"{line}\n", "eval-some-envstart", now=now), now=now).report


def test_a_share_of_never_started_trials_is_named(tmp_path: Path) -> None:
    report = _report(tmp_path, {"pass": 30, "fail": 40, "timeout": 20, "never": 35,
                                "inflight": 10})
    assert report.verdict == "healthy" and report.flags == [], (report.verdict, report.flags)
    assert report.trend == "35/100 recent never started (EnvStartTO): infra, unscored", report.trend


def test_agent_timeouts_alone_keep_their_note(tmp_path: Path) -> None:
    report = _report(tmp_path, {"pass": 30, "fail": 40, "timeout": 45, "inflight": 10})
    assert report.trend == "AgentTimeouts on top: expected on hard sets", report.trend


def test_a_stray_never_started_trial_is_no_news(tmp_path: Path) -> None:
    report = _report(tmp_path, {"pass": 30, "fail": 60, "timeout": 8, "never": 2,
                                "inflight": 10})
    assert "never started" not in report.trend, report.trend
