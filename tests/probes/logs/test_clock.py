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
@pytest.mark.parametrize("offset_h", [-8, 0, 9])
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


@pytest.mark.parametrize("offset_h", [-8, 0, 9])
@pytest.mark.parametrize(
    ("last_ok_ago", "newest_ago", "written_ago", "idle"),
    [(1, 0.5, 0, False), (15, 0.5, 0, True), (5, 5, 12, True), (5, 3, 3, False)],
)
def test_engine_idle_same_east_and_west_of_utc(
    offset_h: int, last_ok_ago: float, newest_ago: float, written_ago: int, idle: bool
) -> None:
    """Engine-idle from a parsed zone-less eval log is the same answer in any zone."""
    text = (
        f"[{_local(offset_h, 60)}] INFO:     127.0.0.1:5 - {POST}\n"
        f"[{_local(offset_h, last_ok_ago)}] INFO:     127.0.0.1:5 - {POST}\n"
        f"[{_local(offset_h, newest_ago)}] INFO: Decode batch. #running-req: 0\n"
    )
    mtime = NOW - timedelta(minutes=written_ago)
    summary = parse_log(text, mtime=mtime)
    job = facts(record("eval-qwen-swebench"), trials=tree([trial(1.0)] * 10, trials_total=300),
                log_fetch=log(text=text, mtime=mtime),
                summary_kw=summary.model_dump(exclude={"points"}))
    assert ("engine-idle" in judge(job).report.flags) is idle


@pytest.mark.parametrize("offset_h", [-8, 0, 9])
@pytest.mark.parametrize(
    ("step_ago", "newest_ago", "written_ago", "stalled"),
    [(1, 1, 1, False), (90, 0, 0, True), (10, 10, 35, True), (10, 5, 15, False)],
)
def test_stall_same_east_and_west_of_utc(
    offset_h: int, step_ago: int, newest_ago: int, written_ago: int, stalled: bool
) -> None:
    """The stall rule on a parsed zone-less log is the same answer in any zone."""
    lines = [f"[{_local(offset_h, step_ago + 60 - i)}] iteration {i}/ 1000 | lm loss: 2.0 | "
             "elapsed time per iteration (ms): 60000.0 |" for i in range(1, 61)]
    lines.append(f"[{_local(offset_h, newest_ago)}] heartbeat")
    text = "\n".join(lines) + "\n"
    mtime = NOW - timedelta(minutes=written_ago)
    summary = parse_log(text, mtime=mtime)
    assert summary.points and summary.points[-1].wall_time is not None
    job = facts(record(), summary.points, log_fetch=log(text=text, mtime=mtime),
                summary_kw=summary.model_dump(exclude={"points"}))
    assert ("stall" in judge(job).report.flags) is stalled

