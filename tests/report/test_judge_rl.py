"""RL judgement: collapse and its exemptions, warnings, TIS, shaping, deep-probe, lifecycle."""

from __future__ import annotations

import math
from datetime import timedelta
from typing import Any

import pytest

from probes.models import Fault, JobFacts, JobState
from report.judge_rl import run_fingerprint
from report.memory import SweepMemory
from report.settings import ReportSettings
from tests.report.factories import (
    NOW,
    facts,
    healthy_rl,
    judge,
    log,
    points,
    record,
    summary,
    tree,
    trial,
    with_last,
)

COLLAPSING = healthy_rl(
    grad_norm=with_last([0.2] * 12, 3.2), entropy=with_last([0.5] * 12, 0.19)
)


def _rl(series: dict[str, Any] | None = None, name: str = "rl-run", **kw: Any) -> JobFacts:
    rec_kw = kw.pop("rec", {})
    state = rec_kw.pop("state", JobState.RUNNING)
    return facts(record(name, state=state, **rec_kw), points(series or healthy_rl()), **kw)


def test_healthy_run() -> None:
    """A calm run is healthy, unflagged, with its latest metrics and a reward trend."""
    detail = judge(_rl())
    job = detail.report
    assert (job.bucket, job.verdict, job.flags, job.recommendation) == ("rl", "healthy", [], None)
    assert job.step == 12 and job.metrics["entropy"] == 0.5 and "pass_rate" not in job.metrics
    assert job.trend.startswith("Reward rising 0.44→0.51")
    assert len(detail.evidence) == 5 * 3 and detail.collapse_step is None


def test_collapse_recommends_cancel_and_salvage() -> None:
    """Two signals on the latest step: collapse, with every signal and value in the reason."""
    detail = judge(_rl(COLLAPSING))
    job = detail.report
    assert {"collapse", "signal:grad_norm", "signal:entropy"} <= set(job.flags)
    assert job.verdict == "collapse" and detail.collapse_step == 12
    assert job.trend == "COLLAPSE: grad_norm 3.20 (>1.0), entropy −62% vs trend"
    assert job.recommendation is not None
    assert job.recommendation.action == "cancel_and_salvage"
    why = job.recommendation.why
    assert "grad_norm 3.2 > 1" in why and "entropy 0.19" in why


def test_ablation_is_never_cancelled() -> None:
    """A spike-mitigation ablation collapses on record but the action is none."""
    job = judge(_rl(COLLAPSING, name="rl-zclip-ablation")).report
    assert {"collapse", "ablation-exempt"} <= set(job.flags) and job.verdict == "collapse"
    assert job.recommendation is not None and job.recommendation.action == "none"
    assert job.recommendation.why.startswith(
        "spike-mitigation ablation: observing recovery is the experiment"
    )


def test_no_kill_turns_cancel_into_a_recommendation() -> None:
    """Under no-kill the cancel stays a recommendation, prefixed and flagged."""
    job = judge(_rl(COLLAPSING), settings=ReportSettings(no_kill=True)).report
    assert "no-kill" in job.flags and job.recommendation is not None
    assert job.recommendation.action == "cancel_and_salvage"
    assert job.recommendation.why.startswith("RECOMMENDATION ONLY (no-kill in force): collapse")


def test_no_kill_flag_only_where_a_cancel_is_recommended() -> None:
    """A healthy run under no-kill carries no no-kill flag."""
    assert judge(_rl(), settings=ReportSettings(no_kill=True)).report.flags == []


def test_collapse_on_a_dead_job_is_not_cancelled() -> None:
    """A job that already FAILED keeps the collapse evidence but gets diagnose, verdict failed."""
    job = judge(_rl(COLLAPSING, rec={"state": JobState.FAILED, "exit_code": 1})).report
    assert "collapse" in job.flags and job.verdict == "failed"
    assert job.recommendation is not None and job.recommendation.action == "diagnose"


@pytest.mark.parametrize(
    ("extra", "flags", "verdict"),
    [
        ({"grad_norm": with_last([0.2] * 12, 3.2)}, ["signal:grad_norm"], "healthy"),
        ({"grad_norm": with_last([0.9] * 12, 1.2, 1.3)}, ["signal:grad_norm"], "warning"),
        ({"grad_norm": with_last([0.9] * 12, 1.3, 0.9)}, [], "healthy"),  # near-miss
        ({"clip_ratio": [0.02] * 12}, ["clip-ratio-high"], "warning"),
        ({"clip_ratio": [0.009] * 12}, [], "healthy"),
        ({"imp_ratio_mean": [0.80] * 12}, ["imp-ratio-out-of-range"], "warning"),
        ({"imp_ratio_mean": [1.60] * 12}, ["imp-ratio-out-of-range"], "warning"),
        ({"imp_ratio_mean": [0.85] * 12}, [], "healthy"),
        ({"imp_ratio_mean": [1.55] * 12}, [], "healthy"),
        ({"imp_ratio_capped_fraction": [0.02] * 12}, ["imp-ratio-out-of-range"], "warning"),
        ({"imp_ratio_capped_fraction": [0.005] * 12}, [], "healthy"),
        ({"rollout_train_prob_diff_mean": [5e9] * 12}, [], "healthy"),  # benign
        ({"grad_norm": [1e-5] * 12, "policy_loss": [2e-6] * 12}, [], "healthy"),  # seqnorm
        ({"policy_loss": with_last([-0.01] * 12, math.nan)}, ["nan-loss"], "failed"),
    ],
)
def test_warnings_and_benign_metrics(
    extra: dict[str, list[float | None]], flags: list[str], verdict: str
) -> None:
    """Single signals, the grad-norm warning, TIS/clip health and benign metrics."""
    job = judge(_rl(healthy_rl(**extra))).report
    assert job.flags == flags
    assert job.verdict == verdict


def test_rollout_prob_diff_is_reported_not_judged() -> None:
    """A huge rollout_train_prob_diff_mean appears in metrics and nowhere else."""
    job = judge(_rl(healthy_rl(rollout_train_prob_diff_mean=[5e9] * 12))).report
    assert job.metrics["rollout_train_prob_diff_mean"] == 5e9 and job.flags == []


@pytest.mark.parametrize(
    ("reward", "rollouts", "shaped", "suffix"),
    [(0.5, 8, False, " (base)"), (0.531, 8, True, " (shaped)"), (0.5, None, False, "")],
)
def test_shaping(reward: float, rollouts: int | None, shaped: bool, suffix: str) -> None:
    """Fractional reward × rollouts_per_step means a shaper is active."""
    job = _rl(healthy_rl(reward=[reward] * 12), summary_kw={"rollouts_per_step": rollouts})
    detail = judge(job)
    assert ("shaping-active" in detail.report.flags) is shaped
    assert detail.display_name == "rl-run" + suffix


@pytest.mark.parametrize(
    ("name", "labels", "memory", "probe"),
    [
        ("rl-run", {}, None, False),  # no memory: cannot know what is new
        # memory holding no setting of this cluster (a fresh store): judged as without it, or
        # every run already running would read new
        ("rl-run", {}, SweepMemory(), False),
        ("rl-run", {}, SweepMemory(seen_configs={"alpha": ["rl-other"]}), True),
        ("rl-run-r2", {}, SweepMemory(seen_configs={"alpha": ["rl-run"]}), False),
        ("rl-run", {"image": "v2"}, SweepMemory(seen_configs={"alpha": ["rl-run"]}), True),
        ("rl-run", {"image": "v2"}, SweepMemory(seen_configs={"alpha": ["image=v2"]}), False),
        ("rl-smoke-test", {}, None, True),
        ("rl-debug", {}, None, True),
        ("rl-latest-contest", {}, None, False),  # near-miss: "test" inside a word
    ],
)
def test_deep_probe(
    name: str, labels: dict[str, str], memory: SweepMemory | None, probe: bool
) -> None:
    """New settings and smoke/test/debug runs get a deep-probe recommendation."""
    job = judge(_rl(name=name, rec={"labels": labels}), memory=memory).report
    assert ("deep-probe" in job.flags) is probe
    if probe:
        assert job.recommendation is not None and job.recommendation.action == "deep_probe"
        assert "rl-job-health-deep-dive" in job.recommendation.why


def test_deep_probe_yields_to_collapse() -> None:
    """A collapsing new run gets cancel_and_salvage, not deep_probe."""
    job = judge(_rl(COLLAPSING, name="rl-smoke")).report
    assert "deep-probe" in job.flags
    assert job.recommendation is not None and job.recommendation.action == "cancel_and_salvage"


def test_agentic_pass_rate_joins_the_collapse_rule() -> None:
    """With a trial tree, a pass-rate under 10% is a signal and can complete a collapse."""
    trials = tree([trial(0.0)] * 95 + [trial(1.0)] * 5)
    series = healthy_rl(grad_norm=with_last([0.2] * 12, 3.2))
    job = judge(_rl(series, trials=trials)).report
    assert {"collapse", "signal:pass_rate", "signal:grad_norm"} <= set(job.flags)


def test_standard_rl_without_trials_is_not_an_error() -> None:
    """No trial tree: pass-rate is not evaluated and nothing complains."""
    job = judge(_rl(healthy_rl(grad_norm=with_last([0.2] * 12, 3.2)))).report
    assert job.flags == ["signal:grad_norm"] and job.verdict == "healthy"


@pytest.mark.parametrize(
    ("job", "flags", "verdict"),
    [
        # in bring-up: started 10 minutes ago, nothing logged yet (past the bring-up window an
        # empty log is no buffer filling: tests/report/test_rulebook_absence.py)
        (facts(record(start_time=NOW - timedelta(minutes=10)), ()), ["buffer-filling"],
         "buffering"),
        (facts(record(), points(healthy_rl(3)), summary_kw={"bring_up": True}),
         ["buffer-filling"], "buffering"),
        (facts(record(state=JobState.PENDING, reason="Priority"), (), log_fetch=None,
               no_summary=True), ["buffer-filling"], "buffering"),
        # a failed fetch is not an idle job
        (facts(record(), (), log_fetch=log("failed", error="kubelet 500")), ["fetch-failed"],
         "unknown"),
        (facts(record(), (), log_fetch=log("missing", path=None)), ["log-missing"], "unknown"),
        (facts(record(), points(healthy_rl()), log_fetch=log("mismatch", path="/w/x_100.out")),
         ["log-path-mismatch"], "healthy"),
    ],
)
def test_bring_up_and_log_status(job: JobFacts, flags: list[str], verdict: str) -> None:
    """No step yet is buffering; fetch problems are flagged and never read as death."""
    detail = judge(job)
    assert detail.report.flags == flags and detail.report.verdict == verdict


@pytest.mark.parametrize("state", [JobState.CANCELLED, JobState.FAILED])
def test_a_job_that_never_ran_is_not_missing_its_log(state: JobState) -> None:
    """Cancelled while pending (or failed on a dependency never satisfied): no node, no run
    time, so no log was ever written; it was flagged ``log-missing`` (judged unknown). A job
    that ran and left no log still is flagged."""
    never = record(state=state, start_time=NOW, end_time=NOW, elapsed_s=0, nodes=None)
    job = judge(facts(never, (), log_fetch=log("missing", path=None))).report
    assert "log-missing" not in job.flags and job.verdict != "unknown"
    ran = record(state=state, end_time=NOW, nodes="vm")
    assert "log-missing" in judge(facts(ran, (), log_fetch=log("missing", path=None))).report.flags


def test_pending_job_without_log_fetch_is_buffering() -> None:
    """A PENDING job (no log at all) is queue admission: buffer-filling, trend names the reason."""
    job = judge(facts(record(state=JobState.PENDING, reason="Priority"), no_summary=True)).report
    assert job.trend == "Pending (Priority)" and "log-missing" not in job.flags


@pytest.mark.parametrize(
    ("silent_min", "sec_per_step", "stalled"),
    [(120, 60.0, True), (29, 60.0, False), (31, 60.0, True), (45, 600.0, False),
     (51, 600.0, True)],
)
def test_stall(silent_min: int, sec_per_step: float, stalled: bool) -> None:
    """No new step for max(5 × sec_per_step, 30 min) while RUNNING is a stall."""
    last = NOW - timedelta(minutes=silent_min)
    job = facts(record(), points(healthy_rl(), last_at=last),
                summary_kw={"sec_per_step": sec_per_step, "last_timestamp": last},
                log_fetch=log(mtime=last))
    report = judge(job).report
    assert ("stall" in report.flags) is stalled
    assert (report.verdict == "stalled") is stalled


@pytest.mark.parametrize("tz_offset_h", [-8, 0, 9])
def test_stall_ignores_the_log_clock_zone(tz_offset_h: int) -> None:
    """Naive log timestamps in any zone never fake a stall when the last line is a step."""
    local = NOW.replace(tzinfo=None) + timedelta(hours=tz_offset_h)
    job = facts(record(), points(healthy_rl(), last_at=local),
                summary_kw={"last_timestamp": local}, log_fetch=log(mtime=NOW))
    assert "stall" not in judge(job).report.flags


def test_heartbeat_noise_after_the_last_step_is_still_a_stall() -> None:
    """Lines after the last step keep mtime fresh; the in-log gap since that step still counts."""
    local = NOW.replace(tzinfo=None) + timedelta(hours=5)
    job = facts(record(), points(healthy_rl(), last_at=local - timedelta(minutes=90)),
                summary_kw={"last_timestamp": local}, log_fetch=log(mtime=NOW))
    report = judge(job).report
    assert "stall" in report.flags and report.verdict == "stalled"


def test_stall_not_judged_from_a_failed_fetch() -> None:
    """An old history with a failed fetch is unknown, not stalled."""
    last = NOW - timedelta(hours=5)
    job = facts(record(), points(healthy_rl(), last_at=last), log_fetch=log("failed"))
    assert judge(job).report.verdict == "unknown"


def test_history_argument_overrides_the_log_points() -> None:
    """The merged history from the caller is what the rules read."""
    job = _rl()
    detail = judge(job, history=points(COLLAPSING))
    assert detail.report.verdict == "collapse" and len(detail.history) == 12


def test_chain_restart_timeout() -> None:
    """A TIMEOUT whose afterany successor is pending is a normal restart."""
    job = _rl(rec={"state": JobState.TIMEOUT, "end_time": NOW})
    succ = record("rl-run", "4242", JobState.PENDING, depends_on=("100",))
    report = judge(job, others=[succ]).report
    assert (report.verdict, report.successor, report.flags) == ("restarting", "4242",
                                                               ["chain-restart"])
    assert report.trend == "Walltime TIMEOUT; normal chain restart → 4242"
    assert report.recommendation is None


def test_timeout_without_successor_is_failed() -> None:
    """A TIMEOUT with nothing queued after it needs a diagnosis and names the banked step."""
    job = _rl(rec={"state": JobState.TIMEOUT}, checkpoints=[10, 20])
    report = judge(job).report
    assert report.verdict == "failed" and report.successor is None and report.banked_step == 20
    assert report.recommendation is not None and "banked step 20" in report.recommendation.why


def test_failed_job_quotes_its_first_fault() -> None:
    """A genuine FAILED job: fault flags, verdict failed, a dated incident note asked for."""
    faults = (Fault(kind="sigterm", line_no=90, excerpt="SIGTERM"),
              Fault(kind="raylet-died", line_no=40, excerpt="The raylet died unexpectedly"))
    job = _rl(rec={"state": JobState.FAILED, "exit_code": 1}, summary_kw={"faults": faults})
    report = judge(job).report
    assert report.flags == ["raylet-died", "sigterm"] and report.verdict == "failed"
    assert report.trend == "raylet-died: The raylet died unexpectedly"
    assert report.recommendation is not None
    assert report.recommendation.why == (
        "raylet-died: The raylet died unexpectedly; find the cause before resubmitting, "
        "and record it in a dated incident note"
    )


def test_silent_wedge() -> None:
    """Kubernetes RUNNING with zero pods is terminal."""
    job = _rl(rec={"pods_total": 0})
    report = judge(job).report
    assert "silent-wedge" in report.flags and report.verdict == "failed"
    assert report.trend == "silent wedge: running but 0 pods"


def test_pods_present_is_not_a_wedge() -> None:
    """Near-miss: pods exist (or SLURM, where pods_total is None)."""
    assert "silent-wedge" not in judge(_rl(rec={"pods_total": 4})).report.flags
    assert "silent-wedge" not in judge(_rl()).report.flags


def test_live_fault_is_a_warning() -> None:
    """A traceback in a still-running job's log is a warning, not a death."""
    fault = Fault(kind="traceback", line_no=3, excerpt="RuntimeError: boom")
    report = judge(_rl(summary_kw={"faults": (fault,)})).report
    assert report.flags == ["traceback"] and report.verdict == "warning"


def test_summary_without_step_uses_progress_bar() -> None:
    """Progress comes from the bar when no metric step has been logged beyond it."""
    from probes.models import ProgressBar

    job = facts(record(), points(healthy_rl(3)),
                summary_kw={"progress": ProgressBar(current=7, total=80)})
    report = judge(job).report
    assert (report.step, report.total_steps) == (7, 80)
    assert summary().line_count == 100


@pytest.mark.parametrize(
    ("steps", "others", "memory", "probed"),
    [
        (5, (), None, True),  # a brand-new launch, one-off sweep: deep-probe it
        (12, (), None, False),  # past its first steps: the row has a track record
        (5, (record(job_id="99", state=JobState.TIMEOUT),), None, False),  # a resumed chain
        (5, (), SweepMemory(seen_configs={"alpha": [run_fingerprint(record())]}), False),
    ],
)
def test_first_launch_without_memory_is_deep_probed(
    steps: int, others: tuple[Any, ...], memory: SweepMemory | None, probed: bool,
) -> None:
    """Without sweep memory a first launch in its first steps gets deep-probe; near-misses don't."""
    job = facts(record(), points(healthy_rl(steps)))
    detail = judge(job, others=others, memory=memory)
    assert ("deep-probe" in detail.report.flags) is probed
    if probed:
        assert detail.report.recommendation is not None
        assert detail.report.recommendation.action == "deep_probe"
