"""Sweep-level judgement: ordering, display names, catch-all rows, SFT grids."""

from __future__ import annotations

from typing import get_args

import pytest

from probes.models import Fault, FaultKind, JobFacts, JobState
from report.judge import build_report
from report.judge_other import type_label
from report.models import Flag
from report.settings import ReportSettings
from tests.report.factories import (
    NOW,
    cluster,
    facts,
    healthy_rl,
    judge,
    log,
    logged_job,
    points,
    record,
)

SETTINGS = ReportSettings()


def test_order_and_display_names() -> None:
    """Jobs sort by bucket, cluster, then numeric job id; names get a cluster prefix."""
    alpha = cluster("alpha", [logged_job("sft-a-1", "20"), logged_job("rl-x", "100"),
                              logged_job("rl-y", "9")])
    beta = cluster("beta", [logged_job("rl-z", "5", cluster="beta")], kind="kubernetes")
    report, details = build_report([alpha, beta], settings=SETTINGS, now=NOW)
    assert [(j.cluster, j.job_id) for j in report.jobs] == [
        ("alpha", "9"), ("alpha", "100"), ("beta", "5"), ("alpha", "20"),
    ]
    assert details[("alpha", "9")].display_name == "alpha/rl-y"
    assert [c.name for c in report.clusters] == ["alpha", "beta"]
    assert report.generated_at == NOW and list(details) == [
        (j.cluster, j.job_id) for j in report.jobs
    ]


def test_single_cluster_names_are_bare() -> None:
    """With one cluster reporting jobs, no prefix (an unreachable empty one does not count)."""
    alpha = cluster("alpha", [logged_job("rl-x", "1")])
    down = cluster("beta", [], status="unreachable", detail="ssh: timeout")
    report, details = build_report([alpha, down], settings=SETTINGS, now=NOW)
    assert details[("alpha", "1")].display_name == "rl-x"
    assert report.clusters[1].status == "unreachable" and report.clusters[1].detail


def test_histories_are_used_per_job() -> None:
    """The caller's merged history replaces the log's points for that job only."""
    job = logged_job("rl-x", "1")
    longer = points(healthy_rl(30))
    _, details = build_report([cluster("alpha", [job])], settings=SETTINGS, now=NOW,
                              histories={("alpha", "1"): longer})
    assert details[("alpha", "1")].report.step == 30


@pytest.mark.parametrize(
    ("name", "label"),
    [
        ("consolidate-swe-rows", "consolidate"),
        ("pretokenize-mix", "pretokenize"),
        ("rl-upload-qwen", "RL upload"),
        ("gpu-ci", "gpu-ci"),
        ("nightly-ci-run", "gpu-ci"),
        ("build-image-vllm", "image build"),
        ("feature-smoke", "smoke test"),
        ("grid-probe-bs", "probe"),
        ("something", "ad-hoc"),
    ],
)
def test_type_label(name: str, label: str) -> None:
    """The catch-all Type column is guessed from the name."""
    assert type_label(name) == label


def test_catch_all_row() -> None:
    """A catch-all job gets its type, a note from the log's summary line, and its state."""
    text = "collecting ...\n===== 2 passed in 3.1s =====\n"
    job = facts(record("gpu-ci", state=JobState.COMPLETED), log_fetch=log(text=text))
    detail = judge(job)
    assert detail.report.bucket == "other" and detail.type_label == "gpu-ci"
    assert detail.note == "2 passed in 3.1s" and detail.report.verdict == "done"
    assert detail.report.recommendation is None


def test_failed_catch_all_is_diagnosed() -> None:
    """A FAILED catch-all job is a genuine failure with a diagnosis, quoting the log's error
    line when no known fault names it."""
    job = facts(record("consolidate-x", state=JobState.FAILED, exit_code=2),
                log_fetch=log(text="Error: bucket not found\n"))
    report = judge(job).report
    assert report.verdict == "failed"
    assert report.recommendation is not None
    assert report.recommendation.why == \
        "FAILED exit 2: Error: bucket not found; find the cause before resubmitting, and " \
        "record it in a dated incident note"


def _cell(name: str, job_id: str, state: JobState, step: int, total: int) -> JobFacts:
    return facts(record(name, job_id, state), points({"loss": [1.0] * step}),
                 summary_kw={"total_steps": total, "sec_per_step": 10.0})


def test_sft_grid_rollup() -> None:
    """Grid cells: progress and ETA per running cell, deduped pending, done, long pole."""
    jobs = [
        _cell("sft-grid-7b", "1", JobState.RUNNING, 50, 100),
        _cell("sft-grid-72b", "2", JobState.RUNNING, 10, 1000),
        _cell("sft-grid-72b", "3", JobState.PENDING, 0, 1000),  # resume copy of a running cell
        _cell("sft-grid-1b", "4", JobState.PENDING, 0, 100),
        _cell("sft-grid-1b", "5", JobState.PENDING, 0, 100),  # chain copy
        _cell("sft-grid-3b", "6", JobState.COMPLETED, 100, 100),
        _cell("sft-solo", "7", JobState.RUNNING, 5, 10),  # a lone job is no grid
    ]
    report, _ = build_report([cluster("alpha", jobs)], settings=SETTINGS, now=NOW)
    [grid] = report.grid
    assert (grid.grid, grid.running, grid.pending_unique, grid.done) == ("sft-grid", 2, 1, 1)
    assert grid.long_pole == "sft-grid-72b"
    cells = {c.cell: c for c in grid.cells}
    assert cells["sft-grid-7b"].progress_pct == 50.0 and cells["sft-grid-7b"].eta_s == 500.0
    assert cells["sft-grid-72b"].eta_s == 9900.0


def test_grid_label_groups_unrelated_names() -> None:
    """Jobs sharing a grid label form one grid whatever their names."""
    a = facts(record("sft-alpha", "1", labels={"grid": "g1"}), points({"loss": [1.0]}))
    b = facts(record("sft-beta", "2", JobState.PENDING, labels={"grid": "g1"}))
    report, _ = build_report([cluster("alpha", [a, b])], settings=SETTINGS, now=NOW)
    assert [(g.grid, g.running, g.pending_unique) for g in report.grid] == [("g1", 1, 1)]


@pytest.mark.parametrize("kind", get_args(FaultKind))
def test_every_terminal_signal_kind_is_its_own_flag(kind: str) -> None:
    """A terminal-signal fault raises the flag of its own name; ``time-limit`` (the TIMEOUT
    itself) and ``task-exit`` (srun's task-end line: the FAILED state says it) add none, and
    are no contract flag.

    ``Flag`` is built from the probes' fault vocabulary, so a new kind cannot go missing.
    """
    fault = Fault(kind=kind, line_no=3, excerpt="x")
    job = judge(facts(record("sft-x", "1", JobState.FAILED), summary_kw={"faults": (fault,)}))
    flags: tuple[str, ...] = get_args(Flag)
    if kind in ("time-limit", "task-exit"):
        assert kind not in flags and kind not in job.report.flags
    else:
        assert kind in flags and kind in job.report.flags
