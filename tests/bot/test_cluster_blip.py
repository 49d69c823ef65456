"""A cluster the bot could not read for a sweep or two (an SSH blip, set inactive and back)
has not changed its jobs: when it answers again, nothing already told is told again, neither
the job-end DM nor the thread's change reply, and what did change meanwhile still is."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.scheduled import scheduled_sweep
from bot.store import RedisStore
from tests.bot.builders import FakeClock, FakeSweeper, detail, job, sweep_result
from tests.bot.conftest import make_config, notify_on, running_bot
from tests.bot.fake_slack import FakeSlack


@pytest.mark.parametrize("gap", ["unreachable", "inactive"])
async def test_a_cluster_back_after_a_gap_tells_nothing_twice(
        slack: FakeSlack, store: RedisStore, prefix: str, tmp_path: Path, *, clock: FakeClock,
        gap: str) -> None:
    await notify_on(store)  # alice asked for job-end DMs
    world = {"sft": "RUNNING", "rl": "RUNNING", "down": False}

    def make():  # type: ignore[no-untyped-def]
        if world["down"]:
            gone = {"unreachable": ("alpha",)} if gap == "unreachable" else {
                "inactive": ("alpha",)}
            return sweep_result([], at=clock(), clusters=(), **gone)
        rl = detail(job("4100", "rl-ppo-llama-8b", user="alice", state=world["rl"],
                        verdict="failed" if world["rl"] == "FAILED" else "healthy"))
        sft = detail(job("4300", "sft-mistral-7b", bucket="sft", user="alice",
                         state=world["sft"],
                         verdict="failed" if world["sft"] == "FAILED" else "healthy"))
        return sweep_result([rl, sft], at=clock())

    sweeper = FakeSweeper(make=make, conf=make_config(prefix, tmp_path))
    async with running_bot(slack, store, sweeper, clock) as h:
        def dms() -> list[str]:
            return [c.params["text"] for c in slack.to("/api/chat.postMessage")
                    if c.params["channel"] == "DALICE"]

        def changes() -> list[str]:
            return [c.params["text"] for c in slack.to("/api/chat.postMessage")
                    if c.params.get("thread_ts") and c.params["text"].startswith("Changes")]

        await scheduled_sweep(h.bot, 0)
        clock.advance(1800)
        world["sft"] = "FAILED"
        await scheduled_sweep(h.bot, 1)  # 4300 fails: told once
        clock.advance(1800)
        assert (len(dms()), len(changes())) == (1, 1)
        world["down"] = True
        await scheduled_sweep(h.bot, 2)  # alpha not read
        clock.advance(1800)
        world["down"] = False
        await scheduled_sweep(h.bot, 3)  # back, nothing new
        clock.advance(1800)
        assert (len(dms()), len(changes())) == (1, 1)
        world["down"], world["rl"] = True, "FAILED"
        await scheduled_sweep(h.bot, 4)
        clock.advance(1800)
        world["down"] = False
        await scheduled_sweep(h.bot, 5)  # 4100 failed while alpha was not read: told now
    assert len(dms()) == 2 and "rl-ppo-llama-8b" in dms()[1]
    assert len(changes()) == 2 and "4300" not in changes()[1]
