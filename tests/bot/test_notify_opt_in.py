"""Job-end DMs are asked for: only an owner who typed `/jobs notify on` gets them.

Found by a day of the lab on the real SLURM (quiet-day dry run: ~20 sbatch jobs, the real bot
sweeping every minute into the fake Slack): only jtuser's Slack user had typed `/jobs notify
on`, yet root's and jobtables' owners were DMed "✅ gpu-ci-nightly completed. No cleanup
routine matched; nothing to do." and every completion of theirs, a ping per sweep they never
asked for. The day's thread tells every job end; a DM is the owner's choice. A collapse alert
is no job-end DM: it reaches the owner whatever they chose (tests/bot/test_alerts.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.scheduled import scheduled_sweep
from bot.store import RedisStore
from tests.bot.builders import FakeClock, FakeSweeper, detail, job
from tests.bot.builders import sweep_result as build_result
from tests.bot.conftest import make_config, running_bot
from tests.bot.fake_slack import FakeSlack
from tests.bot.test_notify import completed, dms, failed, notify

pytestmark = pytest.mark.redis


async def test_an_owner_who_never_asked_gets_no_job_end_dm_until_notify_on(
        slack: FakeSlack, store: RedisStore, tmp_path: Path, clock: FakeClock) -> None:
    """carol never typed `/jobs notify`: her job's completion is in the thread, not in a DM;
    after `/jobs notify on` her next job end is DMed to her."""
    jobs = [detail(job("5100", "gpu-ci-nightly", user="carol")),
            detail(job("5101", "sft-qwen7b-lr1e5", user="carol", bucket="sft"))]
    conf = make_config(store.prefix, tmp_path, owners={"carol": "UCAROL"})
    sweeper = FakeSweeper(make=lambda: build_result(jobs, at=clock()), conf=conf)
    async with running_bot(slack, store, sweeper, clock) as h:
        await scheduled_sweep(h.bot, 0)  # the baseline
        jobs[0] = completed(jobs[0])
        clock.advance(1800)
        await scheduled_sweep(h.bot, 1)
        assert dms(slack) == []
        thread = [str(c.params.get("blocks")) for c in slack.to("/api/chat.postMessage")
                  if c.params["channel"] == "C0SWEEP"]
        assert any("alpha:5100" in t and "gpu-ci-nightly" in t for t in thread)
        assert "*on*" in await notify(h, "on", user="UCAROL")
        jobs[1] = failed(jobs[1])
        clock.advance(1800)
        await scheduled_sweep(h.bot, 2)
    (dm,) = dms(slack)
    assert "sft-qwen7b-lr1e5" in dm and "ended FAILED" in dm and "gpu-ci-nightly" not in dm
