"""The first trials to end in a fresh eval are its instant failures: with the engine serving the
rest, they are not a tunnel carrying no traffic.

Replayed on the real SLURM 22.05 as jtuser (eval-qwen3-x-tbench-instfresh): three minutes into
an eval, 3 trials in Harbor's format had ended at once with null output (their agent exited
with code 1: a broken task image) while 13 others ran, the engine answering them (vLLM
``Running: 13 reqs``, a ``POST ... 200 OK`` every 30 s). Instant failures end first, so they
were every trial finished: ``jobtables job`` read ``warning [instant-fail] INSTANT-FAIL: 3/3
trials, null output``, diagnose "the tunnel is not carrying traffic", ``tunnel✗``. The rulebook
ties instant-fail to a tunnel carrying no traffic, and asks that the engine be verified down
(no recent 200s) before it is blamed; fresh 200s with requests running are traffic through
that tunnel. While the engine serves, fewer than ``INSTANT_FAIL_MIN`` instant trials are a note;
more are still flagged, the diagnosis pointing at the agent, not the tunnel.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from probes.logs.parse import parse_log
from probes.models import JobFacts, JobState
from report.models import JobDetail
from tests.report.factories import NOW, judge, log, record, tree, trial

_STATS = ("(APIServer pid=812) INFO {stamp} [loggers.py:123] Engine 000: Avg prompt throughput: "
          "0.0 tokens/s, Avg generation throughput: {gen} tokens/s, Running: {n} reqs, Waiting: "
          "0 reqs, GPU KV cache usage: 1.0%, Prefix cache hit rate: 64.0%\n")
_POST = ('(APIServer pid=812) INFO:     10.4.7.21:51234 - "POST /v1/chat/completions HTTP/1.1" '
         "200 OK\n")
_LAUNCH = ("2026-11-30T15:55:00Z INF Registered tunnel connection connIndex=0 event=0 "
           "ip=198.41.192.7 location=sjc06 protocol=quic\n"
           "Sandbox agent config: api_base=https://eval-engine.example.org/v1\n")


def _serving(last_min: int, running: int) -> str:
    """vLLM serving every 30 s up to ``last_min`` minutes ago."""
    lines = [_LAUNCH]
    for half in range(10, 2 * last_min - 1, -1):
        stamp = (NOW - timedelta(seconds=30 * half)).strftime("%m-%d %H:%M:%S")
        lines.append(_POST + _STATS.format(stamp=stamp, gen="1400.0" if running else "0.0",
                                           n=running))
    return "".join(lines)


def _detail(instant: int, text: str, *, quiet_min: int = 0) -> JobDetail:
    t0 = NOW - timedelta(minutes=3)
    trials = [trial(None, n_output_tokens=None, n_turns=None,
                    exception_type="NonZeroAgentExitCodeError", started_at=t0,
                    finished_at=t0 + timedelta(seconds=35),
                    agent_started_at=t0 + timedelta(seconds=33),
                    agent_finished_at=t0 + timedelta(seconds=33.2))] * instant
    mtime = NOW - timedelta(minutes=quiet_min)
    facts = JobFacts(
        record=record("eval-qwen3-x-tbench-instfresh", state=JobState.RUNNING,
                      start_time=NOW - timedelta(minutes=5), elapsed_s=300),
        log=log(text=text, mtime=mtime), summary=parse_log(text, mtime=mtime),
        trials=tree(trials, trials_total=300, newest_result_at=t0 + timedelta(seconds=35)))
    return judge(facts)


def test_a_fresh_evals_first_instant_failures_beside_a_serving_engine_are_a_note() -> None:
    detail = _detail(3, _serving(0, 13))
    row = detail.report
    assert "instant-fail" not in row.flags, row.trend
    assert row.verdict == "healthy", row.trend
    assert "3/3 trials ended instantly" in row.trend, row.trend
    assert detail.infra is not None and detail.infra.startswith("tunnel✓"), detail.infra


@pytest.mark.parametrize(("instant", "text", "quiet"), [
    (3, _LAUNCH, 0),                 # no engine line read at all: nothing says traffic flows
    (40, _serving(20, 0), 20),       # the engine silent 20 min, nothing running
])
def test_without_a_serving_engine_instant_trials_are_the_tunnels(
        instant: int, text: str, quiet: int) -> None:
    detail = _detail(instant, text, quiet_min=quiet)
    row = detail.report
    assert "instant-fail" in row.flags and row.verdict == "warning", row.trend
    assert row.recommendation is not None and "tunnel" in row.recommendation.why
    assert detail.infra is not None and detail.infra.startswith("tunnel✗"), detail.infra


def test_many_instant_trials_beside_a_serving_engine_point_at_the_agent() -> None:
    detail = _detail(12, _serving(0, 13))
    row = detail.report
    assert "instant-fail" in row.flags and row.verdict == "warning", row.trend
    assert row.recommendation is not None
    assert "not carrying traffic" not in row.recommendation.why, row.recommendation.why
    assert "engine is serving" in row.recommendation.why, row.recommendation.why
    assert detail.infra is not None and detail.infra.startswith("tunnel✓"), detail.infra
