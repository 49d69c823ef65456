"""Incidents on disk and in Redis, failure signatures, cleanup lines, and the /job chart."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from bot.chart import chart_metrics, render_history_png
from bot.incidents import (
    FollowUps,
    cleanup_line,
    failure_record,
    failure_signature,
    write_incident,
)
from bot.store import RedisStore
from probes.models import MetricPoint
from report.models import JobDetail, Recommendation
from tests.bot.builders import T0, FakeClock, collapsing, detail, job, sweep_result
from tests.bot.conftest import make_config

PNG = b"\x89PNG\r\n\x1a\n"


def failed(job_id: str, name: str = "sft-llama8b-longctx",
           why: str = "shard 7 is corrupt") -> JobDetail:
    rec = Recommendation(action="diagnose", why=f"RuntimeError: {why}")
    return detail(job(job_id, name, bucket="sft", state="FAILED", verdict="failed",
                      flags=("traceback",), recommendation=rec))


def test_signature_ignores_attempt_numbers_but_not_the_error() -> None:
    """Same failure on another attempt has the same signature; a different error does not."""
    first = failed("100", "sft-llama8b-longctx-try1", "shard 7 is corrupt")
    again = failed("200", "sft-llama8b-longctx-try2", "shard 12 is corrupt")
    other = failed("300", "sft-llama8b-longctx-try3", "CUDA out of memory")
    assert failure_signature(first) == failure_signature(again)
    assert failure_signature(first) != failure_signature(other)


def test_incident_file_is_dated_json(tmp_path: Path) -> None:
    """A record lands at <dir>/<date>/<id>.json and reads back as the same data."""
    record = failure_record(failed("100"), None, at=T0)
    path = write_incident(record, tmp_path)
    assert path.parent.name == "2026-11-30"
    data = json.loads(path.read_text())
    assert data["diagnosis"] == "RuntimeError: shard 7 is corrupt"
    assert data["kind"] == "failure" and not list(path.parent.glob(".incident-*"))


@pytest.mark.parametrize(
    ("state", "action", "expected"),
    [
        ("COMPLETED", "cleanup", "rl-standard-job-cleanup"),
        ("COMPLETED", "none", None),      # near miss: completed without a cleanup advice
        ("RUNNING", "cleanup", None),     # near miss: not completed yet
    ],
)
def test_cleanup_line(state: str, action: str, expected: str | None) -> None:
    """A completed job gets its cleanup routine named, and nothing else does."""
    rec = Recommendation.model_validate({"action": action, "why": "run rl-standard-job-cleanup"})
    line = cleanup_line(job("7", "rl-a", state=state, verdict="done", recommendation=rec))
    if expected is None:
        assert line is None
    else:
        assert line is not None and expected in line


async def test_failures_filed_once_and_recurrence_detected(
    store: RedisStore, prefix: str, tmp_path: Path,
) -> None:
    """A failed job is filed once; the same signature on a later attempt is recurring."""
    config = make_config(prefix, tmp_path)
    followups = FollowUps(store=store, clock=FakeClock())
    lines = await followups.process(sweep_result([failed("100", "sft-x-try1")]), config)
    assert len(lines) == 1 and "recurring" not in lines[0]
    assert await followups.process(sweep_result([failed("100", "sft-x-try1")]), config) == []
    (line,) = await followups.process(sweep_result([failed("200", "sft-x-try2")]), config)
    assert "recurring-failure" in line
    files = sorted((tmp_path / "incidents").rglob("*.json"))
    assert len(files) == 2
    assert json.loads(files[-1].read_text())["recurring"] is True


def test_chart_draws_the_bucket_metrics() -> None:
    """RL charts reward, entropy and grad norm; the PNG is a real PNG."""
    sick = collapsing()
    assert chart_metrics(sick) == ("reward", "entropy", "grad_norm")
    png = render_history_png(sick)
    assert png is not None and png.startswith(PNG)


def test_chart_keeps_nan_visible_and_skips_empty_history() -> None:
    """SFT with a NaN loss still renders; a run without history gets no chart."""
    history = tuple(MetricPoint(step=s, values={"loss": math.nan if s == 5 else 1.0 / s,
                                                "grad_norm": 0.5}) for s in range(1, 10))
    sft = detail(job("9", "sft-a", bucket="sft"), history=history)
    assert chart_metrics(sft) == ("loss", "grad_norm")
    assert (render_history_png(sft) or b"").startswith(PNG)
    assert render_history_png(detail(job("10", "rl-empty"))) is None
