"""Text, JSON and single-job rendering: header line, contract keys, NaN safety, job detail."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from rich.cells import cell_len

from probes.models import MetricPoint
from report.models import (
    ClusterReport,
    GridCell,
    GridRollup,
    JobDetail,
    JobReport,
    Recommendation,
    Report,
    SignalEvidence,
)
from report.render import (
    format_timestamp,
    render_job_detail,
    render_job_json,
    render_json,
    render_text,
)
from tests.report.factories import report_job

NOW = datetime(2026, 11, 30, 16, 0, tzinfo=UTC)
CONTRACT_JOB_KEYS = {
    "cluster", "job_id", "name", "user", "bucket", "state", "elapsed_s", "step", "total_steps",
    "banked_step", "metrics", "flags", "verdict", "trend", "successor", "log_path",
    "recommendation",
}


def make_job(name: str, bucket: str, **fields: Any) -> JobReport:
    """A quiet JobReport (:func:`report_job`) with the id and elapsed time the goldens show."""
    return report_job(name, bucket, **{"job_id": "1001", "elapsed_s": 600, **fields})


def strict_loads(text: str) -> Any:
    """``json.loads`` that refuses NaN/Infinity, as strict consumers do."""
    def refuse(token: str) -> Any:
        raise ValueError(f"non-standard JSON constant {token}")

    return json.loads(text, parse_constant=refuse)


CLUSTERS = [
    ClusterReport(name="alpha", kind="slurm", status="ok", detail=None),
    ClusterReport(name="beta", kind="kubernetes", status="unreachable",
                  detail="connect timed out after 10s"),
    ClusterReport(name="gamma", kind="replay", status="inactive", detail=None),
]
COLLAPSING = make_job(
    "rl-grpo-7b", "rl", step=42, total_steps=80, banked_step=40, verdict="collapse",
    metrics={"reward": 0.31, "policy_loss": -0.01, "grad_norm": 3.2, "entropy": 0.21,
             "log_ratio_abs_mean": 0.05, "loss_scale": float("nan"),
             "top_exception": "AgentTimeoutError"},
    flags=["collapse", "signal:grad_norm", "signal:entropy"],
    trend="grad_norm 3.2 (>1.0), entropy −45% vs trend", log_path="/w/rl-grpo-7b_1001.out",
    recommendation=Recommendation(action="cancel_and_salvage", why="2 signals at step 42"),
)
REPORT = Report(
    generated_at=NOW, clusters=CLUSTERS, jobs=[COLLAPSING],
    grid=[GridRollup(grid="g", running=1, pending_unique=0, done=0, long_pole=None,
                     cells=[GridCell(cell="c", job_id="9", progress_pct=5.0, eta_s=60.0)])],
)


def history() -> tuple[MetricPoint, ...]:
    """Twelve RL steps ending in a grad-norm spike and a NaN policy loss."""
    points = [
        MetricPoint(step=step, values={"reward": 0.3 + step / 100, "grad_norm": 0.2,
                                       "entropy": 0.5, "policy_loss": -0.004})
        for step in range(31, 42)
    ]
    points.append(MetricPoint(step=42, values={"reward": 0.31, "grad_norm": 3.2,
                                               "entropy": 0.21, "policy_loss": float("nan")}))
    return tuple(points)


DETAIL = JobDetail(
    report=COLLAPSING, history=history(), collapse_step=42, workdir="/w",
    display_name="<run> (shaped)", faults=("Traceback at line 812",),
    log_excerpt="step 41 ok\nstep 42 grad_norm=3.2",
    evidence=(
        SignalEvidence(signal="grad_norm", step=42, value=3.2, window_mean=0.2,
                       window=(0.2,) * 10, fired=True, why="3.2 > 1.0"),
        SignalEvidence(signal="entropy", step=42, value=0.21, window_mean=0.5,
                       window=(0.5, float("nan")), fired=True, why="−58% vs trend"),
        SignalEvidence(signal="log_ratio", step=42, value=0.05, window_mean=None,
                       fired=False, why="window too short"),
    ),
)


def test_text_header_lists_cluster_status() -> None:
    """The header names the time, the reachable clusters, unreachable ones with why, inactive."""
    first = render_text(REPORT, {}, width=200).split("\n")[0]
    assert first == ("Jobs at 2026-11-30T16:00:00Z · alpha ok · beta UNREACHABLE "
                     "(connect timed out after 10s) · inactive: gamma")


def test_text_has_titled_tables() -> None:
    """Each table follows its title line, after a blank line."""
    lines = render_text(REPORT, {}).split("\n")
    rl = lines.index("RL")
    assert lines[rl - 1] == ""
    assert lines[rl + 1].startswith("┌")
    assert any(line.startswith("SFT grid g: running 1") for line in lines)


def test_text_without_jobs() -> None:
    """An empty report says so under the header."""
    empty = Report(generated_at=NOW, clusters=CLUSTERS[:1], jobs=[])
    assert render_text(empty, {}) == (
        "Jobs at 2026-11-30T16:00:00Z · alpha ok\n\nNo active or recent jobs.")


@pytest.mark.parametrize("width", [60, 80, 100, 120])
def test_text_fits_width(width: int) -> None:
    """Every line of the text report, header included, fits the width."""
    text = render_text(REPORT, {}, width=width)
    assert max(cell_len(line) for line in text.split("\n")) <= width


def test_json_has_exactly_contract_keys() -> None:
    """The JSON object has the §3 top-level keys and exactly the contract keys per job."""
    obj = strict_loads(render_json(REPORT))
    assert set(obj) == {"generated_at", "clusters", "jobs"}
    assert obj["clusters"][1] == {"name": "beta", "kind": "kubernetes", "status": "unreachable",
                                  "detail": "connect timed out after 10s"}
    (job,) = obj["jobs"]
    assert set(job) == CONTRACT_JOB_KEYS
    assert job["state"] == "RUNNING"
    assert job["recommendation"] == {"action": "cancel_and_salvage",
                                     "why": "2 signals at step 42"}


def test_json_drops_non_finite_metrics() -> None:
    """A NaN metric is left out of ``metrics`` (the flags carry it) and the JSON stays strict."""
    job = strict_loads(render_json(REPORT))["jobs"][0]
    assert "loss_scale" not in job["metrics"]
    assert job["metrics"]["grad_norm"] == 3.2
    assert job["metrics"]["top_exception"] == "AgentTimeoutError"


@pytest.mark.parametrize(
    ("moment", "expected"),
    [
        (datetime(2026, 11, 30, 16, 0, tzinfo=UTC), "2026-11-30T16:00:00Z"),
        (datetime(2026, 11, 30, 16, 0, 5, 123456, tzinfo=UTC), "2026-11-30T16:00:05Z"),
        (datetime(2026, 11, 30, 17, 0, tzinfo=timezone(timedelta(hours=1))),
         "2026-11-30T16:00:00Z"),
        (datetime(2026, 11, 30, 16, 0), "2026-11-30T16:00:00Z"),
    ],
)
def test_generated_at_format(moment: datetime, expected: str) -> None:
    """``generated_at`` is UTC with a Z suffix and no microseconds."""
    assert format_timestamp(moment) == expected
    report = Report(generated_at=moment, clusters=[], jobs=[])
    assert strict_loads(render_json(report))["generated_at"] == expected


def test_json_excludes_grid() -> None:
    """The SFT grid rollup is not part of the JSON contract."""
    assert "grid" not in render_json(REPORT)


def test_job_detail_sections() -> None:
    """The job view has its row, history with sparklines, flags, evidence, log and advice."""
    text = render_job_detail(DETAIL)
    lines = text.split("\n")
    assert lines[0] == ("<run> (shaped) [COLLAPSE] — alpha:1001 · RL · RUNNING · "
                        "verdict collapse")
    assert lines[1].startswith("┌")
    assert "History (last 10 points)" in lines
    assert any(line.startswith("reward") and "▁" in line for line in lines)
    assert any(line.startswith("pol_loss") and "×" in line for line in lines)
    assert "Flags: collapse, signal:grad_norm, signal:entropy" in lines
    assert "Signal evidence (value vs window)" in lines
    assert "Log: /w/rl-grpo-7b_1001.out (workdir /w)" in lines
    assert "Recommendation: cancel_and_salvage — 2 signals at step 42" in lines
    assert "Banked step: 40" in lines
    assert "  step 42 grad_norm=3.2" in lines


def test_job_detail_history_rows() -> None:
    """The history table holds the last ten steps with the bucket's key metrics."""
    text = render_job_detail(DETAIL)
    assert "│ 32 " not in text
    assert "│ 33 " in text
    assert "│ 42   │ 0.310  │ NaN" in text


@pytest.mark.parametrize("width", [60, 80, 100, 120])
def test_job_detail_fits_width(width: int) -> None:
    """Every line of the job view fits the width."""
    text = render_job_detail(DETAIL, width=width)
    assert max(cell_len(line) for line in text.split("\n")) <= width


def test_job_detail_of_buffering_job() -> None:
    """A job without history or evidence still renders its buffer row and its facts."""
    job = make_job("rl-new", "rl", verdict="buffering", flags=["buffer-filling"])
    text = render_job_detail(JobDetail(report=job))
    assert "│ Bucket │" in text.split("\n")[2]
    assert "Flags: buffer-filling" in text
    assert "Log: not found" in text
    assert "Recommendation: none" in text


def test_job_detail_prints_no_control_character_a_cluster_sent() -> None:
    """A job name, log path, workdir or fault holding terminal escapes (ESC, BEL, OSC) is
    shown with spaces in their place, in the heading and the facts as in the cells."""
    job = make_job("sft-\x1b[31m<!channel>\x1b]52;c;cHdu\x07", "sft",
                   log_path="/scratch/\x1b[2Jrun.out")
    detail = JobDetail(report=job, workdir="/scratch/\x07w", faults=("NCCL \x1b[0merror",))
    text = render_job_detail(detail)
    assert not [ch for ch in text if ch != "\n" and not ch.isprintable()]
    assert "sft- [31m<!channel> ]52;c;cHdu " in text.split("\n")[0]
    assert "Log: /scratch/ [2Jrun.out (workdir /scratch/ w)" in text
    assert "Faults: NCCL  [0merror" in text


def test_sweep_text_prints_no_control_character_a_cluster_sent() -> None:
    """A grid named from hostile job names (``sbatch -J $'sft-\\e]0;PWN\\a-lr1'`` and
    ``-lr2``: on the real SLURM its title printed ESC/OSC/BEL raw and retitled the terminal)
    and a cluster's detail are shown with spaces in place of control characters, as the
    cells and ``jobtables job`` already were."""
    report = REPORT.model_copy(update={
        "clusters": [ClusterReport(name="beta", kind="kubernetes", status="unreachable",
                                   detail="HTTP 502 \x1b]0;x\x07 Bad Gateway")],
        "grid": [REPORT.grid[0].model_copy(update={"grid": "sft-\x1b]0;pwn\x07"})]})
    text = render_text(report, {})
    assert not [ch for ch in text if ch != "\n" and not ch.isprintable()]
    assert any(line.startswith("SFT grid sft- ]0;pwn : running 1") for line in text.split("\n"))


def test_job_json_adds_detail_keys() -> None:
    """The job JSON is the contract object plus history, evidence and detail; NaN becomes null."""
    obj = strict_loads(render_job_json(DETAIL))
    assert set(obj) >= CONTRACT_JOB_KEYS
    assert {"history", "evidence", "collapse_step", "faults", "workdir"} <= set(obj)
    assert obj["history"][-1] == {"step": 42, "wall_time": None, "values": {
        "reward": 0.31, "grad_norm": 3.2, "entropy": 0.21, "policy_loss": None}}
    assert obj["evidence"][1]["window"] == [0.5, None]
    assert obj["evidence"][0]["fired"] is True
    assert obj["collapse_step"] == 42
