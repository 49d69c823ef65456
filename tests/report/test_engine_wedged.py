"""Rulebook §Eval: "Verify the engine is actually down (no recent 200s) before blaming it".

A vLLM engine whose requests hang (a wedged engine core: its API server's periodic stats line
goes on saying ``Running: 4 reqs`` at ``Avg generation throughput: 0.0 tokens/s``) answers no
request: the contract's ``engine-idle`` ("served no request (no new 200s) for 10+ min"), though
its running count is not zero. Lines in vLLM's real shapes (as ``test_rulebook_engine``).
"""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from probes.logs.parse import parse_log
from probes.models import JobFacts
from tests.report.factories import NOW, judge, log, record, summary, tree, trial

PREFIX = "(APIServer pid=1) "


def _stats(at: datetime, running: int, gen: float) -> str:
    return (f"{PREFIX}INFO {at:%m-%d %H:%M:%S} [loggers.py:123] Engine 000: Avg prompt "
            f"throughput: 0.0 tokens/s, Avg generation throughput: {gen:.1f} tokens/s, Running: "
            f"{running} reqs, Waiting: 0 reqs, GPU KV cache usage: 3.1%, Prefix cache hit rate: "
            "41.2%")


def _sglang(at: datetime, running: int, gen: float) -> str:
    return (f"[{at:%Y-%m-%d %H:%M:%S}] Decode batch. #running-req: {running}, #token: 20417, "
            f"token usage: 0.07, cuda graph: True, gen throughput (token/s): {gen:.2f}, "
            "#queue-req: 0, ")


POST = f'{PREFIX}INFO:     10.1.2.3:51234 - "POST /v1/chat/completions HTTP/1.1" 200 OK'


def _eval(lines: list[str]) -> JobFacts:
    text = "\n".join(lines) + "\n"
    parsed = parse_log(text, mtime=NOW)
    return JobFacts(record=record("eval-qwen-tb"), log=log(text=text, mtime=NOW),
                    summary=summary(**parsed.model_dump(exclude={"points"})),
                    trials=tree([trial(1.0)] * 20, trials_total=300))


def _log(line: object, quiet_min: int, gen: float) -> list[str]:
    """Busy (a 200 a minute) until ``quiet_min`` minutes ago, then 4 requests running at
    ``gen`` tokens/s, a stats line a minute, no 200."""
    make = line if callable(line) else _stats
    out: list[str] = []
    for i in range(quiet_min + 20, quiet_min, -1):
        out += [make(NOW - timedelta(minutes=i), 4, 90.0), POST]
    out += [make(NOW - timedelta(minutes=i), 4, gen) for i in range(quiet_min, -1, -1)]
    return out


@pytest.mark.parametrize("line", [_stats, _sglang])
def test_requests_stuck_at_zero_throughput_with_no_200_is_an_engine_down(line: object) -> None:
    """38 minutes with no 200 and 4 requests 'running' at 0 tokens/s: the engine is down
    (it was read engine? and the eval healthy until the 60-minute result.json stall)."""
    detail = judge(_eval(_log(line, 38, 0.0)))
    assert "engine-idle" in detail.report.flags
    assert detail.infra is not None and detail.infra.endswith("engine✗")
    assert detail.report.verdict == "warning"
    assert "4 running reqs at 0 tokens/s" in detail.report.trend
    assert detail.report.recommendation is not None
    assert detail.report.recommendation.action == "diagnose"


@pytest.mark.parametrize(
    ("quiet_min", "gen"),
    [
        (38, 85.0),  # generating: long answers in flight, the engine is not down
        (8, 0.0),  # stuck for less than the idle window
    ],
)
def test_requests_generating_or_briefly_stuck_are_no_engine_down(quiet_min: int,
                                                                 gen: float) -> None:
    """Near-misses: tokens still flowing, or a stuck spell shorter than 10 minutes."""
    detail = judge(_eval(_log(_stats, quiet_min, gen)))
    assert "engine-idle" not in detail.report.flags
    assert detail.infra is not None and not detail.infra.endswith("engine✗")


def test_a_stuck_spell_is_carried_across_incremental_reads() -> None:
    """The bot's warm sweeps fold a log in pieces: the start of the stuck spell is carried
    (cut inside it), so the folded reading equals the whole log's."""
    from tests.probes.logs.test_incremental import fold

    lines = _log(_stats, 38, 0.0)
    cut = len(lines) - 10
    chunks = ["\n".join(lines[:cut]) + "\n", "\n".join(lines[cut:]) + "\n"]
    folded, _ = fold(chunks, mtime=NOW)
    whole = parse_log(chunks[0] + chunks[1], mtime=NOW)
    assert whole.infra.engine_stuck_since == NOW - timedelta(minutes=38)
    assert folded.infra == whole.infra


@pytest.mark.parametrize(("quiet_min", "posts_after", "down"), [
    (25, False, True),   # busy, then not one stats line and no 200: the engine is gone
    (6, False, False),   # near miss: quiet for less than the window
    (25, True, False),   # near miss: its 200s go on (a stats logger gone quiet, not the engine)
])
def test_a_vllm_engine_silent_after_a_busy_stats_line_is_down(
        quiet_min: int, posts_after: bool, down: bool) -> None:
    """vLLM logs its stats every 10 s while it has work, and an idle engine logs one last
    zero-throughput line before going quiet (``LoggingStatLogger.log``: "Avoid log noise on an
    idle production system"). So a log whose last stats line still shows requests generating,
    silent since for the window with no 200, is an engine that died (its process gone) or stopped
    logging: it read no flag at all, 'engine?'."""
    lines = _log(_stats, quiet_min, 90.0)[:-(quiet_min + 1)]  # busy until quiet_min ago
    if posts_after:
        lines += [POST] * 5
    parsed_at = NOW if posts_after else NOW - timedelta(minutes=quiet_min)
    text = "\n".join(lines) + "\n"
    parsed = parse_log(text, mtime=parsed_at)
    job = JobFacts(record=record("eval-qwen-tb"), log=log(text=text, mtime=parsed_at),
                   summary=summary(**parsed.model_dump(exclude={"points"})),
                   trials=tree([trial(1.0)] * 20, trials_total=300))
    detail = judge(job)
    assert ("engine-idle" in detail.report.flags) is down, (detail.report.flags,
                                                            detail.report.trend)
    if down:
        assert detail.infra is not None and detail.infra.endswith("engine✗")
