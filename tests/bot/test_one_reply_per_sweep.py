"""A sweep's news is one thread reply, and each job is told once in it.

Found by a day of the lab on the real SLURM (quiet-day dry run: ~20 sbatch jobs, the real bot
sweeping every minute into the fake Slack): when rl-grpo-qwen7b-shaped collapsed, the sweep
posted two replies into the day's thread a second apart, 'Changes since 03:37Z (as of 03:38Z)'
and then '🚨 collapse on `local:2412`, owner `jtuser` told by DM'; and inside a change reply a
failed job was told twice, '• failed: sft-llama8b-longctx (local:2419) — FAILED' and '🔥
`local:2419` sft-llama8b-longctx failed: dated agent_logs/ entry: traceback: RuntimeError: shard
7 is corrupt ...', as a completed one was ('• finished: ...' and '✅ ... completed: <cleanup>').
A job's own line (its alert, its diagnosis, its cleanup) tells its change: the bullet saying
the same with less goes.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.store import RedisStore
from probes.models import JobState
from report.models import Recommendation
from tests.bot.builders import FakeClock, collapsing, detail, job
from tests.bot.fake_slack import FakeSlack
from tests.bot.test_digest import World, bot_for, replies, sweep, text_of

pytestmark = pytest.mark.redis


@pytest.fixture
def world(clock: FakeClock) -> World:
    return World(clock)


async def test_a_collapse_a_failure_and_a_completion_are_one_reply_each_job_once(
        slack: FakeSlack, store: RedisStore, world: World, tmp_path: Path) -> None:
    """One sweep: a run collapses, one fails, one completes, one starts: a single reply, with
    the alert line (naming the run), the diagnosis, the cleanup and the start, each once."""
    world.jobs.append(detail(job("4400", "eval-qwen7b-x-aime", bucket="eval")))
    async with bot_for(slack, store, world, tmp_path) as h:
        await sweep(h)
        before = len(replies(slack))
        world.jobs.append(collapsing())
        world.fail("4300")
        world.jobs = [detail(d.report.model_copy(update={
            "state": JobState.COMPLETED, "verdict": "done", "trend": "Completed",
            "recommendation": Recommendation(action="cleanup", why="eval-agentic-cleanup")}))
            if d.report.job_id == "4400" else d for d in world.jobs]
        world.jobs.append(detail(job("4500", "rl-dapo-qwen3b")))
        await sweep(h)
    (reply,) = [text_of(r) for r in replies(slack)[before:]]
    assert reply.count("alpha:4242") == 1 and "🚨 collapse on `alpha:4242`" in reply
    assert "rl-grpo-qwen-7b" in reply.split("🚨", 1)[1].splitlines()[0]
    assert reply.count("alpha:4300") == 1 and "🔥 `alpha:4300` sft-mistral-7b failed" in reply
    assert reply.count("alpha:4400") == 1 and "✅ `alpha:4400`" in reply
    assert "• started: rl-dapo-qwen3b (alpha:4500)" in reply
