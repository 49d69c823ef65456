"""A nearly-done eval whose last trials still run, the engine serving them, is its hard-trial
tail, not a stall.

Replayed on the real SLURM 22.05 (eval-qwen3-x-tbench-almost, as jobtables): 299 of 300 trials
in Harbor's format, the last one (a hard task) still running, its agent's requests answered
(vLLM ``Running: 1 reqs`` every 30 s at 38 tokens/s, a ``POST ... 200 OK`` every 5 min). An
hour after the last result.json ``jobtables sweep`` read ``STALL: no new result.json for 1h00m``,
diagnose. The rulebook, Eval: "Before calling an eval dead, confirm the RIGHT log and a CURRENT
window ... A burst of timeouts in the last window is usually the hard-trial tail of a
nearly-done run. Verify the engine is actually down (no recent 200s) before blaming it." A
nearly-done run (``TAIL_DONE_SHARE`` of its trials) whose engine answered a 200 within the
idle window and has requests running is generating for its last trials: the Trend says so,
no flag. With the engine quiet, or a run far from done, the stall stands.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from probes.logs.parse import parse_log
from probes.models import JobFacts, JobState
from report.judge_eval import TAIL_STALL_FACTOR
from report.models import JobReport
from tests.report.factories import NOW, judge, log, record, tree, trial

_STATS = ("(APIServer pid=812) INFO {stamp} [loggers.py:123] Engine 000: Avg prompt throughput: "
          "0.0 tokens/s, Avg generation throughput: {gen} tokens/s, Running: {n} reqs, Waiting: "
          "0 reqs, GPU KV cache usage: 1.0%, Prefix cache hit rate: 64.0%\n")
_POST = ('(APIServer pid=812) INFO:     10.4.7.21:51234 - "POST /v1/chat/completions HTTP/1.1" '
         "200 OK\n")
_LAUNCH = ("2026-11-30T14:50:34Z INF Registered tunnel connection connIndex=0 event=0 "
           "ip=198.41.192.7 location=sjc06 protocol=quic\n"
           "Sandbox agent config: api_base=https://eval-engine.example.org/v1\n")


def _engine_log(minutes: range, *, running: int, ok_every: int, quiet_min: int = 0) -> str:
    """vLLM's stats line each minute of ``minutes`` ago (newest last), a 200 every
    ``ok_every`` minutes, nothing in the last ``quiet_min`` minutes."""
    lines = [_LAUNCH]
    for ago in minutes:
        if ago < quiet_min:
            continue
        stamp = (NOW - timedelta(minutes=ago)).strftime("%m-%d %H:%M:%S")
        lines.append(_STATS.format(stamp=stamp, gen="38.0" if running else "0.0", n=running))
        if ago % ok_every == 0:
            lines.append(_POST)
    return "".join(lines)


def _report(done: int, total: int, text: str, *, quiet_min: int = 0,
            silent_min: int = 65) -> JobReport:
    last = NOW - timedelta(minutes=silent_min)
    trials = [trial(started_at=last - timedelta(minutes=20), finished_at=last)] * done
    mtime = NOW - timedelta(minutes=quiet_min)
    facts = JobFacts(
        record=record("eval-qwen3-x-tbench-almost", state=JobState.RUNNING,
                      start_time=NOW - timedelta(minutes=silent_min + 10),
                      elapsed_s=(silent_min + 10) * 60),
        log=log(text=text, mtime=mtime), summary=parse_log(text, mtime=mtime),
        trials=tree(trials, trials_total=total, newest_result_at=last))
    return judge(facts).report


def test_the_last_trial_of_a_nearly_done_eval_served_by_the_engine_is_no_stall() -> None:
    report = _report(299, 300, _engine_log(range(70, -1, -1), running=1, ok_every=5))
    assert "stall" not in report.flags, report.trend
    assert report.verdict == "healthy", report.trend
    assert "hard-trial tail" in report.trend and "1 running" in report.trend, report.trend


@pytest.mark.parametrize(("done", "running", "quiet_min"), [
    (299, 0, 0),     # the engine has nothing running: the last trial is not generating
    (299, 1, 25),    # the engine silent 25 min, no 200 since: down, not serving
    (150, 16, 0),    # half the run to go: a burst of silence there is no tail
])
def test_a_quiet_engine_or_a_run_far_from_done_is_still_a_stall(
        done: int, running: int, quiet_min: int) -> None:
    text = _engine_log(range(70, -1, -1), running=running, ok_every=5, quiet_min=quiet_min)
    report = _report(done, 300, text, quiet_min=quiet_min)
    assert "stall" in report.flags and report.verdict == "stalled", report.trend
    assert report.trend.startswith("STALL: no new result.json for 1h05m"), report.trend


def test_a_tail_trial_that_never_returns_is_a_stall_past_the_tail_bound() -> None:
    """Near miss (review of be690e4): the engine still serving the one trial left is no
    licence forever. A trial whose agent keeps the engine busy and never returns (its timeout
    off, a loop) is the rulebook's "hung actor/trial that never returns"; past
    ``TAIL_STALL_FACTOR`` stall windows of silence the stall stands."""
    quiet = int(TAIL_STALL_FACTOR * 60) + 5
    report = _report(299, 300, _engine_log(range(70, -1, -1), running=1, ok_every=5),
                     silent_min=quiet)
    assert "stall" in report.flags and report.verdict == "stalled", report.trend
    assert report.trend.startswith("STALL: no new result.json for"), report.trend


def test_a_tail_within_the_bound_is_still_no_stall() -> None:
    """Near miss: two stall windows into the last trial, the engine serving: still its tail."""
    report = _report(299, 300, _engine_log(range(70, -1, -1), running=1, ok_every=5),
                     silent_min=125)
    assert "stall" not in report.flags and report.verdict == "healthy", report.trend
