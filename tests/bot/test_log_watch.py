"""bot.log_watch on its own: many logs lost at once are one line, a cluster not read keeps its
jobs' state, a job that ends while unreadable is told by its end only, names stay inert."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from bot.log_watch import log_watch
from report.models import JobReport, Report
from tests.bot.builders import T0, detail, job, sweep_result

HALF_HOUR = 1800.0


def _sweeps(*reports: Report) -> tuple[dict[str, dict[str, Any]], list[list[str]]]:
    state: dict[str, dict[str, Any]] = {}
    lines = []
    for i, report in enumerate(reports):
        state, said = log_watch(state, report, T0 + timedelta(minutes=30 * i),
                                interval_s=HALF_HOUR)
        lines.append(said)
    return state, lines


def _report(jobs: list[JobReport], **kw: Any) -> Report:
    return sweep_result([detail(j) for j in jobs], **kw).report


def test_many_logs_lost_at_once_are_one_line_naming_three() -> None:
    lost = [job(str(5000 + i), f"sft-grid-{i}", flags=("fetch-failed",), verdict="unknown")
            for i in range(6)]
    fine = [job(str(5000 + i), f"sft-grid-{i}") for i in range(6)]
    _, lines = _sweeps(*[_report(lost)] * 3, _report(fine))
    assert lines[0] == lines[1] == []
    [gone] = lines[2]
    assert gone.startswith("⚠️ logs of 6 jobs unreadable since ") and "+3 more" in gone
    [back] = lines[3]
    assert back.startswith("✅ logs of 6 jobs read again (") and "+3 more" in back


def test_a_cluster_not_read_keeps_the_state_and_an_end_is_no_return() -> None:
    lost = job("4100", "rl-x", flags=("log-missing",), verdict="unknown")
    state, lines = _sweeps(_report([lost]), _report([lost]), _report([lost]),
                           _report([], clusters=(), unreachable=("alpha",)))
    assert state and len(lines[2]) == 1 and lines[3] == []
    ended = job("4100", "rl-x", state="FAILED", verdict="failed")
    _, after = log_watch(state, _report([ended]), T0 + timedelta(hours=3),
                         interval_s=HALF_HOUR)
    assert after == []


def test_a_hostile_name_stays_inert_in_its_line() -> None:
    lost = job("4100", "rl-`x` *b* <!channel>", flags=("fetch-failed",), verdict="unknown")
    _, lines = _sweeps(*[_report([lost])] * 3)
    [line] = lines[2]
    assert line.startswith("⚠️ `alpha:4100` rl-ˋxˋ `*b*` ")  # the name's own ticks changed
    assert line.count("`") % 2 == 0
