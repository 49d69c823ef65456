"""The day's parent message: edited in place, changes threaded, survives a restart (fake Slack,
fake clock, real Redis)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from bot.digest_posting import Pacer
from bot.scheduled import scheduled_sweep
from bot.store import RedisStore
from probes.models import JobState
from report.models import JobDetail
from tests.bot.builders import FakeClock, FakeSweeper, blocks_text, collapsing, detail, job
from tests.bot.builders import sweep_result as build_result
from tests.bot.conftest import Harness, make_config, running_bot
from tests.bot.fake_slack import Call, FakeSlack

pytestmark = pytest.mark.redis


class World:
    """The jobs the fake cluster reports; tests edit ``jobs`` between sweeps."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.jobs: list[JobDetail] = [
            detail(job("4100", "rl-ppo-llama-8b")),
            detail(job("4300", "sft-mistral-7b", bucket="sft", user="bob")),
        ]
        self.labels: dict[tuple[str, str], dict[str, str]] = {}

    def fail(self, job_id: str) -> None:
        self.jobs = [detail(d.report.model_copy(update={
            "state": JobState.FAILED, "verdict": "failed", "trend": "Traceback: CUDA error"}))
            if d.report.job_id == job_id else d for d in self.jobs]


@pytest.fixture
def world(clock: FakeClock) -> World:
    return World(clock)


def no_pacing(h: Harness) -> None:
    h.bot.digest.pacer = Pacer(0.0)


@asynccontextmanager
async def bot_for(slack: FakeSlack, store: RedisStore, world: World, tmp_path: Path,
                  **digest: Any) -> AsyncIterator[Harness]:
    config = make_config(store.prefix, tmp_path)
    if digest:
        config = config.model_copy(update={"digest": config.digest.model_copy(update=digest)})
    sweeper = FakeSweeper(make=lambda: build_result(world.jobs, at=world.clock(),
                                                              labels=world.labels), conf=config)
    async with running_bot(slack, store, sweeper, world.clock) as h:
        no_pacing(h)
        yield h


def parents(slack: FakeSlack) -> list[Call]:
    return [c for c in slack.to("/api/chat.postMessage")
            if c.params["channel"] == "C0SWEEP" and not c.params.get("thread_ts")]


def replies(slack: FakeSlack) -> list[Call]:
    return [c for c in slack.to("/api/chat.postMessage") if c.params.get("thread_ts")]


def text_of(call: Call) -> str:
    blocks = call.params.get("blocks") or []
    if isinstance(blocks, str):
        import json
        blocks = json.loads(blocks)
    text, body = call.params.get("text", ""), blocks_text(blocks)
    return text if body == text else text + "\n" + body  # a text-only post's own sections


async def sweep(h: Harness, advance_s: float = 1800) -> None:
    await scheduled_sweep(h.bot, 0)
    h.clock.advance(advance_s)


async def test_two_sweeps_without_change_post_one_parent_and_nothing_more(
        slack: FakeSlack, store: RedisStore, world: World, tmp_path: Path) -> None:
    """Sweep 1 opens the parent (tables in its thread); sweep 2 only edits the parent."""
    async with bot_for(slack, store, world, tmp_path) as h:
        await sweep(h)
        first_replies = len(replies(slack))
        await sweep(h)
    assert len(parents(slack)) == 1
    assert first_replies >= 1  # the full tables at the start of the period
    assert len(replies(slack)) == first_replies
    [update] = slack.to("/api/chat.update")
    assert update.params["ts"] == parents(slack)[0].params.get("ts", update.params["ts"])
    body = text_of(update)
    assert "as of 16:30Z" in body and "sweep 2 of this period" in body
    assert "RL: 1 job" in body and "SFT: 1 job" in body


async def test_a_failure_between_sweeps_is_one_reply_with_that_row(
        slack: FakeSlack, store: RedisStore, world: World, tmp_path: Path) -> None:
    """Only the job that failed is in the new reply, with its row."""
    async with bot_for(slack, store, world, tmp_path) as h:
        await sweep(h)
        before = len(replies(slack))
        world.fail("4300")
        await sweep(h)
        await sweep(h)  # nothing changed since: nothing new
    new = replies(slack)[before:]
    assert len(new) == 1, [text_of(n) for n in new]
    text = text_of(new[0])
    assert "🔥 `alpha:4300` sft-mistral-7b failed" in text  # its line (no bullet besides)
    assert "• failed" not in text
    assert "sft-mistral-7b [FAILED]" in text  # its table row
    assert "rl-ppo-llama-8b" not in text


async def test_a_job_restarting_a_failed_attempt_is_one_reply(
        slack: FakeSlack, store: RedisStore, world: World, tmp_path: Path) -> None:
    """A Kubernetes Job whose attempt failed and that its controller restarts (RUNNING,
    verdict restarting) is told in the thread, with how the attempt ended; once."""
    async with bot_for(slack, store, world, tmp_path) as h:
        await sweep(h)
        before = len(replies(slack))
        world.jobs = [detail(d.report.model_copy(update={
            "verdict": "restarting",
            "trend": "Retry 1 of backoffLimit 6: OOMKilled, exit 137; retry pending"}))
            if d.report.job_id == "4100" else d for d in world.jobs]
        await sweep(h)
        await sweep(h)  # still restarting: nothing new
    new = replies(slack)[before:]
    assert len(new) == 1, [text_of(n) for n in new]
    text = text_of(new[0])
    assert "restarted: rl-ppo-llama-8b (alpha:4100)" in text
    assert "Retry 1 of backoffLimit 6: OOMKilled, exit 137" in text
    assert "sft-mistral-7b" not in text


async def test_a_running_job_left_with_no_pods_is_one_failed_reply(
        slack: FakeSlack, store: RedisStore, world: World, tmp_path: Path) -> None:
    """A Kubernetes Job still active with no pods (the silent wedge: terminal, though the
    API calls it running) is told as failed, with why, once; its state turning FAILED
    later tells nothing more."""
    async with bot_for(slack, store, world, tmp_path) as h:
        await sweep(h)
        before = len(replies(slack))
        world.jobs = [detail(d.report.model_copy(update={
            "verdict": "failed", "flags": ["silent-wedge"],
            "trend": "silent wedge: running but 0 pods"}))
            if d.report.job_id == "4100" else d for d in world.jobs]
        await sweep(h)
        await sweep(h)
        world.fail("4100")
        await sweep(h)
    new = replies(slack)[before:]
    assert len(new) == 1, [text_of(n) for n in new]
    text = text_of(new[0])
    assert "🔥 `alpha:4100` rl-ppo-llama-8b failed: silent wedge: running but 0 pods" in text


async def test_a_job_that_restarted_between_sweeps_is_one_reply(
        slack: FakeSlack, store: RedisStore, world: World, tmp_path: Path) -> None:
    """A Job whose attempt failed and whose retry runs again by the next sweep (never seen
    restarting): its restart count rose, one reply names it; once."""
    counts: dict[tuple[str, str], int] = {}
    config = make_config(store.prefix, tmp_path)
    sweeper = FakeSweeper(make=lambda: build_result(world.jobs, at=world.clock(),
                                                    restarts=counts), conf=config)
    async with running_bot(slack, store, sweeper, world.clock) as h:
        no_pacing(h)
        await sweep(h)
        before = len(replies(slack))
        counts[("alpha", "4100")] = 1
        await sweep(h)
        await sweep(h)
    new = replies(slack)[before:]
    assert len(new) == 1, [text_of(n) for n in new]
    assert "restarted: rl-ppo-llama-8b (alpha:4100) — 1 restart since the last sweep" \
        in text_of(new[0])


async def test_a_mass_cancel_is_one_short_reply(
        slack: FakeSlack, store: RedisStore, world: World, tmp_path: Path) -> None:
    """300 pending jobs of a bench cancelled at once, and one job failing: one reply, the
    cancels folded into one line, only the failure's row (it was eight replies of 500 lines
    and 500 rows: a thread people mute)."""
    bench = [detail(job(str(5000 + i), f"sft-bench-{i}", bucket="sft", state="PENDING"))
             for i in range(300)]
    world.jobs = [*world.jobs, *bench]
    async with bot_for(slack, store, world, tmp_path) as h:
        await sweep(h)
        before = len(replies(slack))
        world.jobs = [*world.jobs[:2], *(detail(d.report.model_copy(update={
            "state": JobState.CANCELLED, "verdict": "done", "trend": "Cancelled"}))
            for d in bench)]
        world.fail("4300")
        await sweep(h)
    new = replies(slack)[before:]
    assert len(new) == 1, [text_of(n)[:200] for n in new]
    text = text_of(new[0])
    assert "cancelled: 300 jobs on alpha (sft-bench-0, sft-bench-1, sft-bench-2 +297 more)" \
        in text
    assert "🔥 `alpha:4300` sft-mistral-7b failed" in text  # its line (no bullet besides)
    assert "• failed" not in text
    assert "sft-mistral-7b [FAILED]" in text  # the row of the job that needs a human
    assert "sft-bench-299" not in text  # no row, no line per cancelled job
    assert "Rows shown for 1 of 301 changed jobs" in text


async def test_a_cancelled_array_counts_the_tasks_its_pending_record_stands_for(
        slack: FakeSlack, store: RedisStore, world: World, tmp_path: Path) -> None:
    """An --array=0-9%2 cancelled with tasks 0 and 1 started: squeue keeps 4075_0, 4075_1 and
    the unsplit remainder 4075 ('2-9%2', 8 tasks). The thread's line counts 10 tasks and names
    the remainder by its tasks (it read '×3 (alpha:4075, alpha:4075_0, alpha:4075_1)')."""
    arr = [detail(job(i, "datagen-arr", bucket="datagen", state=s))
           for i, s in (("4075_0", "RUNNING"), ("4075_1", "RUNNING"), ("4075", "PENDING"))]
    world.jobs = [*world.jobs, *arr]
    world.labels = {("alpha", "4075"): {"array_tasks": "2-9%2"}}
    async with bot_for(slack, store, world, tmp_path) as h:
        await sweep(h)
        before = len(replies(slack))
        world.jobs = [*world.jobs[:2], *(detail(d.report.model_copy(update={
            "state": JobState.CANCELLED, "verdict": "done"})) for d in arr)]
        await sweep(h)
    (new,) = replies(slack)[before:]
    assert "cancelled: datagen-arr ×10 (alpha:4075_0, alpha:4075_1, alpha:4075 [8 tasks])" \
        in text_of(new), text_of(new)[:600]


async def test_a_new_day_opens_a_new_parent(
        slack: FakeSlack, store: RedisStore, world: World, tmp_path: Path) -> None:
    """The first sweep after midnight UTC posts a new parent with fresh full tables."""
    async with bot_for(slack, store, world, tmp_path) as h:
        await sweep(h, advance_s=8 * 3600)  # 16:00 -> 00:00 next day
        await sweep(h)
    tops = parents(slack)
    assert len(tops) == 2
    assert "Mon 30 Nov 2026" in text_of(tops[0]) and "Tue 01 Dec 2026" in text_of(tops[1])
    assert len({r.params["thread_ts"] for r in replies(slack)}) == 2  # tables in each thread


async def test_a_restart_between_sweeps_repeats_nothing(
        slack: FakeSlack, store: RedisStore, world: World, tmp_path: Path) -> None:
    """A new process on the same Redis edits the same parent and re-reports no change."""
    async with bot_for(slack, store, world, tmp_path) as h:
        await sweep(h)
        world.fail("4300")
        await sweep(h)
    posted = len(slack.to("/api/chat.postMessage"))
    async with bot_for(slack, store, world, tmp_path) as h2:
        await sweep(h2)
    assert len(slack.to("/api/chat.postMessage")) == posted
    updates = slack.to("/api/chat.update")
    assert len({u.params["ts"] for u in updates}) == 1 and len(updates) == 2


async def test_full_tables_every_n_sweeps(
        slack: FakeSlack, store: RedisStore, world: World, tmp_path: Path) -> None:
    """With full_tables_every = 2 the tables are re-posted on every second sweep."""
    async with bot_for(slack, store, world, tmp_path, full_tables_every=2) as h:
        for _ in range(4):
            await sweep(h)
    heads = [r for r in replies(slack) if "Full tables" in text_of(r)]
    assert len(heads) == 3  # sweep 1 (period start), sweep 2 and sweep 4


async def test_collapse_dm_is_told_in_the_thread_and_names_are_escaped(
        slack: FakeSlack, store: RedisStore, world: World, tmp_path: Path) -> None:
    """A collapse DM adds one thread line naming the owner; cluster text is escaped."""
    async with bot_for(slack, store, world, tmp_path) as h:
        await sweep(h)
        world.jobs.append(collapsing())
        world.jobs.append(detail(job("4999", "rl-<!channel>&evil")))
        await sweep(h)
    lines = [text_of(r) for r in replies(slack)]
    told = [t for t in lines if "collapse on `alpha:4242`" in t]
    assert len(told) == 1 and "owner `alice` told by DM" in told[0]
    changes = told[0]  # the sweep's one reply: the alert line stands for the bullet
    assert "collapse on `alpha:4242` rl-grpo-qwen-7b, owner" in changes
    assert "collapsed: rl-grpo-qwen-7b" not in changes
    assert "started: rl-&lt;!channel&gt;&amp;evil" in changes
    assert "<!channel>" not in "".join(lines)


async def test_posts_to_one_channel_are_paced(
        slack: FakeSlack, store: RedisStore, world: World, tmp_path: Path) -> None:
    """Posts to the channel wait out the ~1 s gap Slack allows (fake time, no real sleep)."""
    now = [0.0]
    waits: list[float] = []

    async def fake_sleep(seconds: float) -> None:
        waits.append(seconds)
        now[0] += seconds

    world.jobs = [detail(job(str(5000 + i), f"rl-run-{i:03d}")) for i in range(150)]
    async with bot_for(slack, store, world, tmp_path) as h:
        h.bot.digest.pacer = Pacer(1.0, monotonic=lambda: now[0], sleep=fake_sleep)
        await sweep(h)
    posts = slack.to("/api/chat.postMessage")
    assert len(posts) >= 3
    assert waits == [1.0] * (len(posts) - 1)


async def test_a_completed_cancel_is_told_in_the_thread(
        slack: FakeSlack, store: RedisStore, world: World, tmp_path: Path) -> None:
    """Cancel & salvage by the owner adds "cancelled by `alice`, evidence at …" to the thread;
    a refused press (not the owner) adds nothing."""
    world.jobs.append(collapsing())
    async with bot_for(slack, store, world, tmp_path) as h:
        await sweep(h)
        # Presses on the alert the bot posted (checked against its stored episode): eve, who
        # is neither owner nor operator, is refused first; then alice, the owner, cancels.
        await h.press_alert("cancel_salvage", user="UEVE")
        await h.bot.tasks.drain()
        await h.press_alert("cancel_salvage", user="UALICE")
        await h.bot.tasks.drain()
    assert h.sweeper.cancels == [("alpha", "4242")]
    lines = [r.params["text"] for r in replies(slack) if "cancelled by" in r.params["text"]]
    assert len(lines) == 1
    assert lines[0].startswith("🛑 `alpha:4242` cancelled by `alice`, evidence at `")
    assert str(tmp_path / "incidents") in lines[0]


async def test_a_parent_that_cannot_be_edited_is_replaced_and_posting_goes_on(
        slack: FakeSlack, store: RedisStore, world: World, tmp_path: Path) -> None:
    """chat.update answering that the message will not take edits (deleted by someone:
    ``message_not_found``) opens a new parent; later sweeps edit that one."""
    async with bot_for(slack, store, world, tmp_path) as h:
        await sweep(h)
        slack.fail("chat.update", "message_not_found")
        await sweep(h)
        await sweep(h)
    tops = parents(slack)
    assert len(tops) == 2
    edited = slack.to("/api/chat.update")[-1]
    assert edited.params["ts"] != "1700000000.000001"  # the replacement, not the lost one


@pytest.mark.parametrize("failure", ["internal_error", "ratelimited", "429x4", "invalid_blocks",
                                     "msg_too_long"])
async def test_a_passing_edit_failure_keeps_the_one_parent(
        slack: FakeSlack, store: RedisStore, world: World, tmp_path: Path,
        failure: str) -> None:
    """A chat.update that fails for now (an internal_error, a rate limit, 429s past the
    retries) or for its content (a new message would fail alike) is not a parent gone: no
    second parent and no second full-table dump; the next sweep edits the same parent."""
    async with bot_for(slack, store, world, tmp_path) as h:
        await sweep(h)
        tables = len(slack.to("/api/chat.postMessage"))
        if failure == "429x4":
            slack.rate_limit("chat.update", times=4, retry_after=0)  # 1 try + 3 retries
        else:
            slack.fail("chat.update", failure)
        await sweep(h)
        await sweep(h)
    assert len(parents(slack)) == 1
    assert len(slack.to("/api/chat.postMessage")) == tables  # nothing changed: no reply
    assert len({c.params["ts"] for c in slack.to("/api/chat.update")}) == 1


async def test_several_asking_for_the_tables_at_once_post_them_once(
        slack: FakeSlack, store: RedisStore, world: World, tmp_path: Path) -> None:
    """Three people type /jobs in the channel at once, on one fresh sweep: its full tables go
    into the day's thread once, not once per person (each checked the parent, then posted)."""
    async with bot_for(slack, store, world, tmp_path) as h:
        await sweep(h)
        before = len(replies(slack))
        fresh = build_result(world.jobs, at=world.clock())
        posted = await asyncio.gather(*(h.bot.digest.post_tables(fresh, h.bot.config.current())
                                        for _ in range(3)))
    assert sorted(posted) == [False, False, True]
    asked = [c.params["text"] for c in replies(slack)[before:]]
    assert asked and "asked for with /jobs" in asked[0]
    assert len(asked) == len(set(asked))  # each chunk of the tables once


async def test_tables_left_unposted_by_a_failure_are_posted_by_the_next_asking(
        slack: FakeSlack, store: RedisStore, world: World, tmp_path: Path) -> None:
    """The /jobs that took the tables lock fails before posting (its cached sweep would not
    decode): the lock is released, and the next /jobs posts them."""
    async with bot_for(slack, store, world, tmp_path) as h:
        await sweep(h)
        before = len(replies(slack))
        fresh = build_result(world.jobs, at=world.clock())

        async def broken() -> object:
            raise ValueError("cached sweep did not decode")

        with pytest.raises(ValueError):
            await h.bot.digest.post_tables(fresh, h.bot.config.current(),
                                           whole=broken)  # type: ignore[arg-type]
        assert len(replies(slack)) == before
        assert await h.bot.digest.post_tables(fresh, h.bot.config.current())
    assert len(replies(slack)) > before


async def test_tables_posted_while_a_sweep_lands_keep_what_the_sweep_wrote(
        slack: FakeSlack, store: RedisStore, world: World, tmp_path: Path) -> None:
    """A /jobs posting the full tables takes a while; a scheduled sweep lands meanwhile and
    counts itself on the parent's document. Marking the tables posted wrote back the copy read
    before posting: the sweep's count was lost (the full-tables cadence counts on it), and a
    parent replaced meanwhile would have been put back."""
    async with bot_for(slack, store, world, tmp_path) as h:
        await sweep(h)
        config = h.bot.config.current()
        name, _ = h.bot.digest._parent_name(config.slack.channel, config)
        before = await store.get_doc(name)
        fresh = build_result(world.jobs, at=world.clock())

        async def whole() -> object:
            await scheduled_sweep(h.bot, 1)  # lands while the tables are being made
            return fresh

        assert await h.bot.digest.post_tables(fresh, config,
                                              whole=whole)  # type: ignore[arg-type]
        after = await store.get_doc(name)
    assert after["sweeps"] == before["sweeps"] + 1
    assert after["tables_for"] == fresh.started_at.isoformat()


async def test_a_cancel_told_in_the_thread_is_not_told_again_by_the_next_sweep(
        slack: FakeSlack, store: RedisStore, world: World, tmp_path: Path) -> None:
    """The owner's cancel is told in the thread at once ("cancelled by @alice, evidence at
    …"); the next sweep, which finds the job CANCELLED, does not add a second "cancelled"
    line for it. A job cancelled otherwise (scancel by hand) is still told."""
    world.jobs.append(collapsing())
    async with bot_for(slack, store, world, tmp_path) as h:
        await sweep(h)
        await h.press_alert("cancel_salvage", user="UALICE")
        await h.bot.tasks.drain()
        world.jobs = [detail(d.report.model_copy(update={
            "state": JobState.CANCELLED, "verdict": "done", "trend": "Cancelled"}))
            if d.report.job_id in ("4242", "4300") else d for d in world.jobs]
        world.clock.advance(1800)
        await sweep(h)
    told = "\n".join(text_of(r) for r in replies(slack))
    cancels = [line for line in told.splitlines() if "cancel" in line and "4242" in line]
    assert len(cancels) == 1 and "cancelled by `alice`" in cancels[0], cancels
    assert "cancelled: sft-mistral-7b (alpha:4300)" in told


async def test_a_button_cancel_hides_no_later_job_given_the_same_name(
        slack: FakeSlack, store: RedisStore, world: World, tmp_path: Path) -> None:
    """The button deletes a Kubernetes Job, which is gone by the next sweep (background
    propagation: never seen CANCELLED), so the cancel's "already told" mark is not used up.
    A Job re-created under the same name (new uid) is another job (CONTRACT): when it is
    deleted by hand and a sweep sees it Deleting, that cancel is told in the thread."""
    from bot.alerts import UID_LABEL

    world.jobs.append(collapsing())
    world.labels[("alpha", "4242")] = {UID_LABEL: "uid-first"}
    async with bot_for(slack, store, world, tmp_path) as h:
        await sweep(h)
        await h.press_alert("cancel_salvage", user="UALICE")
        await h.bot.tasks.drain()
        assert h.sweeper.cancel_uids == ["uid-first"]
        world.jobs = [d for d in world.jobs if d.report.job_id != "4242"]  # deleted: gone
        await sweep(h)
        again = detail(job("4242", "rl-grpo-qwen-7b"))
        world.jobs.append(again)
        world.labels[("alpha", "4242")] = {UID_LABEL: "uid-second"}
        await sweep(h)
        world.jobs = [detail(again.report.model_copy(update={
            "state": JobState.CANCELLED, "verdict": "done", "trend": "Deleting"}))
            if d.report.job_id == "4242" else d for d in world.jobs]
        await sweep(h)
    told = "\n".join(text_of(r) for r in replies(slack))
    cancels = [line for line in told.splitlines() if "cancel" in line and "4242" in line]
    assert len(cancels) == 2, cancels  # the button's, then the hand-made one
    assert "cancelled by `alice`" in cancels[0] and "cancelled: " in cancels[1], cancels


async def test_collapses_alerted_in_one_sweep_are_one_thread_line_each_in_one_reply(
        slack: FakeSlack, store: RedisStore, world: World, tmp_path: Path) -> None:
    """Three runs collapse in one sweep (seen on the real SLURM: seven collapse notes, seven
    thread replies in a row): one reply names each alert, once."""
    async with bot_for(slack, store, world, tmp_path) as h:
        await sweep(h)
        before = len(replies(slack))
        world.jobs += [collapsing(job_id) for job_id in ("4242", "4243", "4244")]
        await sweep(h)
    notes = [text_of(r) for r in replies(slack)[before:] if "collapse on `" in text_of(r)]
    assert len(notes) == 1
    for job_id in ("4242", "4243", "4244"):
        assert notes[0].count(f"collapse on `alpha:{job_id}`") == 1
