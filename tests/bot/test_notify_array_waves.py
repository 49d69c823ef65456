"""An array run in waves is told completed once, when its last task is done (fake Slack, real
Redis).

``sbatch --array=0-7%4``: tasks 0-3 run, then 4-7. Each wave's completion was a job-end DM
('✅ rl-grid (×4 tasks) completed.'), and the last one counted only its own wave: two DMs
for one run, neither saying the run was done. A completed task whose array still has tasks
pending or running is now held; the DM comes once nothing of the array is left, counting
every task the sweep lists completed. A failed task is still told at once.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.scheduled import scheduled_sweep
from bot.store import RedisStore
from probes.models import JobState
from report.models import JobDetail, Recommendation
from tests.bot.builders import FakeClock, FakeSweeper, detail, job
from tests.bot.builders import sweep_result as build_result
from tests.bot.conftest import make_config, notify_on, running_bot
from tests.bot.fake_slack import FakeSlack

pytestmark = pytest.mark.redis

DONE = Recommendation(action="cleanup", why="run rl-standard-job-cleanup")


def dms(slack: FakeSlack) -> list[str]:
    return [c.params["text"] for c in slack.to("/api/chat.postMessage")
            if c.params["channel"].startswith("D")]


def task(i: int, state: str) -> JobDetail:
    done = state == "COMPLETED"
    failed = state == "FAILED"
    return detail(job(f"8000_{i}", "rl-grid", state=state,
                      verdict="done" if done else "failed" if failed else "healthy",
                      recommendation=DONE if done else None))


async def test_an_array_in_waves_is_told_completed_once(
        slack: FakeSlack, store: RedisStore, tmp_path: Path, clock: FakeClock) -> None:
    """Wave 1 done while wave 2 runs: no DM; wave 2 done: one DM counting all 8 tasks."""
    await notify_on(store)  # alice asked for job-end DMs
    rows = [task(i, "RUNNING") for i in range(4)] + [task(i, "PENDING") for i in range(4, 8)]
    sweeper = FakeSweeper(make=lambda: build_result(rows, at=clock()),
                          conf=make_config(store.prefix, tmp_path))
    async with running_bot(slack, store, sweeper, clock) as h:
        await scheduled_sweep(h.bot, 0)
        rows[:] = [task(i, "COMPLETED") for i in range(4)] + [
            task(i, "RUNNING") for i in range(4, 8)]
        clock.advance(1800)
        await scheduled_sweep(h.bot, 1)
        assert dms(slack) == []
        rows[:] = [task(i, "COMPLETED") for i in range(8)]
        clock.advance(1800)
        await scheduled_sweep(h.bot, 2)
    (dm,) = dms(slack)
    assert "rl-grid" in dm and "(×8 tasks)" in dm and "completed" in dm, dm


async def test_a_failed_task_is_told_while_its_array_runs(
        slack: FakeSlack, store: RedisStore, tmp_path: Path, clock: FakeClock) -> None:
    """A task failing while the others run is DMed at once."""
    await notify_on(store)  # alice asked for job-end DMs
    rows = [task(i, "RUNNING") for i in range(4)]
    sweeper = FakeSweeper(make=lambda: build_result(rows, at=clock()),
                          conf=make_config(store.prefix, tmp_path))
    async with running_bot(slack, store, sweeper, clock) as h:
        await scheduled_sweep(h.bot, 0)
        rows[0] = task(0, "FAILED")
        rows[0] = rows[0].model_copy(update={"report": rows[0].report.model_copy(
            update={"state": JobState.FAILED})})
        clock.advance(1800)
        await scheduled_sweep(h.bot, 1)
    (dm,) = dms(slack)
    assert "8000_0" in dm and "FAILED" in dm
