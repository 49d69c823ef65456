"""A large array's alike failures (and cleanups) are one follow-up line in the thread (fake
Slack, real Redis).

Measured before: 60 tasks of one datagen array dying of one full disk added 60 follow-up lines
('🔥 `alpha:7000_i` datagen-shards failed: Traceback: OSError: … · `incident`') under the
change line that already folds them ('failed: datagen-shards ×60'), and the sweep's change
reply ran to 3 thread messages instead of 1. Alike tasks now share a line counting them, each
task keeping its own incident file; a task that failed otherwise keeps its own line.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from bot.digest_posting import Pacer
from bot.scheduled import scheduled_sweep
from bot.store import RedisStore
from probes.models import JobState
from report.models import JobDetail, Recommendation
from tests.bot.builders import FakeClock, FakeSweeper, blocks_text, detail, job
from tests.bot.builders import sweep_result as build_result
from tests.bot.conftest import Harness, make_config, running_bot
from tests.bot.fake_slack import Call, FakeSlack

pytestmark = pytest.mark.redis


@asynccontextmanager
async def bot_with(slack: FakeSlack, store: RedisStore, clock: FakeClock, tmp_path: Path,
                   jobs: list[JobDetail]) -> AsyncIterator[Harness]:
    sweeper = FakeSweeper(make=lambda: build_result(jobs, at=clock()),
                          conf=make_config(store.prefix, tmp_path))
    async with running_bot(slack, store, sweeper, clock) as h:
        h.bot.digest.pacer = Pacer(0.0)
        yield h


def replies(slack: FakeSlack) -> list[Call]:
    return [c for c in slack.to("/api/chat.postMessage") if c.params.get("thread_ts")]


def shown(call: Call) -> str:
    import json
    blocks = call.params.get("blocks") or []
    blocks = json.loads(blocks) if isinstance(blocks, str) else blocks
    return blocks_text(blocks) or call.params.get("text", "")


def ended(d: JobDetail, state: JobState, trend: str, **update: object) -> JobDetail:
    return detail(d.report.model_copy(update={"state": state, "trend": trend, **update}))


async def test_an_arrays_alike_failures_are_one_follow_up_line(
        slack: FakeSlack, store: RedisStore, clock: FakeClock, tmp_path: Path) -> None:
    """60 shards failing alike: one 🔥 line (×60, the first ids), 60 incident files, one
    reply; the shard that failed otherwise and a lone job keep their own lines."""
    jobs = [detail(job(f"7000_{i}", "datagen-shards", bucket="datagen")) for i in range(61)]
    jobs.append(detail(job("7100", "sft-lone", bucket="sft")))
    async with bot_with(slack, store, clock, tmp_path, jobs) as h:
        await scheduled_sweep(h.bot, 0)
        clock.advance(1800)
        before = len(replies(slack))
        disk = "Traceback: OSError: [Errno 28] No space left on device"
        jobs[:] = [ended(d, JobState.FAILED, disk, verdict="failed") for d in jobs[:60]] + [
            ended(jobs[60], JobState.FAILED, "Traceback: KeyError: 'shard'", verdict="failed"),
            ended(jobs[61], JobState.FAILED, disk, verdict="failed")]
        await scheduled_sweep(h.bot, 1)
    new = [shown(r) for r in replies(slack)[before:]]
    assert len(new) == 1, [n[:200] for n in new]
    fires = [line for line in new[0].splitlines() if line.startswith("🔥")]
    assert len(fires) == 3, fires
    (folded,) = [f for f in fires if "×60" in f]
    assert "datagen-shards ×60 (7000_0, 7000_1, 7000_2 +57 more) failed: " in folded
    assert "(+59 more incident files beside it)" in folded
    assert any("alpha:7000_60" in f and "KeyError" in f for f in fires)
    assert any("alpha:7100" in f and "sft-lone failed" in f for f in fires)
    files = list((tmp_path / "incidents").rglob("*-failure.json"))
    assert len(files) == 62


async def test_an_arrays_completions_with_one_routine_are_one_cleanup_line(
        slack: FakeSlack, store: RedisStore, clock: FakeClock, tmp_path: Path) -> None:
    """Twelve completed shards, one cleanup routine: one ✅ line counting them."""
    jobs = [detail(job(f"7200_{i}", "datagen-swe", bucket="datagen")) for i in range(12)]
    rec = Recommendation(action="cleanup", why="datagen-job-cleanup")
    async with bot_with(slack, store, clock, tmp_path, jobs) as h:
        await scheduled_sweep(h.bot, 0)
        clock.advance(1800)
        before = len(replies(slack))
        jobs[:] = [ended(d, JobState.COMPLETED, "done", verdict="done", recommendation=rec)
                   for d in jobs]
        await scheduled_sweep(h.bot, 1)
    text = "\n".join(shown(r) for r in replies(slack)[before:])
    cleanups = [line for line in text.splitlines() if line.startswith("✅")]
    assert cleanups == ["✅ `alpha:7200_0` datagen-swe ×12 (7200_0, 7200_1, 7200_2 +9 more) "
                        "completed: datagen-job-cleanup"], cleanups
