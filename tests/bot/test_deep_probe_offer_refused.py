"""A deep-probe offer Slack will never take is not offered again every sweep; a DM refused
goes to the channel (fake Slack, real Redis).

Before, an offer whose post failed in any way was forgotten so that the next sweep offered it
again: right for a blip, but an offer refused for good (the owner's DM closed to apps, the bot
not in the channel) was posted again at every sweep for as long as the run stayed new, each
one logged; and an offer the owner's DM refused went nowhere else, where a collapse alert
goes to the channel.
"""

from __future__ import annotations

from bot import deep_probe
from tests.bot.builders import sweep_result
from tests.bot.conftest import Harness
from tests.bot.test_deep_probe_offer_batches import flagged, offering


def _tried(h: Harness, channel: str) -> int:
    return sum(1 for c in h.slack.calls if c.path == "/api/chat.postMessage"
               and c.params.get("channel") == channel)


async def test_an_offer_refused_for_good_is_not_offered_again(harness: Harness) -> None:
    """Alice's DM refuses (messages_tab_disabled), so does the channel (not_in_channel): the
    offer is tried on both once, and the next two sweeps try nothing."""
    harness.slack.fail("chat.postMessage", "messages_tab_disabled", target="DALICE", times=9)
    harness.slack.fail("chat.postMessage", "not_in_channel", target="C0SWEEP", times=9)
    config = offering(harness)
    for _ in range(3):
        result = sweep_result([flagged("5000", "rl-new-lr1")], at=harness.clock())
        assert await deep_probe.after_sweep(harness.bot, result, config) == []
        harness.clock.advance(1800)
    assert (_tried(harness, "DALICE"), _tried(harness, "C0SWEEP")) == (1, 1)


async def test_an_offer_the_dm_refuses_goes_to_the_channel(harness: Harness) -> None:
    """Alice's DM refuses: the offer is posted in the channel, once."""
    harness.slack.fail("chat.postMessage", "messages_tab_disabled", target="DALICE")
    result = sweep_result([flagged("5000", "rl-new-lr1")], at=harness.clock())
    handled = await deep_probe.after_sweep(harness.bot, result, offering(harness))
    assert handled == ["alpha:5000"]
    assert (_tried(harness, "DALICE"), _tried(harness, "C0SWEEP")) == (1, 1)
