"""SFT judgement: loss health, divergence red flags, OOM at start, faults, recurring failures."""

from __future__ import annotations

import math
from typing import Any

import pytest

from probes.models import Fault, JobFacts, JobState, ProgressBar
from report.judge import build_report
from report.memory import SweepMemory
from report.settings import ReportSettings
from tests.report.factories import NOW, cluster, facts, judge, points, record, with_last

NAN = math.nan


def _sft(
    loss: list[float | None] | None = None, grad: list[float | None] | None = None,
    **kw: Any,
) -> JobFacts:
    rec_kw = kw.pop("rec", {})
    state = rec_kw.pop("state", JobState.RUNNING)
    name = rec_kw.pop("name", "sft-llama-2ep")
    series = {"loss": loss or [2.0 - 0.05 * i for i in range(12)],
              "grad_norm": grad or [0.8] * 12}
    return facts(record(name, state=state, **rec_kw), points(series), **kw)


def test_healthy_sft() -> None:
    """Descending loss reads as healthy, with progress, ETA and a loss sparkline."""
    job = _sft(summary_kw={"total_steps": 916})
    report = judge(job).report
    assert (report.bucket, report.verdict, report.flags) == ("sft", "healthy", [])
    assert (report.step, report.total_steps) == (12, 916)
    assert report.trend.startswith("Loss descending; healthy, ETA 15h04m ")
    assert report.metrics["sec_per_step"] == 60.0 and "reward" not in report.metrics


def test_total_steps_prefers_the_banner_over_the_bar() -> None:
    """The banner's optimisation steps beat the bar; the bar serves when there is no banner."""
    bar = ProgressBar(current=12, total=50)
    assert judge(_sft(summary_kw={"total_steps": 916, "progress": bar})).report.total_steps == 916
    assert judge(_sft(summary_kw={"progress": bar})).report.total_steps == 50


@pytest.mark.parametrize(
    ("loss_tail", "grad_tail", "flags", "verdict"),
    [
        ((NAN,), (0.8,), ["nan-loss"], "failed"),
        ((math.inf,), (0.8,), ["nan-loss"], "failed"),
        ((0.0,), (NAN,), ["nan-loss", "grad-explosion"], "failed"),
        ((0.0,), (0.8,), [], "healthy"),  # near-miss: a zero loss with a finite grad
        ((1.4,), (8.1,), ["grad-explosion"], "warning"),  # > 10x window mean 0.8
        ((1.4,), (7.9,), [], "healthy"),  # near-miss: < 10x
        ((NAN, 1.3, 1.3, 1.3, 1.3), (0.8,) * 5, ["nan-loss"], "failed"),  # 5 steps back
        ((NAN, 1.3, 1.3, 1.3, 1.3, 1.3), (0.8,) * 6, [], "healthy"),  # 6 back: out of view
    ],
)
def test_divergence(
    loss_tail: tuple[float, ...], grad_tail: tuple[float, ...], flags: list[str], verdict: str
) -> None:
    """NaN loss (or 0 loss with NaN grad) and grad explosion on the last 5 steps."""
    loss = with_last([2.0 - 0.05 * i for i in range(12)], *loss_tail)
    report = judge(_sft(loss, with_last([0.8] * 12, *grad_tail))).report
    assert report.flags == flags and report.verdict == verdict


def test_nan_loss_fault_from_the_log() -> None:
    """A nan-loss line found by the parser raises the flag even without a NaN point."""
    fault = Fault(kind="nan-loss", line_no=7, excerpt="loss is nan, skipping")
    report = judge(_sft(summary_kw={"faults": (fault,)})).report
    assert "nan-loss" in report.flags and report.verdict == "failed"


@pytest.mark.parametrize(
    ("pts", "trend"),
    [
        (0, "CUDA OOM at first forward/backward"),
        (1, "CUDA OOM at first forward/backward"),
        (50, "oom: torch.OutOfMemoryError: CUDA out of memory"),  # near-miss: mid-run OOM
    ],
)
def test_oom_at_first_step(pts: int, trend: str) -> None:
    """An OOM before the second step is named as a first forward/backward OOM."""
    fault = Fault(kind="oom", line_no=3, excerpt="torch.OutOfMemoryError: CUDA out of memory")
    series = {"loss": [1.0] * pts} if pts else {}
    job = facts(record("sft-x", state=JobState.FAILED, exit_code=1),
                points(series) if series else (), summary_kw={"faults": (fault,)})
    report = judge(job).report
    assert report.trend.startswith(trend) and report.verdict == "failed" and "oom" in report.flags


def test_child_failed_quotes_the_first_real_traceback() -> None:
    """ChildFailedError: the trend and diagnosis quote Fault.detail, not the elastic summary."""
    fault = Fault(kind="child-failed", line_no=80,
                  excerpt="torch.distributed.elastic.multiprocessing.errors.ChildFailedError:",
                  detail="ValueError: tokenizer has no pad token")
    job = _sft(rec={"state": JobState.FAILED, "exit_code": 1}, summary_kw={"faults": (fault,)})
    report = judge(job).report
    assert report.flags == ["child-failed"]
    assert report.trend == "child-failed: ValueError: tokenizer has no pad token"
    assert report.recommendation is not None and report.recommendation.action == "diagnose"
    assert report.recommendation.why.startswith("child-failed: ValueError")


def _sigterm_job(job_id: str, elapsed: int) -> JobFacts:
    fault = Fault(kind="sigterm", line_no=9, excerpt="Received SIGTERM, shutting down")
    return _sft(rec={"state": JobState.FAILED, "exit_code": 143, "elapsed_s": elapsed,
                     "name": f"sft-llama-2ep-r{job_id}", "job_id": job_id},
                summary_kw={"faults": (fault,)})


@pytest.mark.parametrize(
    ("previous_elapsed", "recurring"),
    [(14400, True), (13500, True), (7200, False), (None, False)],
)
def test_recurring_sigterm_at_a_fixed_interval(
    previous_elapsed: int | None, recurring: bool
) -> None:
    """A SIGTERM after the same run time as the previous attempt is not transient."""
    memory = SweepMemory()
    if previous_elapsed is not None:
        from report.memory import failure_signature

        earlier = failure_signature(_sigterm_job("1", previous_elapsed), "failed")
        assert earlier is not None
        memory = SweepMemory(failure_signatures={"alpha:sft-llama-2ep": [earlier]})
    report = judge(_sigterm_job("2", 14400), memory=memory).report
    assert ("recurring-failure" in report.flags) is recurring
    if recurring:
        assert report.recommendation is not None and "not transient" in report.recommendation.why


def test_own_signature_is_not_a_recurrence() -> None:
    """A failed job still in the report does not match the signature it left itself."""
    from report.memory import failure_signature

    own = failure_signature(_sigterm_job("2", 14400), "failed")
    assert own is not None
    memory = SweepMemory(failure_signatures={"alpha:sft-llama-2ep": [own]})
    assert "recurring-failure" not in judge(_sigterm_job("2", 14400), memory=memory).report.flags


def test_completed_sft_routes_to_cleanup() -> None:
    """Completed SFT: done, cleanup via sft-job-cleanup."""
    report = judge(_sft(rec={"state": JobState.COMPLETED})).report
    assert report.verdict == "done" and report.trend == "Completed"
    assert report.recommendation is not None
    assert (report.recommendation.action, report.recommendation.why) == ("cleanup",
                                                                         "sft-job-cleanup")


def test_cancelled_is_done_without_cleanup() -> None:
    """A cancelled job is over on purpose: done, no recommendation."""
    report = judge(_sft(rec={"state": JobState.CANCELLED})).report
    assert (report.verdict, report.trend, report.recommendation) == ("done", "Cancelled", None)


@pytest.mark.parametrize(
    ("first_elapsed", "memory", "flagged"),
    [
        (14400, None, [False, True]),  # `jobtables sweep`: no memory, both attempts visible
        (14400, SweepMemory(), [False, True]),
        (3600, None, [False, False]),  # near-miss: a different interval is not the same death
    ],
)
def test_recurring_failure_within_one_sweep(
    first_elapsed: int, memory: SweepMemory | None, flagged: list[bool]
) -> None:
    """Two failed attempts of one run in the same sweep: the later one is a recurrence."""
    first = _sigterm_job("1", first_elapsed)
    second = _sigterm_job("2", 14400)
    report, _ = build_report([cluster("alpha", [second, first])], settings=ReportSettings(),
                             now=NOW, memory=memory)
    assert [("recurring-failure" in job.flags) for job in report.jobs] == flagged
