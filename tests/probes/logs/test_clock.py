"""The one log clock: zone policy, year-less stamps, and the judges' answers on any zone."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from probes.logs.clock import LogClock, YearlessStamp, minutes_on_log_clock, read_stamp
from probes.logs.faults import scan_faults
from probes.logs.parse import _parse_reference, parse_log
from probes.models import LogSummary, MetricPoint
from tests.report.factories import NOW, facts, judge, log, record, tree, trial

POST = '"POST /v1/chat/completions HTTP/1.1" 200 OK'
ZONES = pytest.mark.parametrize("offset_h", [-8, 0, 9])
"""The log's zone-less clock west of, on and east of UTC."""


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("2026-11-30T15:00:01Z x", datetime(2026, 11, 30, 15, 0, 1, tzinfo=UTC)),
        ("2026-11-30 16:00:01+01:00 x", datetime(2026, 11, 30, 15, 0, 1, tzinfo=UTC)),
        ("2026-11-30 07:00:01-0800 x", datetime(2026, 11, 30, 15, 0, 1, tzinfo=UTC)),
        ("2026-11-30 15:00:01 zone-less", datetime(2026, 11, 30, 15, 0, 1, tzinfo=UTC)),
        ("[2026-11-30 15:00:01] sglang", datetime(2026, 11, 30, 15, 0, 1, tzinfo=UTC)),
        ("[INFO|2026-11-30 15:00:01] trainer", datetime(2026, 11, 30, 15, 0, 1, tzinfo=UTC)),
        ("INFO 11-30 15:45:10 [loggers.py:1] x", YearlessStamp(11, 30, 15, 45, 10)),
        ("I1130 15:45:10.123 glog", YearlessStamp(11, 30, 15, 45, 10)),
        ("INFO 02-29 10:00:00 leap day", YearlessStamp(2, 29, 10, 0, 0)),
        ("INFO 13-01 10:00:00 no such month", None),
        ("step 2026-11-30 15:00:01 mid-line", None),
        ("", None),
    ],
)
def test_read_stamp_forms(line: str, expected: datetime | YearlessStamp | None) -> None:
    """Zoned stamps come back in UTC, zone-less ones keep their digits labelled UTC, and
    year-less ones are left for the clock to place."""
    stamp = read_stamp(line)
    assert stamp == expected
    if isinstance(stamp, datetime):
        assert stamp.tzinfo is UTC


def test_vllm_yearless_stamps_take_the_logs_own_year() -> None:
    """A vLLM tail after a dated line takes that line's year, whatever the mtime says."""
    text = (
        "2025-06-01 09:59:00 launcher: starting vllm\n"
        "INFO 06-01 10:00:00 [loggers.py:1] Engine 000: Running: 3 reqs\n"
        "INFO 06-01 10:05:30 [loggers.py:1] Engine 000: Running: 2 reqs\n"
    )
    summary = parse_log(text, mtime=datetime(2026, 11, 30, tzinfo=UTC))
    assert summary.last_timestamp == datetime(2025, 6, 1, 10, 5, 30, tzinfo=UTC)


def test_vllm_yearless_stamps_take_the_mtime_year_failing_the_log() -> None:
    """With no dated line, the file's mtime gives the year; without an mtime there is none."""
    text = "INFO 11-30 15:45:10 [loggers.py:1] Engine 000: Running: 3 reqs\n"
    mtime = datetime(2026, 11, 30, 15, 46, tzinfo=UTC)
    assert parse_log(text, mtime=mtime).last_timestamp == datetime(
        2026, 11, 30, 15, 45, 10, tzinfo=UTC
    )
    assert parse_log(text).last_timestamp is None


def test_yearless_stamps_across_new_year() -> None:
    """A December tail read in January is last year's, and the New Year line is this year's."""
    clock = LogClock(datetime(2027, 1, 1, 0, 2, tzinfo=UTC))
    assert clock.read("INFO 12-31 23:59:00 x") == datetime(2026, 12, 31, 23, 59, tzinfo=UTC)
    assert clock.read("INFO 01-01 00:01:00 x") == datetime(2027, 1, 1, 0, 1, tzinfo=UTC)
    assert clock.last == datetime(2027, 1, 1, 0, 1, tzinfo=UTC)


def test_stampless_access_line_has_a_last_200_time() -> None:
    """vLLM's uvicorn access lines carry no stamp: their 200 is timed by the log clock there,
    and a year-less 200 line gets the mtime's year (the old ISO-only reader gave neither)."""
    text = (
        "(APIServer pid=1) INFO 11-30 15:45:10 [loggers.py:1] Engine 000: Running: 7 reqs\n"
        f"(APIServer pid=1) INFO:     10.0.0.5:43210 - {POST}\n"
        "(APIServer pid=1) INFO 11-30 15:45:20 [loggers.py:1] Engine 000: Running: 0 reqs\n"
    )
    mtime = datetime(2026, 11, 30, 15, 46, tzinfo=UTC)
    expected = datetime(2026, 11, 30, 15, 45, 10, tzinfo=UTC)
    assert parse_log(text, mtime=mtime).infra.last_engine_ok_at == expected
    assert _parse_reference(text, mtime=mtime).infra.last_engine_ok_at == expected
    stamped = f"INFO 11-30 15:45:15 [api_server.py:1] 10.0.0.5:1 - {POST}"
    assert scan_faults([stamped], mtime=mtime).infra.last_engine_ok_at == expected + timedelta(
        seconds=5
    )


def test_stored_naive_log_times_are_read_on_the_log_clock() -> None:
    """A point stored before the clock (naive wall time) validates onto the same clock."""
    point = MetricPoint.model_validate({"step": 1, "values": {}, "wall_time": "2026-11-30T10:00"})
    assert point.wall_time == datetime(2026, 11, 30, 10, tzinfo=UTC)
    zoned = LogSummary(line_count=1, last_timestamp=datetime(2026, 11, 30, 11,
                                                            tzinfo=timezone(timedelta(hours=1))))
    assert zoned.last_timestamp == datetime(2026, 11, 30, 10, tzinfo=UTC)


@pytest.mark.parametrize(
    ("since_min", "newest_min", "written_min_ago", "expected"),
    [
        (0, 0, 0, 0.0),
        (-14, 0, 0, 14.0),  # 14 min between the event and the newest line
        (0, 0, 12, 12.0),  # log silent since the event, file 12 min old
        (-2, 0, 3, 5.0),
        (5, 0, 0, 0.0),  # an out-of-order event after the newest line is no negative gap
    ],
)
@ZONES
def test_minutes_on_log_clock_ignores_the_zone(
    since_min: int, newest_min: int, written_min_ago: int, expected: float, offset_h: int
) -> None:
    """The answer depends on the gaps, never on how far the log's clock is off UTC."""
    local = NOW + timedelta(hours=offset_h)
    since = local + timedelta(minutes=since_min)
    newest = local + timedelta(minutes=newest_min)
    mtime = NOW - timedelta(minutes=written_min_ago)
    assert minutes_on_log_clock(since, newest, mtime, NOW) == pytest.approx(expected)


def _local(offset_h: int, minutes_ago: float) -> str:
    """A zone-less stamp on a clock ``offset_h`` hours off UTC, ``minutes_ago`` before NOW."""
    moment = NOW + timedelta(hours=offset_h) - timedelta(minutes=minutes_ago)
    return moment.strftime("%Y-%m-%d %H:%M:%S")


def _eval_log(offset_h: int, last_ok_ago: float, newest_ago: float) -> str:
    """An eval engine's log: 200s until ``last_ok_ago``, zero running requests from then on
    (engine-idle needs both for 10+ minutes), then a scheduler line."""
    return (
        f"[{_local(offset_h, 60)}] INFO:     127.0.0.1:5 - {POST}\n"
        f"[{_local(offset_h, last_ok_ago)}] INFO:     127.0.0.1:5 - {POST}\n"
        f"[{_local(offset_h, last_ok_ago)}] INFO: Decode batch. #running-req: 0\n"
        f"[{_local(offset_h, newest_ago)}] INFO: Decode batch. #running-req: 0\n"
    )


def _megatron_log(offset_h: int, step_ago: float, newest_ago: float) -> str:
    """60 Megatron iterations a minute apart, the last ``step_ago``, then a heartbeat line."""
    lines = [f"[{_local(offset_h, step_ago + 60 - i)}] iteration {i}/ 1000 | lm loss: 2.0 | "
             "elapsed time per iteration (ms): 60000.0 |" for i in range(1, 61)]
    lines.append(f"[{_local(offset_h, newest_ago)}] heartbeat")
    return "\n".join(lines) + "\n"


@ZONES
@pytest.mark.parametrize(
    ("flag", "ago", "raised"),
    [
        ("engine-idle", (1, 0.5, 0), False),
        ("engine-idle", (15, 0.5, 0), True),  # 14.5 min on the log clock
        ("engine-idle", (5, 5, 12), True),  # log silent 12 min
        ("engine-idle", (5, 3, 3), False),  # near-miss: 5 min in all
        ("stall", (1, 1, 1), False),
        ("stall", (90, 0, 0), True),  # heartbeat after the last step: 90 min on the log clock
        ("stall", (10, 10, 35), True),  # log silent 35 min
        ("stall", (10, 5, 15), False),  # near-miss: 20 min in all
    ],
)
def test_idle_and_stall_same_east_and_west_of_utc(
    offset_h: int, flag: str, ago: tuple[float, float, float], raised: bool
) -> None:
    """Engine-idle (since the last 200) and stall (since the last step), judged from a parsed
    zone-less log, give the same answer whatever the log clock's zone. ``ago``: minutes before
    now of the event, of the newest line, and of the file's last write."""
    event_ago, newest_ago, written_ago = ago
    mtime = NOW - timedelta(minutes=written_ago)
    if flag == "engine-idle":
        text = _eval_log(offset_h, event_ago, newest_ago)
        rec, trials = record("eval-qwen-swebench"), tree([trial(1.0)] * 10, trials_total=300)
    else:
        text = _megatron_log(offset_h, event_ago, newest_ago)
        rec, trials = record(), None
    summary = parse_log(text, mtime=mtime)
    assert summary.last_timestamp is not None
    job = facts(rec, summary.points, trials=trials, log_fetch=log(text=text, mtime=mtime),
                summary_kw=summary.model_dump(exclude={"points"}))
    assert (flag in judge(job).report.flags) is raised
