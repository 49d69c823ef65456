"""Rulebook: eval/datagen engine checks, from vLLM logs parsed and judged end to end.

Lines are vLLM's real shapes (``research/formats.md`` §5.1, reconstructed): the stats logger
``INFO MM-DD HH:MM:SS [loggers.py:N] Engine 000: ... Running: N reqs, Waiting: N reqs, ...``
(year-less stamp, V1 ``(APIServer pid=1)`` prefix) and uvicorn's stamp-less access line
``INFO:     10.1.2.3:51234 - "POST /v1/chat/completions HTTP/1.1" 200 OK``.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from probes.logs.parse import parse_log
from probes.models import JobFacts
from tests.report.factories import NOW, judge, log, record, summary, tree, trial

PREFIX = "(APIServer pid=1) "
_REASONS = {200: "OK", 500: "Internal Server Error", 503: "Service Unavailable"}


def _stats(at: datetime, running: int) -> str:
    return (f"{PREFIX}INFO {at:%m-%d %H:%M:%S} [loggers.py:123] Engine 000: Avg prompt "
            f"throughput: 512.3 tokens/s, Avg generation throughput: 88.1 tokens/s, Running: "
            f"{running} reqs, Waiting: 0 reqs, GPU KV cache usage: 3.1%, Prefix cache hit rate: "
            "41.2%")


def _post(code: int = 200) -> str:
    return (f'{PREFIX}INFO:     10.1.2.3:51234 - "POST /v1/chat/completions HTTP/1.1" {code} '
            f"{_REASONS[code]}")


def _eval(text: str, *, mtime: datetime = NOW, name: str = "eval-qwen-tb") -> JobFacts:
    parsed = parse_log(text, mtime=mtime)
    return JobFacts(record=record(name), log=log(text=text, mtime=mtime),
                    summary=summary(**parsed.model_dump(exclude={"points"})),
                    trials=tree([trial(1.0)] * 20, trials_total=300))


def _busy_until(end: datetime, minutes: int = 20) -> list[str]:
    """A busy engine: a stats line and a 200 every minute for ``minutes`` up to ``end``."""
    out = []
    for i in range(minutes, 0, -1):
        out += [_stats(end - timedelta(minutes=i), 4), _post()]
    return out


def _text(lines: list[str]) -> str:
    return "\n".join(lines) + "\n"


def test_year_less_stamps_are_read_with_the_logs_year_through_the_judge() -> None:
    """A tail crossing New Year: 200s until 23:50 on 31 Dec, zero running since, the newest
    stamp 00:05 on 1 Jan. Read with the log's years that is 15 idle minutes; any other year
    would put 00:05 before 23:50 and hide the idle engine."""
    eve = datetime(2026, 12, 31, 23, 50, tzinfo=UTC)
    lines = [*_busy_until(eve), _stats(eve, 0), _stats(eve + timedelta(minutes=15), 0)]
    mtime = eve + timedelta(minutes=15, seconds=5)
    job = _eval(_text(lines), mtime=mtime)
    assert job.summary is not None
    assert job.summary.infra.last_engine_ok_at == eve - timedelta(minutes=1)
    assert job.summary.last_timestamp == datetime(2027, 1, 1, 0, 5, tzinfo=UTC)
    detail = judge(job, now=mtime)
    assert "engine-idle" in detail.report.flags and detail.infra == "tunnel? api? engine✗"


@pytest.mark.parametrize(
    ("tail", "idle", "mark"),
    [
        # busy: 200s up to now
        ([], False, "engine✓"),
        # no 200 for 15 min and zero running for all of it: idle
        ([(15, 0), (10, 0), (5, 0), (0, 0)], True, "engine✗"),
        # no 200 for 15 min, but the queue drained only now: one fresh snapshot is not enough
        ([(15, 3), (10, 3), (1, 0)], False, "engine?"),
        # zero running for 12 min, but served a 200 4 minutes ago: not idle
        ([(12, 0), (4, 0, 200), (0, 0)], False, "engine✓"),
    ],
)
def test_engine_idle_needs_no_200s_and_zero_running(
    tail: list[tuple[int, ...]], idle: bool, mark: str
) -> None:
    """engine-idle: no 200 for 10+ min on the log's clock AND zero running for 10+ min."""
    start = NOW - timedelta(minutes=15)
    lines = _busy_until(start + timedelta(minutes=1) if tail else NOW + timedelta(minutes=1))
    for event in tail:
        lines.append(_stats(NOW - timedelta(minutes=event[0]), event[1]))
        if len(event) > 2:
            lines.append(_post(event[2]))
    detail = judge(_eval(_text(lines)))
    assert ("engine-idle" in detail.report.flags) is idle
    assert detail.infra is not None and detail.infra.endswith(mark)


@pytest.mark.parametrize(
    ("codes", "failing"),
    [
        ([500] * 5, True),  # a burst of 500s after the last 200s
        ([503, 200, 503, 500, 503], True),
        ([500], False),  # one stray 500 among 20 answers
        ([200] * 5, False),
    ],
)
def test_5xx_burst_marks_the_engine_failing(codes: list[int], failing: bool) -> None:
    """A 5xx burst is engine✗ (and a warning with a diagnosis), never engine?."""
    lines = _busy_until(NOW - timedelta(minutes=1))
    lines += [_stats(NOW, 4), *(_post(c) for c in codes)]
    detail = judge(_eval(_text(lines)))
    assert detail.infra is not None
    assert detail.infra.endswith("engine✗") is failing
    if failing:
        assert detail.report.verdict == "warning"
        assert detail.report.recommendation is not None
        assert "5xx" in detail.report.recommendation.why
    else:
        assert detail.infra.endswith("engine✓")


def test_a_38_minute_old_200_is_not_engine_ok() -> None:
    """Requests still running, the last 200 38 minutes ago: engine? (not ✓, not idle)."""
    old = NOW - timedelta(minutes=38)
    lines = [*_busy_until(old), *(_stats(NOW - timedelta(minutes=m), 2) for m in range(37, -1, -3))]
    detail = judge(_eval(_text(lines)))
    assert detail.infra == "tunnel? api? engine?"
    assert "engine-idle" not in detail.report.flags


def test_datagen_engine_idle_and_failing() -> None:
    """Datagen reads the same engine checks (it has no Infra column: flag and trend)."""
    eve = NOW - timedelta(minutes=20)
    idle = _text([*_busy_until(eve), _stats(eve, 0), _stats(NOW, 0)])
    report = judge(_eval(idle, name="datagen-swe-chunks")).report
    assert "engine-idle" in report.flags
    burst = _text([*_busy_until(NOW), *(_post(500) for _ in range(6))])
    report = judge(_eval(burst, name="datagen-swe-chunks")).report
    assert report.verdict == "warning" and "5xx" in report.trend
