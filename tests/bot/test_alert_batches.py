"""Collapse alerts batched per recipient, and sent before the sweep's tables (fake Slack, signed
presses, real Redis).

Seen in a dry run of ``jobtables bot`` over ~2,100 replayed jobs: 110 collapse DMs to one owner
in one sweep (one per job: a DM people mute), and every one of them posted after the day's full
tables (~70 paced posts, over a minute). An owner's new collapses of one sweep come as one DM
(split only where Slack's limits force it), each job with its evidence line and its own buttons,
each button bound to its own alert; the alerts go out before the channel's tables.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest

from bot.scheduled import scheduled_sweep
from bot.store import RedisStore
from report.chunks import MESSAGE_BLOCKS, MESSAGE_CHARS, SECTION_CHARS
from report.models import JobDetail
from tests.bot.builders import FakeClock, FakeSweeper, collapsing, detail, job, sweep_result
from tests.bot.conftest import Harness, make_config, running_bot
from tests.bot.fake_slack import Call, FakeSlack

pytestmark = pytest.mark.redis

DM = "DALICE"  # the fake conversations.open answers D + the user id without its U


@asynccontextmanager
async def bot_with(slack: FakeSlack, store: RedisStore, clock: FakeClock, tmp_path: Path,
                   jobs: list[JobDetail], **slack_conf: Any) -> AsyncIterator[Harness]:
    sweeper = FakeSweeper(make=lambda: sweep_result(jobs, at=clock()),
                          conf=make_config(store.prefix, tmp_path, **slack_conf))
    async with running_bot(slack, store, sweeper, clock) as h:
        yield h


def blocks_of(call: Call) -> list[dict[str, Any]]:
    blocks = call.params.get("blocks") or []
    return json.loads(blocks) if isinstance(blocks, str) else list(blocks)


def posts_to(slack: FakeSlack, channel: str) -> list[Call]:
    return [c for c in slack.to("/api/chat.postMessage")
            if c.params["channel"] == channel and c.status == 200]


def buttons(blocks: list[dict[str, Any]]) -> dict[str, list[str]]:
    """Each job ref -> the action_ids of the buttons whose value names it."""
    out: dict[str, list[str]] = {}
    for block in blocks:
        if block.get("type") == "actions":
            for element in block["elements"]:
                out.setdefault(element["value"], []).append(element["action_id"])
    return out


def refs(ids: list[str]) -> list[str]:
    return [f"alpha:{i}" for i in ids]


async def episodes_state(h: Harness, ids: list[str]) -> dict[str, str]:
    from bot.alerts import episode_name
    out = {}
    for i in ids:
        doc = await h.bot.store.get_doc(episode_name("alpha", i))
        out[i] = doc["state"] if doc else "none"
    return out


def within_limits(blocks: list[dict[str, Any]]) -> None:
    assert len(blocks) <= MESSAGE_BLOCKS
    chars = 0
    for block in blocks:
        texts = [block["text"]["text"]] if isinstance(block.get("text"), dict) else [
            e["text"] for e in block.get("elements", []) if isinstance(e.get("text"), str)]
        for text in texts:
            assert len(text) <= SECTION_CHARS
            chars += len(text)
    assert chars <= MESSAGE_CHARS


async def test_twelve_collapses_of_one_owner_are_one_dm_whose_buttons_each_act_on_their_job(
        slack: FakeSlack, store: RedisStore, clock: FakeClock, tmp_path: Path) -> None:
    ids = [str(5000 + i) for i in range(12)]
    exempt = ids[5]
    jobs = [collapsing(i, flags=("ablation-exempt",) if i == exempt else ()) for i in ids]
    jobs.append(detail(job("4100", "rl-ppo-llama-8b")))
    async with bot_with(slack, store, clock, tmp_path, jobs) as h:
        await scheduled_sweep(h.bot, 0)
        dms = posts_to(slack, DM)
        assert len(dms) == 1, [c.params.get("text") for c in dms]
        blocks = blocks_of(dms[0])
        within_limits(blocks)
        shown = buttons(blocks)
        assert sorted(shown) == sorted(refs(ids))
        for i in ids:
            if i == exempt:  # ablation-exempt: a recommendation, acknowledge and no cancel
                assert "cancel_salvage" not in shown[f"alpha:{i}"]
                assert "acknowledge" in shown[f"alpha:{i}"]
            else:
                assert {"cancel_salvage", "keep_running", "snooze"} <= set(shown[f"alpha:{i}"])
        text = json.dumps(blocks)
        for i in ids:  # each job's evidence line is in its entry
            assert f"alpha:{i}" in text
        assert text.count("grad_norm 2.8 &gt; 1.0") >= len(ids)

        # Pressing one job's Cancel cancels that job only, through the real press path.
        await h.press_alert("cancel_salvage", user="UALICE", ref=f"alpha:{ids[3]}")
        await h.bot.tasks.drain()
        assert h.sweeper.cancels == [("alpha", ids[3])]
        states = await episodes_state(h, ids)
        assert states[ids[3]] == "closed"
        assert all(s == "open" for i, s in states.items() if i != ids[3])
        # The message keeps every other job's buttons; the pressed job's are gone.
        final = blocks_of(slack.to("/api/chat.update")[-1])
        left = buttons(final)
        assert f"alpha:{ids[3]}" not in left
        assert sorted(left) == sorted(r for r in refs(ids) if r != f"alpha:{ids[3]}")

        # Another job's Keep running settles that job only; the exempt one acknowledges.
        await h.press_alert("keep_running", user="UALICE", ref=f"alpha:{ids[7]}")
        await h.press_alert("acknowledge", user="UALICE", ref=f"alpha:{exempt}")
        await h.bot.tasks.drain()
        states = await episodes_state(h, ids)
        assert {i for i, s in states.items() if s == "closed"} == {ids[3], ids[7], exempt}
        assert h.sweeper.cancels == [("alpha", ids[3])]

        # A second sweep of the same collapses sends nothing new (one alert per episode).
        before = len(slack.to("/api/chat.postMessage"))
        await scheduled_sweep(h.bot, 1)
        assert len(posts_to(slack, DM)) == 1
        assert len(slack.to("/api/chat.postMessage")) >= before


async def test_a_batch_button_naming_a_job_outside_its_message_is_refused(
        slack: FakeSlack, store: RedisStore, clock: FakeClock, tmp_path: Path) -> None:
    """A tampered value naming a job that message did not alert on finds no alert there."""
    ids = ["6001", "6002", "6003"]
    jobs = [collapsing(i) for i in ids]
    async with bot_with(slack, store, clock, tmp_path, jobs) as h:
        await scheduled_sweep(h.bot, 0)
        where = h.alert_post("alpha:6001")
        _, hook = await h.press("cancel_salvage", "alpha:4100", user="UOPS",
                                blocks=where["blocks"], channel=where["channel"], ts=where["ts"])
        (reply,) = await slack.wait_for(hook)
        await h.bot.tasks.drain()
    assert reply.params["response_type"] == "ephemeral"
    assert h.sweeper.cancels == []


async def test_a_batch_deep_probe_naming_a_job_outside_its_message_probes_nothing(
        slack: FakeSlack, store: RedisStore, clock: FakeClock, tmp_path: Path) -> None:
    """A batched alert's Deep-probe button, its value tampered to a job that message did not
    alert on: refused and audited ``tampered``, nothing probed, nothing posted. Found driving
    the real bot over SLURM: the owner's batched DM probed another user's job and posted its
    verdict in the DM's thread (no index of that job in the message read as "no alert")."""
    ids = ["6001", "6002", "6003"]
    jobs = [*(collapsing(i) for i in ids), detail(job("4100", "rl-ppo-llama-8b"))]
    async with bot_with(slack, store, clock, tmp_path, jobs) as h:
        await scheduled_sweep(h.bot, 0)
        where = h.alert_post("alpha:6001")
        posts = len(slack.to("/api/chat.postMessage"))
        _, hook = await h.press("deep_probe", "alpha:4100", user="UALICE",
                                blocks=where["blocks"], channel=where["channel"], ts=where["ts"])
        (reply,) = await slack.wait_for(hook)
        await h.bot.tasks.drain()
        audit = await h.bot.store.audit_entries()
    assert "does not belong to this alert" in reply.params["text"], reply.params["text"]
    assert len(slack.to("/api/chat.postMessage")) == posts
    assert [(e["action"], e["outcome"], e["job_id"]) for e in audit] == [
        ("deep_probe", "tampered", "4100")]


async def test_a_forged_cancel_on_an_exempt_alert_is_refused_saying_why(
        slack: FakeSlack, store: RedisStore, clock: FakeClock, tmp_path: Path) -> None:
    """A cancel forged for an ablation-exempt run's alert (it offered Acknowledge only) is
    refused, naming the exemption; it said "a no-kill run" for any such alert, though no_kill
    was not set (found pressing one on the real bot)."""
    jobs = [collapsing("6001", flags=("ablation-exempt",)), collapsing("6002")]
    async with bot_with(slack, store, clock, tmp_path, jobs) as h:
        await scheduled_sweep(h.bot, 0)
        where = h.alert_post("alpha:6001")
        assert buttons(where["blocks"])["alpha:6001"] == ["acknowledge", "deep_probe"]
        _, hook = await h.press("cancel_salvage", "alpha:6001", user="UALICE",
                                blocks=where["blocks"], channel=where["channel"], ts=where["ts"])
        (reply,) = await slack.wait_for(hook)
        await h.bot.tasks.drain()
    assert "offered no cancel (the run is ablation-exempt)" in reply.params["text"], \
        reply.params["text"]
    assert "no-kill" not in reply.params["text"]
    assert h.sweeper.cancels == []


async def test_many_collapses_take_as_few_messages_as_the_limits_allow(
        slack: FakeSlack, store: RedisStore, clock: FakeClock, tmp_path: Path) -> None:
    ids = [str(7000 + i) for i in range(60)]
    jobs = [collapsing(i) for i in ids]
    async with bot_with(slack, store, clock, tmp_path, jobs) as h:
        await scheduled_sweep(h.bot, 0)
    dms = posts_to(slack, DM)
    assert 1 < len(dms) < len(ids)
    listed: list[str] = []
    for call in dms:
        blocks = blocks_of(call)
        within_limits(blocks)
        listed += list(buttons(blocks))
    assert sorted(listed) == sorted(refs(ids))  # each job once, in one message
    # As few as the limits allow: no two neighbouring messages' jobs would fit in one.
    for first, second in pairwise(dms):
        a, b = blocks_of(first), blocks_of(second)
        jobs_b = [blk for blk in b if blk.get("type") != "section"
                  or "collapses" not in blk["text"]["text"].split("\n")[0]]
        merged = a + jobs_b
        too_many = len(merged) > MESSAGE_BLOCKS
        chars = sum(len(blk["text"]["text"]) for blk in merged
                    if isinstance(blk.get("text"), dict))
        assert too_many or chars > MESSAGE_CHARS


async def test_unknown_owners_collapses_are_batched_in_the_channel(
        slack: FakeSlack, store: RedisStore, clock: FakeClock, tmp_path: Path) -> None:
    ids = ["8001", "8002", "8003", "8004", "8005"]
    jobs = [collapsing(i, user="carol") for i in ids]  # carol is mapped to no Slack user
    async with bot_with(slack, store, clock, tmp_path, jobs) as h:
        await scheduled_sweep(h.bot, 0)
        alerts = [c for c in posts_to(slack, "C0SWEEP") if buttons(blocks_of(c))]
        assert len(alerts) == 1
        assert sorted(buttons(blocks_of(alerts[0]))) == sorted(refs(ids))
        await h.press_alert("snooze", user="UOPS", ref="alpha:8004")
        await h.bot.tasks.drain()
        states = await episodes_state(h, ids)
    assert {i for i, s in states.items() if s == "closed"} == {"8004"}


async def test_a_single_collapse_reads_as_before(
        slack: FakeSlack, store: RedisStore, clock: FakeClock, tmp_path: Path) -> None:
    from bot.alert_messages import collapse_message

    jobs = [collapsing("4242"), detail(job("4100", "rl-ppo-llama-8b"))]
    async with bot_with(slack, store, clock, tmp_path, jobs) as h:
        await scheduled_sweep(h.bot, 0)
    (dm,) = posts_to(slack, DM)
    assert blocks_of(dm) == collapse_message(jobs[0], can_cancel=True).blocks


async def test_collapse_alerts_go_out_before_the_sweeps_full_tables(
        slack: FakeSlack, store: RedisStore, clock: FakeClock, tmp_path: Path) -> None:
    """The first sweep of a period posts the full tables; the DM is sent before them."""
    healthy = [detail(job(str(5000 + i), f"rl-run-{i:03d}")) for i in range(150)]
    jobs = [*healthy, collapsing("4242")]
    async with bot_with(slack, store, clock, tmp_path, jobs) as h:
        await scheduled_sweep(h.bot, 0)
    posts = [c for c in slack.to("/api/chat.postMessage") if c.status == 200]
    dm_at = next(n for n, c in enumerate(posts) if c.params["channel"] == DM)
    tables = [n for n, c in enumerate(posts)
              if c.params["channel"] == "C0SWEEP" and c.params.get("thread_ts")
              and "┌" in json.dumps(blocks_of(c), ensure_ascii=False) + c.params.get("text", "")]
    assert len(tables) >= 2
    assert dm_at < tables[0]


@pytest.mark.parametrize("took_effect", [False, True])
async def test_a_cancel_crashed_in_a_batch_is_reconciled_on_its_job_only(
        slack: FakeSlack, store: RedisStore, clock: FakeClock, tmp_path: Path,
        took_effect: bool) -> None:
    """A restart settles a cancel a crash interrupted: the batched message is edited on that
    job's part only (the others keep their buttons); an interrupted one gets its own back."""
    from bot.reconcile import RECONCILE_AFTER_S
    from tests.bot.conftest import make_store
    from tests.bot.test_crash import Crash

    ids = ["6101", "6102", "6103"]
    cancelled: set[str] = set()

    def make() -> Any:
        return sweep_result([detail(job(i, "rl-grpo-qwen-7b", state="CANCELLED", verdict="done"))
                             if i in cancelled else collapsing(i) for i in ids], at=clock())

    sweeper = FakeSweeper(make=make, conf=make_config(store.prefix, tmp_path))
    sweeper.on_cancel = lambda c, j: cancelled.add(j)
    async with running_bot(slack, store, sweeper, clock) as first:
        await scheduled_sweep(first.bot, 0)
        owner: Any = first.bot.sweeper if took_effect else first.bot.client
        Crash("cancel" if took_effect else "chat_update", 1).wrap(
            owner, "cancel" if took_effect else "chat_update")
        await first.press_alert("cancel_salvage", user="UALICE", ref="alpha:6102")
        await first.bot.tasks.drain()
    clock.advance(RECONCILE_AFTER_S + 1)
    restarted = make_store(store.prefix)
    try:
        async with running_bot(slack, restarted, sweeper, clock) as second:
            assert len(await second.bot.actions.reconcile()) == 1
            final = slack.to("/api/chat.update")[-1]
            left = buttons(blocks_of(final))
            if not took_effect:  # pressed again from its own restored buttons: cancelled once
                await second.press_alert("cancel_salvage", user="UALICE", ref="alpha:6102")
                await second.bot.tasks.drain()
    finally:
        await restarted.aclose()
    assert final.params["ts"] == h_ts(slack, "alpha:6101")
    assert {"alpha:6101", "alpha:6103"} <= set(left)
    for other in ("alpha:6101", "alpha:6103"):
        assert "cancel_salvage" in left[other]
    if took_effect:
        assert "alpha:6102" not in left
        assert "settled after a restart" in final.params["text"]
    else:
        assert "cancel_salvage" in left["alpha:6102"], "its buttons are back"
        assert "interrupted before it took effect" in final.params["text"]
    assert sweeper.cancels == [("alpha", "6102")]


def h_ts(slack: FakeSlack, ref: str) -> str:
    """The ts of the first alert message naming ``ref`` in its buttons."""
    return next(c.answer["ts"] for c in slack.to("/api/chat.postMessage")
                if ref in buttons(blocks_of(c)))


async def test_two_presses_close_together_on_one_batch_keep_both_outcomes(
        slack: FakeSlack, store: RedisStore, clock: FakeClock, tmp_path: Path) -> None:
    """The owner goes down the list: Keep running on one job, then Snooze on the next before
    the first edit reached their client (the second press carries the message as first
    posted). The message ends with neither job's buttons and both outcomes; the third keeps
    its buttons."""
    ids = ["6201", "6202", "6203"]
    async with bot_with(slack, store, clock, tmp_path, [collapsing(i) for i in ids]) as h:
        await scheduled_sweep(h.bot, 0)
        where = h.alert_post("alpha:6201")  # the blocks as posted, for both presses
        for action, ref in (("keep_running", "alpha:6201"), ("snooze", "alpha:6202")):
            await h.press(action, ref, user="UALICE", blocks=where["blocks"],
                          channel=where["channel"], ts=where["ts"])
            await h.bot.tasks.drain()
        final = blocks_of(slack.to("/api/chat.update")[-1])
    assert sorted(buttons(final)) == ["alpha:6203"]
    text = json.dumps(final, ensure_ascii=False)
    assert "Kept running by <@UALICE>" in text and "Snoozed by <@UALICE>" in text


async def test_a_shutdown_mid_delivery_leaves_the_unsent_alerts_to_the_next_sweep(
        slack: FakeSlack, store: RedisStore, clock: FakeClock, tmp_path: Path) -> None:
    """Every new episode is claimed before any alert is sent. A SIGTERM (a rollout) that
    cancels the sweep after the owner's DM went out must not leave the other recipients'
    alerts claimed and unsent: their claims would silence those collapses for the claim's
    lifetime (expire_hours). The restarted bot's next sweep sends them, once; the DM that
    went out is not sent again."""
    from tests.bot.conftest import make_store
    from tests.bot.test_crash import Crash

    jobs = [collapsing("6301"), collapsing("6302"), collapsing("6311", user="carol"),
            collapsing("6312", user="carol")]
    sweeper = FakeSweeper(make=lambda: sweep_result(jobs, at=clock()),
                          conf=make_config(store.prefix, tmp_path))
    async with running_bot(slack, store, sweeper, clock) as first:
        Crash("chat_postMessage", 1).wrap(first.bot.client, "chat_postMessage")
        with pytest.raises(asyncio.CancelledError):
            await scheduled_sweep(first.bot, 0)
    assert [sorted(buttons(blocks_of(c))) for c in slack.to("/api/chat.postMessage")] == [
        ["alpha:6301", "alpha:6302"]]
    restarted = make_store(store.prefix)
    try:
        async with running_bot(slack, restarted, sweeper, clock) as second:
            await scheduled_sweep(second.bot, 1)
    finally:
        await restarted.aclose()
    alerted = [sorted(buttons(blocks_of(c))) for c in slack.to("/api/chat.postMessage")
               if buttons(blocks_of(c))]
    assert alerted == [["alpha:6301", "alpha:6302"], ["alpha:6311", "alpha:6312"]]


async def test_a_press_during_another_jobs_cancel_leaves_that_cancel_shown(
        slack: FakeSlack, store: RedisStore, clock: FakeClock, tmp_path: Path) -> None:
    """The owner presses Cancel on one job of a batched DM and, while it salvages and
    cancels, Keep running on the next (their client still showing the message as posted).
    The second press's edit must not put the cancelling job's buttons back (a Keep running
    pressed on them then would settle a job being cancelled): its part still says the cancel
    is under way, and the end of the cancel gives both outcomes."""
    ids = ["6401", "6402", "6403"]
    release = asyncio.Event()
    async with bot_with(slack, store, clock, tmp_path, [collapsing(i) for i in ids]) as h:
        real = h.bot.sweeper.cancel

        async def held(cluster: str, job_id: str, *, uid: str | None = None,
                       owner: str | None = None) -> None:
            await release.wait()
            await real(cluster, job_id, uid=uid, owner=owner)

        h.bot.sweeper.cancel = held  # type: ignore[method-assign]
        await scheduled_sweep(h.bot, 0)
        where = h.alert_post("alpha:6401")
        await h.press("cancel_salvage", "alpha:6401", user="UALICE", blocks=where["blocks"],
                      channel=where["channel"], ts=where["ts"])
        await slack.wait_for("/api/chat.update", 1)  # "Cancel requested ... salvaging"
        await h.press("keep_running", "alpha:6402", user="UALICE", blocks=where["blocks"],
                      channel=where["channel"], ts=where["ts"])
        await slack.wait_for("/api/chat.update", 2)
        during = blocks_of(slack.to("/api/chat.update")[1])
        release.set()
        await h.bot.tasks.drain()
        final = blocks_of(slack.to("/api/chat.update")[-1])
    assert sorted(buttons(during)) == ["alpha:6403"]
    assert "Cancel requested by <@UALICE>" in json.dumps(during, ensure_ascii=False)
    assert sorted(buttons(final)) == ["alpha:6403"]
    text = json.dumps(final, ensure_ascii=False)
    assert "Cancelled by <@UALICE>" in text and "Kept running by <@UALICE>" in text


def test_failed_cancels_in_a_full_batch_never_cut_a_jobs_buttons() -> None:
    """A failed cancel keeps its job's buttons and adds its outcome line beside them; in a
    batched message filled to Slack's block limit, a few of those (presses during one SSH
    outage) went past 50 blocks and the cut took the last job's buttons off the message. Each
    job keeps its buttons; the newest failure line is shown."""
    from bot.alert_messages import collapse_batch_messages, outcome_blocks

    ids = [str(7100 + i) for i in range(40)]
    blocks = collapse_batch_messages([(collapsing(i), True, None) for i in ids])[0][0].blocks
    shown = sorted(buttons(blocks))
    assert len(blocks) >= MESSAGE_BLOCKS - 3  # a message the block limit fills
    for n, ref in enumerate(shown[:6]):
        line = f"❌ Cancel by <@UALICE> failed ({n}): alpha could not be read"
        blocks = outcome_blocks(blocks, line, keep_buttons=True, ref=ref)
        assert len(blocks) <= MESSAGE_BLOCKS
        assert sorted(buttons(blocks)) == shown
        assert line in json.dumps(blocks, ensure_ascii=False)
