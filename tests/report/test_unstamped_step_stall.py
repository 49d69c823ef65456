"""A run whose step lines carry no timestamp is timed by the stamped lines logged after them.

Found replaying verl 0.4.1's real console (Ray's ``(TaskRunner pid=N) step:N - ...`` lines
carry no stamp) followed by two hours of vLLM's shared-memory broadcast heartbeat (stamped,
once a minute: the rulebook's "informational heartbeat ... while the engine waits with
nothing scheduled"): the rollout hung after step 19, yet the heartbeat keeps the file fresh,
so the stall rule, with no time for the last step, read the file's age (0 min): verdict
healthy, Trend 'Slight dip from 0.479'. A run silently dead for two hours read fine. The
first stamped line after the last step bounds its age from below.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

import pytest

from probes.logs.parse import parse_log
from probes.models import JobFacts
from tests.report.factories import NOW, judge, log, record

CONSOLE = Path(__file__).resolve().parents[1] / "fixtures" / "verl-0.4.1" / "console.log"


def _heartbeat(at: datetime, pid: int = 2451) -> str:
    return (f"(WorkerDict pid={pid}) INFO {at:%m-%d %H:%M:%S} [shm_broadcast.py:542] No "
            "available shared memory broadcast block found in 60 seconds. This typically "
            "happens when some processes are hanging or doing some time-consuming work (e.g. "
            "compilation, weight/kv cache quantization).")


def _log(quiet_min: int, engines: int = 1) -> str:
    """verl's console to step 19, then ``quiet_min`` minutes of heartbeats (each of
    ``engines`` engines once a minute) up to now."""
    lines = CONSOLE.read_text().splitlines()[:40]
    start = NOW - timedelta(minutes=quiet_min)
    for i in range(quiet_min + 1):
        lines += [_heartbeat(start + timedelta(minutes=i), 2451 + e) for e in range(engines)]
    return "\n".join(lines) + "\n"


def _judged(text: str):
    facts = JobFacts(record=record("rl-verl-grpo", start_time=NOW - timedelta(hours=3),
                                   elapsed_s=10800),
                     log=log(text=text, mtime=NOW), summary=parse_log(text, mtime=NOW))
    return judge(facts, now=NOW).report


@pytest.mark.parametrize("engines", [1, 4])
def test_a_hung_run_behind_a_heartbeat_is_stalled(engines: int) -> None:
    report = _judged(_log(120, engines))
    assert "stall" in report.flags, (report.verdict, report.trend)
    assert report.verdict == "stalled"
    assert report.trend.startswith("STALL: no new step for 2h")


def test_a_short_wait_after_the_last_step_is_no_stall() -> None:
    """Near-miss: ten minutes of heartbeats after the last step (under the 30-min floor)."""
    report = _judged(_log(10))
    assert "stall" not in report.flags and report.verdict == "healthy"


def test_the_bound_is_carried_across_incremental_reads() -> None:
    """The bot folds the log in pieces: cut inside the heartbeats, the fold reads the same."""
    from tests.probes.logs.test_incremental import fold

    text = _log(120)
    cut = text.index(f"{(NOW - timedelta(minutes=60)):%m-%d %H:%M}")
    folded, _ = fold([text[:cut], text[cut:]], mtime=NOW)
    whole = parse_log(text, mtime=NOW)
    assert whole.step_quiet_since is not None
    assert folded.step_quiet_since == whole.step_quiet_since
