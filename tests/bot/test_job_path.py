"""`/job` answers from a fresh cached sweep, else asks for that job only (never a sweep)."""

from __future__ import annotations

from tests.bot.builders import blocks_text
from tests.bot.conftest import Harness


async def test_cache_miss_asks_for_the_one_job_not_a_sweep(harness: Harness) -> None:
    """With no cached sweep, `/job alpha:4242` is one job query and no sweep at all."""
    _, hook = await harness.command("/job", "alpha:4242")
    (reply,) = await harness.slack.wait_for(hook)
    assert "rl-grpo-qwen-7b" in blocks_text(reply.params["blocks"])
    assert harness.sweeper.jobs == [("alpha", "4242")]
    assert harness.sweeper.sweeps == 0


async def test_fresh_cache_answers_without_asking_the_cluster(harness: Harness) -> None:
    """After a `/jobs` sweep, `/job 4242` comes from the cache: no job query, no new sweep."""
    _, first = await harness.command("/jobs")
    await harness.slack.wait_for(first, 2)  # "Sweeping 1 cluster…", then the cached answer
    harness.clock.advance(5)
    _, hook = await harness.command("/job", "4242")
    (reply,) = await harness.slack.wait_for(hook)
    assert "rl-grpo-qwen-7b" in blocks_text(reply.params["blocks"])
    assert harness.sweeper.jobs == []
    assert harness.sweeper.sweeps == 1


async def test_job_not_in_the_cached_sweep_is_asked_for(harness: Harness) -> None:
    """A job the cached sweep does not hold (another user's, older) is asked for by id."""
    _, first = await harness.command("/jobs")
    await harness.slack.wait_for(first, 2)  # "Sweeping 1 cluster…", then the cached answer
    _, hook = await harness.command("/job", "999")
    (reply,) = await harness.slack.wait_for(hook)
    assert "no job 999" in reply.params["text"]
    assert harness.sweeper.jobs == [(None, "999")]
    assert harness.sweeper.sweeps == 1
