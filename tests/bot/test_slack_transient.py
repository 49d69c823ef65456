"""One slow Web API call is not a hung API: the rest of the posting still goes out.

The other side of ``tests/bot/test_slack_hung.py``. Before, the first request of a posting
that timed out marked the API hung and every later call of that sweep (or ``/jobs`` answer)
gave up unsent, even when Slack answered the very next call at once: one slow ``chat.postMessage``
silenced the day's parent, its tables and the job-end DMs until the scheduler's retry, and a
``/jobs`` answer, which has no retry, was simply lost. Now a timeout lets the next call
through on a short probe bound (``bot.delivery.PROBE_SHARE`` of the request bound); answered,
the posting carries on; timed out too, the rest gives up as before. A ``response_url`` answer
that timed out is sent once more, as that probe. Fake Slack (hanging on request), real Redis.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.breaker import GaveUp, posting
from bot.scheduled import scheduled_sweep
from bot.store import RedisStore
from tests.bot.builders import FakeClock, FakeSweeper, sweep_result
from tests.bot.conftest import make_config, notify_on, running_bot
from tests.bot.fake_slack import FakeSlack
from tests.bot.test_slack_hung import changing_sweeps, delivered

pytestmark = pytest.mark.redis

BOUND_S = 2.0
"""The request bound here: its probe share must comfortably cover a local answer."""


async def test_one_timeout_lets_the_next_call_through_and_two_in_a_row_give_up(
        slack: FakeSlack, store: RedisStore, tmp_path: Path) -> None:
    """Inside a posting: one timed-out request, then the next calls are sent and answered;
    two timeouts in a row, and the rest gives up unsent."""
    clock = FakeClock()
    sweeper = FakeSweeper(make=lambda: sweep_result([], at=clock()),
                          conf=make_config(store.prefix, tmp_path))
    async with running_bot(slack, store, sweeper, clock) as h:
        client = h.bot.client
        client.bound(BOUND_S)  # type: ignore[attr-defined]
        slack.hang("chat.postMessage", times=1)
        with posting() as scope:
            with pytest.raises(TimeoutError) as first:
                await client.chat_postMessage(channel="C0SWEEP", text="slow")
            assert not isinstance(first.value, GaveUp)
            await client.chat_update(channel="C0SWEEP", ts="1.1", text="probe")
            await client.chat_postMessage(channel="C0SWEEP", text="after")
            assert (scope.hung, scope.gave_up) == (None, 0)
            slack.hang("chat.postMessage", times=2)
            for text in ("hung", "still hung"):
                with pytest.raises(TimeoutError):
                    await client.chat_postMessage(channel="C0SWEEP", text=text)
            with pytest.raises(GaveUp):
                await client.chat_postMessage(channel="C0SWEEP", text="given up")
        assert (scope.hung, scope.gave_up) == ("chat.postMessage", 1)
    assert [c.params["text"] for c in slack.to("/api/chat.postMessage")] == ["after"]
    assert [c.params["text"] for c in slack.to("/api/chat.update")] == ["probe"]


async def test_one_slow_post_does_not_silence_the_rest_of_a_new_day_s_sweep(
        slack: FakeSlack, store: RedisStore, tmp_path: Path) -> None:
    """A new day's sweep whose first post (the collapse DM) times out once: the alert goes to
    the channel instead, and the parent, the alerts' reply and the job-end DMs go out in that
    same sweep (before: all given up, the sweep failed until its retry)."""
    await notify_on(store)  # alice asked for job-end DMs
    clock = FakeClock()
    sweeper, stage = changing_sweeps(clock)
    sweeper.conf = make_config(store.prefix, tmp_path, api_timeout_seconds=BOUND_S)
    async with running_bot(slack, store, sweeper, clock) as h:
        await scheduled_sweep(h.bot, 0)
        stage[0] = 1
        clock.advance(24 * 3600)
        slack.hang("chat.postMessage", times=1)
        assert await scheduled_sweep(h.bot, 48) is True  # nothing left for a retry
    hung = slack.hung()
    assert len(hung) == 1 and "Collapse on alpha:4242" in str(hung[0].params.get("text"))
    assert delivered(slack, "Collapse on alpha:4242") == 1  # in the channel, as its fallback
    assert delivered(slack, "collapse on `alpha:4242`") == 1
    assert delivered(slack, "ended FAILED") == 3
    parents = [c for c in slack.to("/api/chat.postMessage")
               if not c.params.get("thread_ts") and "Jobs ·" in str(c.params.get("text"))]
    assert len(parents) == 2


async def test_a_jobs_answer_lost_to_one_timeout_is_sent_again(
        slack: FakeSlack, store: RedisStore, tmp_path: Path) -> None:
    """``/jobs`` answered from the cached sweep; its response_url times out once: the
    answer is posted again and arrives (before: lost, nothing retries a command's answer)."""
    clock = FakeClock()
    sweeper, _ = changing_sweeps(clock)
    sweeper.conf = make_config(store.prefix, tmp_path, api_timeout_seconds=BOUND_S)
    async with running_bot(slack, store, sweeper, clock) as h:
        await scheduled_sweep(h.bot, 0)  # the cached sweep; the client takes the bound
        slack.hang("response_url", times=1)
        _, hook = await h.command("/jobs", "rl", user="UALICE")
        await h.bot.tasks.drain()
        assert len(slack.hung("response_url")) == 1
        answered = slack.to(hook)
        assert answered and "rl-ppo-" in str(answered[0].params.get("text")) + str(
            answered[0].params.get("blocks"))
        errors = h.bot.telemetry.response_url_errors
        assert errors.labels(surface="/jobs", error="TimeoutError")._value.get() == 1


async def test_a_rate_limit_s_wait_is_not_cut_by_the_request_bound(
        slack: FakeSlack, store: RedisStore, tmp_path: Path) -> None:
    """The bound is each request's, not the call's: a 429 whose ``Retry-After`` outlasts it
    is still waited out and retried inside a posting (the breaker does not bound the call
    as a whole), and the answer closes the breaker."""
    clock = FakeClock()
    sweeper = FakeSweeper(make=lambda: sweep_result([], at=clock()),
                          conf=make_config(store.prefix, tmp_path))
    async with running_bot(slack, store, sweeper, clock) as h:
        client = h.bot.client
        client.bound(0.5)  # type: ignore[attr-defined]
        slack.rate_limit("chat.postMessage", retry_after=1)
        with posting() as scope:
            await client.chat_postMessage(channel="C0SWEEP", text="after the wait")
        assert (scope.strikes, scope.hung) == (0, None)
    assert [c.params["text"] for c in slack.to("/api/chat.postMessage")] == ["after the wait"]
