"""Datagen and eval judgement: realness gate, stranded traces, stalls, zombies, launch checks."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from probes.logs.parse import parse_log
from probes.models import InfraSignals, JobFacts, JobState, TrialTree
from tests.report.factories import NOW, facts, judge, log, record, tree, trial


def _datagen(trials: TrialTree | None = None, **kw: Any) -> JobFacts:
    rec_kw = kw.pop("rec", {})
    state = rec_kw.pop("state", JobState.RUNNING)
    t = trials if trials is not None else tree([trial(0.6)] * 40 + [trial(0.0)] * 10,
                                               chunks_done=18, chunks_total=20)
    return facts(record("datagen-swe", state=state, **rec_kw), trials=t, **kw)


def _eval(trials: TrialTree | None = None, infra: InfraSignals | None = None,
          **kw: Any) -> JobFacts:
    rec_kw = kw.pop("rec", {})
    state = rec_kw.pop("state", JobState.RUNNING)
    t = trials if trials is not None else tree([trial(1.0)] * 30 + [trial(0.0)] * 70,
                                               trials_total=300)
    summary_kw = {"infra": infra or InfraSignals(tunnel_ok=True, api_base_internal=False,
                                                 engine_ok_requests=50,
                                                 last_engine_ok_at=NOW)}
    summary_kw.update(kw.pop("summary_kw", {}))
    return facts(record("eval-qwen-swebench", state=state, **rec_kw), trials=t,
                 summary_kw=summary_kw, **kw)


def test_healthy_datagen_metrics() -> None:
    """Chunks, trials, avg_turns, Mean (harbor's own line first) and exc% fill the row."""
    report = judge(_datagen(summary_kw={"harbor_mean": 0.53})).report
    assert report.bucket == "datagen" and report.verdict == "healthy" and report.flags == []
    assert report.metrics == {"chunks_done": 18.0, "chunks_total": 20.0, "trials": 50.0,
                              "avg_turns": 3.0, "mean_reward": 0.53, "exc_pct": 0.0}
    assert report.trend == "2 chunks to go"


def test_datagen_mean_falls_back_to_trials() -> None:
    """Without harbor's Mean line the mean reward comes from the trials."""
    assert judge(_datagen()).report.metrics["mean_reward"] == pytest.approx(0.48)


@pytest.mark.parametrize(
    ("turns", "dead"), [(1, True), (2, False)],
)
def test_dead_engine(turns: int, dead: bool) -> None:
    """avg_turns ≈ 1.0 is a dead-engine run: do NOT consolidate."""
    t = tree([trial(0.0, n_turns=turns)] * 20, chunks_done=1, chunks_total=2)
    report = judge(_datagen(t)).report
    assert ("dead-engine" in report.flags) is dead
    if dead:
        assert report.verdict == "warning" and report.recommendation is not None
        assert "do NOT consolidate" in report.recommendation.why


def test_datagen_timeout_strands_traces() -> None:
    """A datagen TIMEOUT with no successor strands traces: consolidate manually."""
    report = judge(_datagen(rec={"state": JobState.TIMEOUT})).report
    assert "stranded-traces" in report.flags and report.verdict == "failed"
    assert report.recommendation is not None
    assert report.recommendation.action == "consolidate_manually"
    assert "/w/jobs" in report.recommendation.why


def test_datagen_timeout_with_successor_is_a_restart() -> None:
    """Near-miss: with a successor queued the TIMEOUT is a chain restart, nothing stranded."""
    job = _datagen(rec={"state": JobState.TIMEOUT})
    succ = record("datagen-swe", "101", JobState.PENDING, depends_on=("100",))
    report = judge(job, others=[succ]).report
    assert report.flags == ["chain-restart"] and report.verdict == "restarting"


def test_dead_engine_timeout_is_not_consolidated() -> None:
    """Stranded but dead: the recommendation says not to consolidate."""
    t = tree([trial(0.0, n_turns=1)] * 20)
    report = judge(_datagen(t, rec={"state": JobState.TIMEOUT})).report
    assert {"stranded-traces", "dead-engine"} <= set(report.flags)
    assert report.recommendation is not None and report.recommendation.action == "diagnose"


@pytest.mark.parametrize(
    ("results_min", "log_min", "hung"),
    [(180, 180, True), (180, 10, False), (60, 180, False)],
)
def test_datagen_hung_chunk(results_min: int, log_min: int, hung: bool) -> None:
    """No new result.json and no log line for 2 h while RUNNING is a hung chunk."""
    t = tree([trial()] * 10, newest_result_at=NOW - timedelta(minutes=results_min))
    quiet = NOW - timedelta(minutes=log_min)
    job = _datagen(t, log_fetch=log(mtime=quiet), summary_kw={"last_timestamp": quiet},
                   rec={"start_time": NOW - timedelta(hours=4)})  # files from this job
    report = judge(job).report
    assert ("stall" in report.flags) is hung
    assert (report.verdict == "stalled") is hung


def test_completed_datagen_cleanup() -> None:
    """Completed datagen with its tree on disk (every chunk finished): cleanup-pending via
    datagen-job-cleanup. (A tree with chunks left is no finished run:
    tests/report/test_harbor_dryrun_datagen.py.)"""
    done = tree([trial(0.6)] * 40 + [trial(0.0)] * 10, chunks_done=20, chunks_total=20)
    report = judge(_datagen(done, rec={"state": JobState.COMPLETED})).report
    assert report.flags == ["cleanup-pending"] and report.verdict == "done"
    assert report.recommendation is not None
    assert report.recommendation.why.startswith("datagen-job-cleanup: trial tree still on disk")


def test_healthy_eval() -> None:
    """Trials over the whole run, pass-rate, and all launch checks green."""
    detail = judge(_eval())
    report = detail.report
    assert report.bucket == "eval" and report.verdict == "healthy" and report.flags == []
    assert report.metrics == {"trials": 100.0, "trials_total": 300.0, "pass_rate": 0.3}
    assert detail.infra == "tunnel✓ api✓ engine✓"


@pytest.mark.parametrize(
    ("newest_min", "stalled"), [(61, True), (59, False)],
)
def test_eval_stall(newest_min: int, stalled: bool) -> None:
    """No new result.json for 60+ min while RUNNING is a stall."""
    t = tree([trial()] * 10, trials_total=300, newest_result_at=NOW - timedelta(minutes=newest_min))
    report = judge(_eval(t)).report
    assert ("stall" in report.flags) is stalled


def test_eval_with_no_results_at_all() -> None:
    """Zero result.json an hour after start is a stall; ten minutes in, it is bring-up."""
    empty = tree([], trials_total=300, newest_result_at=None)
    old = judge(_eval(empty)).report
    assert "stall" in old.flags and old.trend.startswith("STALL: no result.json at all")
    fresh = judge(_eval(empty, rec={"start_time": NOW - timedelta(minutes=10)})).report
    assert fresh.flags == ["buffer-filling"] and fresh.verdict == "buffering"


def test_zombie() -> None:
    """All trials done but the job still RUNNING: zombie, cancel."""
    t = tree([trial()] * 300, trials_total=300, newest_result_at=NOW - timedelta(minutes=30))
    report = judge(_eval(t)).report  # past zombie_grace_minutes: test_zombie_grace.py
    assert "zombie" in report.flags and report.verdict == "stalled"
    assert report.recommendation is not None
    assert report.recommendation.action == "cancel_and_salvage"
    assert report.recommendation.why == "zombie: all trials done but job RUNNING"
    assert "zombie" not in judge(_eval(tree([trial()] * 299, trials_total=300))).report.flags


def _instant(n: int) -> list[Any]:
    return [trial(None, n_output_tokens=None, started_at=NOW, finished_at=NOW)] * n


@pytest.mark.parametrize(("instant", "flagged"), [(50, True), (49, False)])
def test_instant_fail(instant: int, flagged: bool) -> None:
    """At least half of the last trials finishing instantly with no output is instant-fail."""
    t = tree([trial()] * (100 - instant) + _instant(instant), trials_total=300)
    report = judge(_eval(t)).report
    assert ("instant-fail" in report.flags) is flagged


@pytest.mark.parametrize(
    ("infra", "flags", "marks"),
    [
        (InfraSignals(tunnel_ok=True, api_base_internal=True, api_base="http://10.0.0.5:8000",
                      engine_ok_requests=5, last_engine_ok_at=NOW),
         ["api-base-internal"], "tunnel✓ api✗ engine✓"),
        (InfraSignals(tunnel_ok=False, auth_failures=3, engine_ok_requests=5,
                      last_engine_ok_at=NOW), ["auth-failures"], "tunnel✗ api? engine✓"),
        (InfraSignals(auth_failures=2), [], "tunnel? api? engine?"),  # near-miss: 2 < 3
        # idle needs both: no 200 for 10+ min AND zero running requests for 10+ min
        (InfraSignals(engine_ok_requests=5, last_engine_ok_at=NOW - timedelta(minutes=11),
                      engine_running_requests=0, engine_zero_since=NOW - timedelta(minutes=11)),
         ["engine-idle"], "tunnel? api? engine✗"),
        (InfraSignals(engine_running_requests=0, engine_zero_since=NOW - timedelta(minutes=11)),
         ["engine-idle"], "tunnel? api? engine✗"),
        # near-misses: an old 200 with no running snapshot; one fresh zero snapshot; untimed
        (InfraSignals(engine_ok_requests=5, last_engine_ok_at=NOW - timedelta(minutes=11)),
         [], "tunnel? api? engine?"),
        (InfraSignals(engine_ok_requests=5, last_engine_ok_at=NOW - timedelta(minutes=38),
                      engine_running_requests=0, engine_zero_since=NOW - timedelta(minutes=2)),
         [], "tunnel? api? engine?"),
        (InfraSignals(engine_running_requests=0), [], "tunnel? api? engine?"),
        (InfraSignals(engine_ok_requests=5, last_engine_ok_at=NOW - timedelta(minutes=9)),
         [], "tunnel? api? engine✓"),
        (InfraSignals(engine_running_requests=3), [], "tunnel? api? engine?"),
    ],
)
def test_launch_checks(infra: InfraSignals, flags: list[str], marks: str) -> None:
    """api_base, auth failures and engine idleness become flags and Infra marks."""
    detail = judge(_eval(infra=infra))
    assert detail.report.flags == flags and detail.infra == marks
    if flags:
        assert detail.report.verdict == "warning"


def test_agent_timeouts_are_not_a_problem() -> None:
    """A majority of AgentTimeoutError trials raises no flag; the trend says it is expected."""
    timeouts = [trial(0.0, exception_type="AgentTimeoutError")] * 60
    t = tree([trial(1.0)] * 40 + timeouts, trials_total=300)
    detail = judge(_eval(t))
    assert detail.report.flags == [] and detail.report.verdict == "healthy"
    assert detail.report.trend == "AgentTimeouts on top: expected on hard sets"
    assert detail.report.metrics["top_exception"] == "AgentTimeoutError"


def test_completed_eval_cleanup() -> None:
    """Completed eval (every trial of its total run) routes to eval-agentic-cleanup."""
    full = tree([trial(1.0)] * 30 + [trial(0.0)] * 70, trials_total=100)
    report = judge(_eval(full, rec={"state": JobState.COMPLETED})).report
    assert report.recommendation is not None
    assert report.recommendation.why.startswith("eval-agentic-cleanup")
    assert "cleanup-pending" in report.flags


def test_pending_eval_is_queue_admission() -> None:
    """A PENDING eval is buffer-filling, not stalled."""
    report = judge(_eval(tree([], trials_total=300), rec={"state": JobState.PENDING})).report
    assert report.flags == ["buffer-filling"] and report.verdict == "buffering"


def test_datagen_hung_chunk_on_a_cluster_east_of_utc() -> None:
    """A zone-less log clock 8 h ahead of UTC does not make a 3 h silent log look fresh."""
    t = tree([trial()] * 10, newest_result_at=NOW - timedelta(minutes=180))
    ahead = (NOW + timedelta(hours=8) - timedelta(minutes=180)).replace(tzinfo=None)
    job = _datagen(t, log_fetch=log(mtime=NOW - timedelta(minutes=180)),
                   summary_kw={"last_timestamp": ahead},
                   rec={"start_time": NOW - timedelta(hours=4)})
    assert "stall" in judge(job).report.flags


def _engine_log(last_ok: str, newest: str, *, drained_at_last_ok: bool = True) -> str:
    """An SGLang-style eval log on the cluster's zone-less local clock: 200s until ``last_ok``,
    zero running requests from then (or only at ``newest``), then chatter."""
    post = '"POST /v1/chat/completions HTTP/1.1" 200 OK'
    zero = "INFO: Decode batch. #running-req: 0, #queue-req: 0"
    return (f"[2026-11-30 07:00:00] INFO:     127.0.0.1:5 - {post}\n"
            f"[2026-11-30 07:00:01] INFO: Decode batch. #running-req: 12, #queue-req: 0\n"
            f"[{last_ok}] INFO:     127.0.0.1:5 - {post}\n"
            + (f"[{last_ok}] {zero}\n" if drained_at_last_ok else "")
            + f"[{newest}] {zero}\n")


@pytest.mark.parametrize(
    ("last_ok", "newest", "written_min_ago", "drained", "idle"),
    [
        ("2026-11-30 07:59:00", "2026-11-30 07:59:30", 0, True, False),  # UTC-8, busy now
        ("2026-11-30 07:45:00", "2026-11-30 07:59:30", 0, True, True),  # 14 min on the log clock
        ("2026-11-30 07:55:00", "2026-11-30 07:55:00", 12, True, True),  # log silent 12 min
        ("2026-11-30 07:55:00", "2026-11-30 07:57:00", 3, True, False),  # near-miss: 5 min
        # no 200 for 14 min, but the one zero snapshot is fresh: a drained queue, not idle
        ("2026-11-30 07:45:00", "2026-11-30 07:59:30", 0, False, False),
    ],
)
def test_engine_idle_on_the_log_clock(last_ok: str, newest: str, written_min_ago: int,
                                      drained: bool, idle: bool) -> None:
    """Engine idleness is measured on the log's own zone-less clock plus the file's age, so a
    cluster off UTC is not idle for hours; real silence past 10 minutes still is."""
    text = _engine_log(last_ok, newest, drained_at_last_ok=drained)
    summary = parse_log(text)
    job = facts(record("eval-qwen-swebench"), trials=tree([trial(1.0)] * 10, trials_total=300),
                log_fetch=log(text=text, mtime=NOW - timedelta(minutes=written_min_ago)),
                summary_kw=summary.model_dump(exclude={"points"}))
    assert ("engine-idle" in judge(job).report.flags) is idle


@pytest.mark.parametrize("name", ["eval-qwen-swebench", "datagen-traces"])
def test_no_trial_tree_and_no_log_time_is_no_stall(name: str) -> None:
    """A Kubernetes eval or datagen job (no trial tree to list, a pod log without mtime or
    stamps) running for hours with its progress in the log: nothing says it stopped, so it
    is not stalled (every such job past its window read ``STALL: no result.json at all``)."""
    job = facts(record(name, start_time=NOW - timedelta(hours=3), pods_total=1), trials=None,
                log_fetch=log(mtime=None), summary_kw={"harbor_done": 142, "harbor_total": 300})
    report = judge(job).report
    assert "stall" not in report.flags and report.verdict != "stalled", report.trend

def test_no_trial_tree_on_slurm_is_still_judged_by_its_age() -> None:
    """On SLURM a missing tree is a trial root not made yet: an eval three hours in with no
    result.json at all is still a stall (the Kubernetes rule above must not reach it)."""
    job = facts(record("eval-qwen-swebench", start_time=NOW - timedelta(hours=3)), trials=None,
                summary_kw={"harbor_done": 142})
    report = judge(job).report
    assert "stall" in report.flags and report.trend.startswith("STALL: no result.json at all")


def test_no_trial_tree_but_a_silent_log_is_a_stall() -> None:
    """The same eval whose log's last stamp is 2 hours old: the log says it stopped."""
    job = facts(record("eval-qwen-swebench", start_time=NOW - timedelta(hours=3), pods_total=1),
                trials=None, log_fetch=log(mtime=None),
                summary_kw={"harbor_done": 142, "last_timestamp": NOW - timedelta(hours=2)})
    report = judge(job).report
    assert "stall" in report.flags and report.trend.startswith("STALL: no new log line for 2h")
