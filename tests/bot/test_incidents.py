"""Incidents on disk and in Redis, their agreement with the recurring flag, cleanup lines,
and the /job chart."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from bot.chart import chart_metrics, render_history_png
from bot.incidents import FollowUps, cleanup_line, failure_record, write_incident
from bot.store import RedisStore
from bot.sweep_result import SweepResult
from probes.models import Fault, FaultKind, JobFacts, JobState, MetricPoint
from report.judge import build_report
from report.memory import SweepMemory, next_memory
from report.models import FailureSignature, JobDetail, Recommendation
from report.settings import ReportSettings
from tests.bot.builders import T0, FakeClock, collapsing, detail, job
from tests.bot.conftest import make_config
from tests.report.factories import NOW, cluster, facts, record

PNG = b"\x89PNG\r\n\x1a\n"


def failed(job_id: str, name: str = "sft-llama8b-longctx",
           why: str = "shard 7 is corrupt") -> JobDetail:
    rec = Recommendation(action="diagnose", why=f"RuntimeError: {why}")
    return detail(job(job_id, name, bucket="sft", state="FAILED", verdict="failed",
                      flags=("traceback",), recommendation=rec))


def test_incident_file_is_dated_json(tmp_path: Path) -> None:
    """A record lands at <dir>/<date>/<id>.json and reads back as the same data."""
    record = failure_record(failed("100"), None, at=T0)
    path = write_incident(record, tmp_path)
    assert path.parent.name == "2026-11-30"
    data = json.loads(path.read_text())
    assert data["diagnosis"] == "RuntimeError: shard 7 is corrupt"
    assert data["kind"] == "failure" and not list(path.parent.glob(".incident-*"))


def test_a_jobset_s_qualified_id_files_its_incident_in_the_day_s_directory(
        tmp_path: Path) -> None:
    """A JobSet sharing a Job's name has the id ``jobset/<name>`` (9290fb7): its incident is
    one file in the day's directory, not a path into a ``...-jobset`` directory that does not
    exist (writing it failed, so its failure was never filed)."""
    record = failure_record(failed("jobset/rl-dup", name="rl-dup"), None, at=T0)
    path = write_incident(record, tmp_path)
    assert path.parent == tmp_path / "2026-11-30" and path.is_file()
    assert json.loads(path.read_text())["job_id"] == "jobset/rl-dup"


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


def judged_sweep(
    jobs: list[JobFacts], memory: SweepMemory,
) -> tuple[SweepResult, SweepMemory]:
    """One sweep through the real judge, and the memory it leaves (as the Sweeper does)."""
    clusters = [cluster("alpha", jobs)]
    report, details = build_report(clusters, settings=ReportSettings(), now=NOW, memory=memory)
    result = SweepResult(report=report, details=details, facts=tuple(clusters), started_at=NOW,
                         duration_s=0.1)
    return result, next_memory(report, details, clusters, memory)


def attempt(job_id: str, name: str, kind: FaultKind, text: str, elapsed: int) -> JobFacts:
    """A FAILED SFT attempt whose log holds one fault."""
    fault = Fault(kind=kind, line_no=5, excerpt=text)
    return facts(record(name, job_id, JobState.FAILED, elapsed_s=elapsed),
                 summary_kw={"faults": (fault,)})


async def test_failures_filed_once_and_recurrence_detected(
    store: RedisStore, prefix: str, tmp_path: Path,
) -> None:
    """A failed job is filed once; the same failure on the next attempt is recurring and
    points back at the first attempt's incident."""
    config = make_config(prefix, tmp_path)
    followups = FollowUps(store=store, clock=FakeClock())
    first = attempt("100", "sft-x-try1", "traceback", "RuntimeError: shard 7 is corrupt", 600)
    sweep, memory = judged_sweep([first], SweepMemory())
    lines = await followups.process(sweep, config)
    assert len(lines) == 1 and "recurring" not in lines[0]
    assert await followups.process(sweep, config) == []
    second = attempt("200", "sft-x-try2", "traceback", "RuntimeError: shard 12 is corrupt", 900)
    sweep, _ = judged_sweep([second], memory)
    (line,) = await followups.process(sweep, config)
    assert "recurring-failure" in line
    files = sorted((tmp_path / "incidents").rglob("*.json"))
    assert len(files) == 2
    docs = [json.loads(f.read_text()) for f in files]
    assert docs[-1]["recurring"] is True
    assert docs[-1]["previous"] == [docs[0]["id"]]


@pytest.mark.parametrize(
    ("first", "second", "recurring"),
    [
        # The same error on the next attempt, numbers aside.
        (("sft-x-r1", "oom", "CUDA out of memory (GPU 3)", 600),
         ("sft-x-r2", "oom", "CUDA out of memory (GPU 5)", 9000), True),
        # A relaunch without a numbered suffix is still the same run.
        (("sft-x", "oom", "CUDA out of memory", 600),
         ("sft-x-retry", "oom", "CUDA out of memory", 700), True),
        # SIGTERM after the same elapsed time: a fixed-interval death.
        (("sft-x-r1", "sigterm", "SIGTERM received", 14400),
         ("sft-x-r2", "sigterm", "SIGTERM received", 14100), True),
        # Near miss: SIGTERM after a different elapsed time is not recurring, although the
        # log line, the flags and the name pattern are identical.
        (("sft-x-r1", "sigterm", "SIGTERM received", 14400),
         ("sft-x-r2", "sigterm", "SIGTERM received", 3600), False),
        # A different error is a different failure.
        (("sft-x-r1", "oom", "CUDA out of memory", 600),
         ("sft-x-r2", "traceback", "KeyError: 'labels'", 600), False),
    ],
)
async def test_incident_files_agree_with_the_recurring_flag(
    store: RedisStore, prefix: str, tmp_path: Path, *,
    first: tuple[str, FaultKind, str, int], second: tuple[str, FaultKind, str, int],
    recurring: bool,
) -> None:
    """The flag and the incident files agree, because both use the judge's one signature;
    the signature the file keeps is the very one the sweep memory keeps in Redis."""
    config = make_config(prefix, tmp_path)
    followups = FollowUps(store=store, clock=FakeClock())
    sweep, memory = judged_sweep([attempt("1", *first)], SweepMemory())
    await followups.process(sweep, config)
    sweep, _ = judged_sweep([attempt("2", *second)], memory)
    await followups.process(sweep, config)
    flagged = "recurring-failure" in sweep.details[("alpha", "2")].report.flags
    docs = [json.loads(f.read_text()) for f in sorted((tmp_path / "incidents").rglob("*.json"))]
    assert [d["job_id"] for d in docs] == ["1", "2"]
    assert flagged is recurring
    assert docs[1]["recurring"] is recurring
    assert bool(docs[1]["previous"]) is recurring
    (remembered,) = memory.failure_signatures["alpha:sft-x"]
    assert FailureSignature.model_validate(docs[0]["signature"]) == remembered
    assert docs[1]["signature"] == sweep.details[("alpha", "2")].failure.model_dump(mode="json")
    stored = await store.get_doc(f"incident:{docs[1]['id']}")
    assert stored["signature"] == docs[1]["signature"]


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


def test_chart_of_unanchored_steps_draws_their_order_not_counted_steps(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A cut tail's bar-less HF dicts claim no step (``steps_unanchored``): the chart's x axis
    is their order, labelled so, with no collapse line at a counted step."""
    from matplotlib.axes import Axes

    drawn: dict[str, list[object]] = {"x": [], "label": [], "vline": []}
    real_plot = Axes.plot

    def plot(self: Axes, *args: object, **kw: object) -> object:
        drawn["x"].append(list(args[0]))  # type: ignore[call-overload]
        return real_plot(self, *args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(Axes, "plot", plot)
    monkeypatch.setattr(Axes, "axvline", lambda self, x, **kw: drawn["vline"].append(x))
    real_label = Axes.set_xlabel
    monkeypatch.setattr(Axes, "set_xlabel", lambda self, text, **kw: (
        drawn["label"].append(text), real_label(self, text, **kw))[1])
    history = tuple(MetricPoint(step=s, values={"loss": 1.0 / s, "grad_norm": 0.5})
                    for s in range(14001, 14011))
    sft = detail(job("9", "sft-a", bucket="sft"), history=history).model_copy(
        update={"steps_unanchored": True, "collapse_step": 14005})
    assert (render_history_png(sft) or b"").startswith(PNG)
    assert drawn["x"] == [list(range(1, 11))] * 2
    assert drawn["vline"] == []
    assert drawn["label"][-1] == "logged point (steps unknown)"
