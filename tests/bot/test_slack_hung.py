"""A hung Slack Web API (connection taken, no answer) costs a sweep about one request's bound.

slack_sdk's client waits 30 s for each request, and a scheduled sweep makes its calls one
after another (the collapse DM and its channel fallback, the parent, each table reply, the
change reply, the alerts' reply, the job-end DMs), each paced behind the last: measured
before (below, a new day's sweep of 300 jobs with the API hung), 11 requests were left
hanging in turn, 11 x the bound (330 s at slack_sdk's 30 s), and then the deep-probe offer's
timeout rose out of the sweep (the cancel reconcile after it never ran); a later sweep of the
day, 5 in turn (150 s). Now each request waits
``[slack] api_timeout_seconds`` (default 10 s); once one has timed out, the next is let
through on half that bound (a probe: one slow call must not silence the rest, see
``tests/bot/test_slack_transient.py``), and when it times out too the sweep's other calls give
up unsent (``bot.delivery.posting``): two requests left hanging, 1.5 x the bound. What was not
delivered is kept and the scheduler's retry sends it, once. Fake Slack (hanging on request),
real Redis.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from bot.breaker import GaveUp, posting
from bot.config import ConfigError, DeepProbeSection
from bot.config_file import parse_config as load_config_text
from bot.scheduled import scheduled_sweep
from bot.store import RedisStore
from bot.sweep_result import SweepResult
from tests.bot.builders import (
    FakeClock,
    FakeSweeper,
    blocks_text,
    collapsing,
    detail,
    job,
    sweep_result,
)
from tests.bot.conftest import make_config, notify_on, running_bot
from tests.bot.fake_slack import FakeSlack

pytestmark = pytest.mark.redis

BOUND_S = 0.3
"""The request bound these tests set (``[slack] api_timeout_seconds``)."""
HUNG = ("chat.postMessage", "chat.update", "conversations.open")


def changing_sweeps(clock: FakeClock) -> tuple[FakeSweeper, list[int]]:
    """300 running RL jobs; from the second sweep on, three of them failed, one collapsed
    (a DM to alice, the alerts' reply) and one offers a deep probe."""
    jobs = [detail(job(str(5000 + i), f"rl-ppo-{i}")) for i in range(300)]
    stage = [0]

    def make() -> SweepResult:
        if stage[0] == 0:
            return sweep_result(jobs, at=clock())
        ended = [detail(job(str(5000 + i), f"rl-ppo-{i}", state="FAILED", verdict="failed"))
                 for i in range(3)]
        probe = detail(job("6000", "rl-grid", flags=("deep-probe",)))
        return sweep_result([*ended, *jobs[3:], collapsing(), probe], at=clock())

    return FakeSweeper(make=make, conf=make_config("", Path("."))), stage


def delivered(slack: FakeSlack, needle: str) -> int:
    """How often ``needle`` was posted: in a post's text or its blocks (a change reply's
    lines), whichever shows it more often (the one message counted once)."""
    def count(params: dict[str, object]) -> int:
        blocks = params.get("blocks")
        blocks = json.loads(blocks) if isinstance(blocks, str) else blocks
        body = blocks_text(blocks) if isinstance(blocks, list) else ""
        return max(str(params.get("text")).count(needle), body.count(needle))
    return sum(count(c.params) for c in slack.to("/api/chat.postMessage"))


async def test_a_hung_api_costs_a_new_day_s_sweep_one_bound_and_its_retry_sends_it(
        slack: FakeSlack, store: RedisStore, tmp_path: Path) -> None:
    """A new day's first sweep while Slack hangs: two requests left hanging, the second on
    the probe's half bound (before the breaker: 11, the
    DM and its channel fallback, the parent, its table replies sent unthreaded, the change
    reply, the job-end DM, the deep-probe DM and offer, whose timeout then rose out of the
    sweep), the sweep says it failed; with Slack back, its retry posts each message once."""
    await notify_on(store)  # alice asked for job-end DMs
    clock = FakeClock()
    sweeper, stage = changing_sweeps(clock)
    sweeper.conf = make_config(store.prefix, tmp_path, api_timeout_seconds=BOUND_S).model_copy(
        update={"deep_probe": DeepProbeSection(offer=True)})
    async with running_bot(slack, store, sweeper, clock) as h:
        await scheduled_sweep(h.bot, 0)
        stage[0] = 1
        clock.advance(24 * 3600)  # the next day: a new parent and its full tables
        for method in HUNG:
            slack.hang(method)
        assert await scheduled_sweep(h.bot, 48) is False  # to be retried
        hung = [c.path for c in slack.hung()]
        assert len(hung) == 2, hung  # the first timeout and the probe after it
        slack.unhang()
        assert await scheduled_sweep(h.bot, 48, retry=True) is True
    assert delivered(slack, "Collapse on alpha:4242") == 1  # the DM
    assert delivered(slack, "collapse on `alpha:4242`") == 1  # the alerts' thread reply
    assert delivered(slack, "ended FAILED") == 3  # alice's job-end DMs
    assert delivered(slack, "Deep-probe alpha:6000") == 1  # the offer, not lost
    parents = [c for c in slack.to("/api/chat.postMessage")
               if not c.params.get("thread_ts") and "Jobs ·" in str(c.params.get("text"))]
    assert len(parents) == 2  # yesterday's and today's, once each


async def test_a_hung_edit_gives_up_the_rest_of_an_ordinary_sweep(
        slack: FakeSlack, store: RedisStore, tmp_path: Path) -> None:
    """A later sweep of the day (the parent edited, one change reply, DMs): two requests
    left hanging, the timeout and its probe (before the breaker: 5 in a row), then the retry
    tells each change once."""
    await notify_on(store)  # alice asked for job-end DMs
    clock = FakeClock()
    sweeper, stage = changing_sweeps(clock)
    sweeper.conf = make_config(store.prefix, tmp_path, api_timeout_seconds=BOUND_S)
    async with running_bot(slack, store, sweeper, clock) as h:
        await scheduled_sweep(h.bot, 0)
        stage[0] = 1
        clock.advance(1800)
        for method in HUNG:
            slack.hang(method)
        assert await scheduled_sweep(h.bot, 1) is False
        assert len(slack.hung()) == 2, [c.path for c in slack.hung()]
        slack.unhang()
        assert await scheduled_sweep(h.bot, 1, retry=True) is True
    # Each change once: the kept reply, then the retry's alert line (the DM went out only
    # then; as two replies before the alert joined the sweep's reply).
    assert delivered(slack, "collapsed: rl-grpo-qwen-7b (alpha:4242)") == 1
    assert delivered(slack, "started: rl-grid") == 1
    assert delivered(slack, "collapse on `alpha:4242`") == 1
    assert delivered(slack, "ended FAILED") == 3
    assert len(slack.to("/api/chat.update")) == 1


async def test_calls_of_one_posting_give_up_together_and_no_further(
        slack: FakeSlack, store: RedisStore, tmp_path: Path) -> None:
    """Inside a posting, after two timeouts in a row, later calls (a task it started too)
    are not sent; a call outside it, or in the next posting, is."""
    clock = FakeClock()
    sweeper = FakeSweeper(make=lambda: sweep_result([], at=clock()),
                          conf=make_config(store.prefix, tmp_path))
    async with running_bot(slack, store, sweeper, clock) as h:
        client = h.bot.client
        client.bound(BOUND_S)  # type: ignore[attr-defined]
        slack.hang("chat.postMessage", times=1)
        slack.hang("chat.update", times=1)
        with posting() as scope:
            with pytest.raises(TimeoutError):
                await client.chat_postMessage(channel="C0SWEEP", text="one")
            with pytest.raises(TimeoutError):  # the probe
                await client.chat_update(channel="C0SWEEP", ts="1.1", text="two")
            with pytest.raises(GaveUp):
                await client.chat_update(channel="C0SWEEP", ts="1.1", text="two")
            task = asyncio.create_task(client.chat_postMessage(channel="C0SWEEP", text="three"))
            with pytest.raises(GaveUp):
                await task
        assert (scope.hung, scope.gave_up) == ("chat.update", 2)
        await client.chat_postMessage(channel="C0SWEEP", text="outside")
        with posting():
            await client.chat_postMessage(channel="C0SWEEP", text="next")
    assert [c.params["text"] for c in slack.to("/api/chat.postMessage")] == ["outside", "next"]
    assert slack.to("/api/chat.update") == []


@pytest.mark.parametrize("value", ["0", "-1", "301"])
def test_the_request_bound_is_checked(value: str) -> None:
    with pytest.raises(ConfigError, match="api_timeout_seconds"):
        load_config_text(f'[slack]\napi_timeout_seconds = {value}\n')


def test_the_request_bound_defaults_to_ten_seconds() -> None:
    assert load_config_text("[slack]\n").slack.api_timeout_seconds == 10.0


async def test_the_alerts_reply_slack_refused_is_told_by_the_retry(
        slack: FakeSlack, store: RedisStore, tmp_path: Path) -> None:
    """The sweep's alerts reply ("collapse on ...") refused once with a 500, everything else
    delivered: the sweep is retried and the retry tells it (before: lost, the sweep done)."""
    clock = FakeClock()
    sweeper, stage = changing_sweeps(clock)
    sweeper.conf = make_config(store.prefix, tmp_path)
    async with running_bot(slack, store, sweeper, clock) as h:
        await scheduled_sweep(h.bot, 0)
        stage[0] = 1
        clock.advance(1800)
        slack.fail("chat.postMessage", "internal_error", status=500,
                   when=lambda p: "collapse on `alpha:4242`" in str(p.get("blocks")))
        assert await scheduled_sweep(h.bot, 1) is False
        assert await scheduled_sweep(h.bot, 1, retry=True) is True
    assert delivered(slack, "collapse on `alpha:4242`") == 1
    assert delivered(slack, "Collapse on alpha:4242") == 1  # the DM, not sent again


async def test_jobs_in_the_channel_gives_up_its_tables_together(
        slack: FakeSlack, store: RedisStore, tmp_path: Path) -> None:
    """``/jobs`` in the sweep channel posts the full tables into the day's thread (four
    replies at 300 jobs), holding the channel's pacing: with Slack hung, two requests left
    hanging, a timeout and its probe (before: 4 in a row, the sweep's posts waiting behind
    them)."""
    clock = FakeClock()
    sweeper, _ = changing_sweeps(clock)
    sweeper.conf = make_config(store.prefix, tmp_path, api_timeout_seconds=BOUND_S)
    async with running_bot(slack, store, sweeper, clock) as h:
        await scheduled_sweep(h.bot, 0)  # the day's parent; the client takes the bound
        clock.advance(600)  # the cached sweep is too old: /jobs sweeps, its tables are new
        slack.hang("chat.postMessage")
        _, hook = await h.command("/jobs", user="UALICE")
        await h.bot.tasks.drain()
        assert [c.path for c in slack.hung()] == ["/api/chat.postMessage"] * 2
        assert slack.to(hook)  # the answer itself went by its response_url


async def test_a_hung_response_url_costs_an_answer_one_bound(
        slack: FakeSlack, store: RedisStore, tmp_path: Path) -> None:
    """The response_url hung (Bolt's ``respond()`` waits 30 s for each, its webhook client's
    default): ``/jobs`` answers in several posts ("Sweeping…", then the tables), and each
    waited in turn. Now each waits the same bound; one timed out is sent again on half of
    it (a command's answer has no other retry), and when that times out too the rest of the
    answer gives up (two left hanging); the failures are counted, the bot carries on."""
    clock = FakeClock()
    sweeper, _ = changing_sweeps(clock)
    sweeper.conf = make_config(store.prefix, tmp_path, api_timeout_seconds=BOUND_S)
    async with running_bot(slack, store, sweeper, clock) as h:
        await scheduled_sweep(h.bot, 0)  # the client takes the bound
        clock.advance(600)  # the cached sweep is too old: /jobs sweeps and answers in parts
        slack.hang("response_url")
        await h.command("/jobs", user="UALICE")
        await asyncio.wait_for(h.bot.tasks.drain(), 10)
        assert len(slack.hung("response_url")) == 2, [c.path for c in slack.hung()]
        errors = h.bot.telemetry.response_url_errors
        assert errors.labels(surface="/jobs", error="TimeoutError")._value.get() == 2
