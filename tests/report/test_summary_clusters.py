"""The sweep's summary lines name a job with its cluster when more than one cluster reports.

The parent message of a scheduled sweep and the CLI's ``--format slack`` header list the jobs
needing a human by name. Two clusters may each run a job of one name (a grid arm relaunched
on the second cluster), and the contract shows the cluster in tables once more than one
reports: the summary read '2 FAILED (sft-a, sft-a)', saying neither where to look nor which.
"""

from __future__ import annotations

from datetime import UTC, datetime

from probes.models import JobState
from report.models import ClusterReport, Recommendation, Report
from report.sweep_summary import summary_lines
from tests.report.factories import report_job

NOW = datetime(2026, 11, 30, 16, 0, tzinfo=UTC)


def _ok(name: str) -> ClusterReport:
    return ClusterReport(name=name, kind="slurm", status="ok", detail=None)


def test_two_clusters_name_each_job_with_its_cluster() -> None:
    """Verdict and action names read ``cluster/name``, as the table rows, once jobs come from
    two clusters."""
    jobs = [
        report_job("sft-a", "sft", cluster="alpha", job_id="100", verdict="failed",
                   state=JobState.FAILED),
        report_job("sft-a", "sft", cluster="beta", job_id="100", verdict="failed",
                   state=JobState.FAILED),
        report_job("rl-x", "rl", cluster="beta", job_id="7", verdict="done",
                   state=JobState.COMPLETED,
                   recommendation=Recommendation(action="cleanup",
                                                 why="rl-standard-job-cleanup")),
    ]
    lines = summary_lines(Report(generated_at=NOW, clusters=[_ok("alpha"), _ok("beta")],
                                 jobs=jobs))
    assert lines == [
        "RL: 1 job · 1 done · 1 to clean up (beta/rl-x)",
        "SFT: 2 jobs · 2 FAILED (alpha/sft-a, beta/sft-a)",
    ], lines


def test_one_reporting_cluster_keeps_bare_names() -> None:
    """A second cluster that reports no job (or is down) adds no prefix: as in the tables."""
    jobs = [report_job("sft-a", "sft", cluster="alpha", job_id="100", verdict="failed",
                       state=JobState.FAILED)]
    down = ClusterReport(name="beta", kind="slurm", status="unreachable", detail="timeout")
    lines = summary_lines(Report(generated_at=NOW, clusters=[_ok("alpha"), down], jobs=jobs))
    assert lines == ["SFT: 1 job · 1 FAILED (sft-a)", "Unreachable: beta (timeout)"], lines


def test_an_inactive_cluster_is_listed_as_inactive() -> None:
    """``active = false``: skipped, and listed as inactive (contract §2) in Slack as in text
    and JSON; the summary named only unreachable clusters, so the sweep's parent message and
    ``--format slack`` never said a configured cluster was switched off."""
    jobs = [report_job("sft-a", "sft", cluster="alpha", job_id="100")]
    off = ClusterReport(name="gamma", kind="slurm", status="inactive", detail=None)
    down = ClusterReport(name="beta", kind="slurm", status="unreachable", detail="timeout")
    lines = summary_lines(Report(generated_at=NOW, clusters=[_ok("alpha"), down, off],
                                 jobs=jobs))
    assert lines[-2:] == ["Unreachable: beta (timeout)", "Inactive: gamma"], lines
