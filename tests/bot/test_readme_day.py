"""README's "A day in the channel" is what the bot posts for that day, checked here.

The day is driven through the real sweep, digest, alert and action paths against the fake
Slack (fake clock, real Redis): sweeps at 08:00, 08:30 and 09:00, then alice pressing Cancel &
salvage at 09:10. The parent as last edited and each thread reply must equal the section's
fenced blocks (the ```text block, then one ````text block per reply).
``JOBTABLES_REGEN_README=1`` rewrites those blocks with what the bot posted instead.
"""

from __future__ import annotations

import difflib
import json
import os
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from bot.scheduled import scheduled_sweep
from bot.scheduler import interval_number
from bot.store import RedisStore
from probes.models import JobState
from report.models import JobDetail, Recommendation
from tests.bot.builders import FakeClock, FakeSweeper, blocks_text, collapsing, detail, job
from tests.bot.builders import sweep_result as build_result
from tests.bot.conftest import make_config, running_bot
from tests.bot.fake_slack import Call, FakeSlack

pytestmark = pytest.mark.redis

README = Path(__file__).resolve().parents[2] / "README.md"
HEADING = "### A day in the channel"
BLOCK = re.compile(r"^(?P<fence>`{3,4})text\n(?P<body>.*?)\n(?P=fence)$", re.M | re.S)
CHANNEL = "C0SWEEP"


def section_span(readme: str) -> tuple[int, int]:
    start = readme.index(HEADING)
    end = readme.find("\n### ", start + len(HEADING))
    return start, end if end != -1 else len(readme)


def readme_blocks(readme: str) -> list[re.Match[str]]:
    """The section's fenced text blocks: the parent, then one per thread reply."""
    start, end = section_span(readme)
    return list(BLOCK.finditer(readme, start, end))


def rewritten(readme: str, posted: list[str]) -> str:
    """``readme`` with the section's blocks replaced by ``posted`` (parent, then replies)."""
    parent, *replies = readme_blocks(readme)
    out = readme[:parent.start()] + f"```text\n{posted[0]}\n```"
    if replies:
        out += readme[parent.end():replies[0].start()]
        out += "\n\n".join(f"````text\n{text}\n````" for text in posted[1:])
        return out + readme[replies[-1].end():]
    return out + readme[parent.end():]


def shown(call: Call) -> str:
    """What Slack shows for a post: its blocks' text (one line each), else its ``text``."""
    blocks = call.params.get("blocks") or []
    if isinstance(blocks, str):
        blocks = json.loads(blocks)
    return blocks_text(blocks) if blocks else str(call.params.get("text", ""))


def at(hour: int, minute: int) -> datetime:
    return datetime(2026, 11, 30, hour, minute, tzinfo=UTC)


class Day:
    """The jobs on ``alpha`` through the day, in the order a sweep reports them (bucket, then
    id): an RL run, an SFT job and a 500-task datagen array (480 running, 20 pending); a second
    RL run is first seen, collapsing, at 09:00 (the 08:00 tables do not have it)."""

    def __init__(self) -> None:
        tasks = [detail(job(f"8800_{i}", "datagen-swe-shards", bucket="datagen", user="carol",
                            state="RUNNING" if i < 480 else "PENDING")) for i in range(500)]
        self.jobs: list[JobDetail] = [
            detail(job("4100", "rl-ppo-llama-8b")),
            detail(job("4300", "sft-mistral-7b", bucket="sft", user="bob")),
            *tasks,
        ]

    def nine_o_clock(self) -> None:
        """Task 8800_17 fails (disk full), the SFT job completes (its cleanup routine named),
        and rl-grpo-qwen-7b is collapsing."""
        cleanup = Recommendation(action="cleanup",
                                 why="sft-job-cleanup: remove the trial tree, verify inode reclaim")
        changed: dict[str, dict[str, Any]] = {
            "4300": {"state": JobState.COMPLETED, "verdict": "done",
                     "trend": "916/916, loss 1.02", "recommendation": cleanup},
            "8800_17": {"state": JobState.FAILED, "verdict": "failed",
                        "trend": "Traceback: OSError: [Errno 28] No space left on device"},
        }
        self.jobs = [detail(d.report.model_copy(update=changed[d.report.job_id]))
                     if d.report.job_id in changed else d for d in self.jobs]
        self.jobs.insert(1, collapsing("4242", user="alice"))


async def test_readme_day_in_the_channel_is_what_the_bot_posts(
        slack: FakeSlack, store: RedisStore, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # incidents go to the default ./incidents, here
    clock = FakeClock(at(8, 0))
    day = Day()
    config = make_config(store.prefix, tmp_path, incident_dir="./incidents")
    sweeper = FakeSweeper(make=lambda: build_result(day.jobs, at=clock()), conf=config)

    async def sweep() -> None:
        await scheduled_sweep(h.bot, interval_number(clock(), 1800))

    async with running_bot(slack, store, sweeper, clock) as h:
        await sweep()  # 08:00: opens the day's parent, full tables in its thread
        clock.now = at(8, 30)
        before = len(slack.to("/api/chat.postMessage"))
        await sweep()  # 08:30: nothing changed
        assert len(slack.to("/api/chat.postMessage")) == before, "08:30 posted something"
        assert len(slack.to("/api/chat.update")) == 1, "08:30 did not edit the parent once"
        clock.now = at(9, 0)
        day.nine_o_clock()
        await sweep()
        alert = h.alert_post("alpha:4242")
        assert alert["channel"] == "DALICE", "the collapse alert is not alice's DM"
        clock.now = at(9, 10)
        await h.press_alert("cancel_salvage", user="UALICE")
        await h.bot.tasks.drain()
    assert sweeper.cancels == [("alpha", "4242")]

    posts = [c for c in slack.to("/api/chat.postMessage") if c.params["channel"] == CHANNEL]
    [parent] = [c for c in posts if not c.params.get("thread_ts")]
    ts = parent.answer["ts"]
    replies = [c for c in posts if c.params.get("thread_ts") == ts]
    assert len(replies) == len(posts) - 1, "a channel post outside the day's thread"
    edits = [c for c in slack.to("/api/chat.update") if c.params.get("ts") == ts]
    assert [e.params["text"].rsplit("_as of ", 1)[1][:5] for e in edits] == ["08:30", "09:00"]
    posted = [shown(edits[-1]), *(shown(r) for r in replies)]

    readme = README.read_text(encoding="utf-8")
    documented = [m["body"] for m in readme_blocks(readme)]
    if os.environ.get("JOBTABLES_REGEN_README") == "1":
        README.write_text(rewritten(readme, posted), encoding="utf-8")
        documented = [m["body"] for m in readme_blocks(README.read_text(encoding="utf-8"))]
    if documented != posted:
        diff = "\n".join(difflib.unified_diff(
            "\n\n".join(documented).splitlines(), "\n\n".join(posted).splitlines(),
            "README.md (A day in the channel)", "what the bot posted", lineterm=""))
        pytest.fail("README's 'A day in the channel' differs from the bot's output "
                    f"(JOBTABLES_REGEN_README=1 rewrites it):\n{diff}", pytrace=False)
