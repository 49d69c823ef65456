"""Personal scope over signed requests: `/jobs mine|@user|cluster:`, the App Home tab, and the
"Share to channel" button (fake Slack, real Redis)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from typing import Any

import pytest

from bot.cached import SweepCache
from bot.messages import shared_job_messages, sweep_header
from bot.offload import Offload
from bot.scheduled import scheduled_sweep
from bot.share import share_lock
from bot.store import decode_sweep
from bot.sweep_result import SweepResult
from bot.telemetry import Telemetry
from report.models import JobDetail
from tests.bot.builders import blocks_text
from tests.bot.conftest import Harness
from tests.bot.fake_slack import signed_headers

pytestmark = pytest.mark.redis


async def answer(h: Harness, text: str, *, user: str = "UALICE") -> str:
    """The final answer to `/jobs text` (after a "Sweeping…" ack, when there is one)."""
    _, hook = await h.command("/jobs", text, user=user)
    replies = await h.slack.wait_for(hook)
    if replies[-1].params["text"].startswith("Sweeping"):
        replies = await h.slack.wait_for(hook, len(replies) + 1)
    last = replies[-1].params
    return last["text"] + "\n" + blocks_text(last.get("blocks") or [])


async def test_jobs_mine_shows_the_invokers_jobs_through_the_owner_mapping(harness: Harness
                                                                           ) -> None:
    """alice (UALICE) owns the two RL runs; bob's SFT run is not hers."""
    text = await answer(harness, "mine")
    assert "rl-ppo-llama-8b" in text and "rl-grpo-qwen-7b" in text
    assert "sft-mistral-7b" not in text


async def test_jobs_for_another_user_and_a_cluster(harness: Harness) -> None:
    """`@alice` (cluster user), `<@UALICE>` (Slack mention) and `cluster:alpha` filter alike."""
    by_name = await answer(harness, "@bob")
    assert "sft-mistral-7b" in by_name and "rl-ppo-llama-8b" not in by_name
    by_mention = await answer(harness, "<@UALICE|alice> rl", user="UOPS")
    assert "rl-grpo-qwen-7b" in by_mention and "sft-mistral-7b" not in by_mention
    by_cluster = await answer(harness, "cluster:alpha")
    assert "sft-mistral-7b" in by_cluster and "rl-ppo-llama-8b" in by_cluster


async def test_unmapped_invoker_and_unknown_cluster_are_told_so(harness: Harness) -> None:
    """`mine` for someone without an owners entry, or a cluster not configured: one line."""
    assert "You are not mapped" in await answer(harness, "mine", user="UNOBODY")
    text = await answer(harness, "cluster:gamma")
    assert "no cluster named `gamma`" in text and "alpha" in text
    assert harness.sweeper.sweeps == 0


async def test_jobs_acks_with_sweeping_n_clusters_when_a_live_sweep_is_needed(
        harness: Harness) -> None:
    """The first /jobs needs a live sweep and says so; the second answers from the cache."""
    _, first = await harness.command("/jobs", "rl")
    ack, _ = await harness.slack.wait_for(first, 2)
    assert ack.params["text"] == "Sweeping 1 cluster…"
    _, second = await harness.command("/jobs", "rl")
    (only,) = await harness.slack.wait_for(second)
    assert "cached" in blocks_text(only.params["blocks"])


def home_event(user: str) -> str:
    return json.dumps({
        "token": "legacy", "team_id": "T0FAKE", "api_app_id": "A0FAKE", "type": "event_callback",
        "event_id": f"Ev{time.monotonic_ns()}", "event_time": int(time.time()),
        "event": {"type": "app_home_opened", "user": user, "channel": "D0ALICE", "tab": "home",
                  "event_ts": str(time.time())},
    })


async def open_home(h: Harness, user: str) -> str:
    before = len(h.slack.to("/api/views.publish"))
    body = home_event(user)
    status, _ = await h.post(body, signed_headers(body, content_type="application/json"))
    assert status == 200
    published = await h.slack.wait_for("/api/views.publish", before + 1)
    call = published[-1].params
    assert call["user_id"] == user
    view = call["view"] if isinstance(call["view"], dict) else json.loads(call["view"])
    assert view["type"] == "home" and len(view["blocks"]) <= 100
    return blocks_text(view["blocks"])


async def test_app_home_shows_own_jobs_open_episodes_and_snoozes(harness: Harness) -> None:
    """Home: alice's jobs; after the collapse DM her open episode; after snooze, the snooze."""
    text = await open_home(harness, "UALICE")
    assert "rl-ppo-llama-8b" in text and "sft-mistral-7b" not in text
    assert "No open collapse episodes." in text
    await scheduled_sweep(harness.bot, 0)  # DMs the collapse of alpha:4242: episode opens
    text = await open_home(harness, "UALICE")
    assert "🚨 `alpha:4242` collapse since 16:00Z" in text
    await harness.press_alert("snooze", user="UALICE")  # on the alert message itself
    await harness.bot.tasks.drain()
    text = await open_home(harness, "UALICE")
    assert "💤 `alpha:4242` snoozed until 2026-11-30 20:00Z" in text
    assert "No open collapse episodes." in text
    bob = await open_home(harness, "UBOB")
    assert "No jobs of yours" in bob


async def test_share_to_channel_posts_the_job_detail_for_everyone(harness: Harness) -> None:
    """/job's ephemeral answer has the Share button; pressing it posts the detail publicly."""
    _, hook = await harness.command("/job", "4100")
    (reply,) = await harness.slack.wait_for(hook)
    blocks = reply.params["blocks"]
    [button] = [e for b in blocks if b["type"] == "actions" for e in b["elements"]
                if e["action_id"] == "share_to_channel"]
    assert button["value"] == "alpha:4100" and len(blocks) <= 50
    _, share_hook = await harness.press("share_to_channel", button["value"], user="UALICE")
    posts = await harness.slack.wait_for("/api/chat.postMessage")
    shared = [p for p in posts if p.params["channel"] == "D0ALICE"]
    assert len(shared) == 1
    text = blocks_text(json.loads(shared[0].params["blocks"]) if isinstance(
        shared[0].params["blocks"], str) else shared[0].params["blocks"])
    assert "Shared by <@UALICE>" in text and "rl-ppo-llama-8b" in text
    (done,) = await harness.slack.wait_for(share_hook)
    assert "Shared `alpha:4100`" in done.params["text"]
    # No cached sweep: Share, like /job, asks for that job only and sweeps nothing.
    assert harness.sweeper.jobs == [(None, "4100"), ("alpha", "4100")]
    assert harness.sweeper.sweeps == 0


async def test_share_from_the_cache_gets_one_job_from_the_worker(harness: Harness) -> None:
    """From a cached sweep (another replica's), Share posts what the whole decoded sweep gave,
    same job and header, while the worker process sends back that one job: no whole sweep
    crosses into the bot (at 5,000 jobs, 110 MB of models unpickled for one job)."""
    harness.bot.offload.min_bytes = 0  # every stage in the worker process, as at 5,000 jobs
    replica = SweepCache(store=harness.bot.store, offload=Offload(processes=False),
                         telemetry=Telemetry(), clock=harness.clock)
    doc = await replica.publish(harness.sweeper.make(), ttl_s=60)
    returned: list[object] = []
    run = harness.bot.offload.run

    async def recorded(fn: Callable[..., Any], *args: Any, size: int) -> Any:
        result = await run(fn, *args, size=size)
        returned.append(result)
        return result

    harness.bot.offload.run = recorded  # type: ignore[method-assign]
    harness.clock.advance(3)
    _, hook = await harness.press("share_to_channel", "alpha:4100", user="UALICE")
    (done,) = await harness.slack.wait_for(hook)
    assert "Shared `alpha:4100`" in done.params["text"]
    posts = [p.params["blocks"] for p in harness.slack.to("/api/chat.postMessage")
             if p.params["channel"] == "D0ALICE"]
    whole = decode_sweep(doc.payload)  # what Share decoded before, to find the job in
    expected = shared_job_messages(whole.find("alpha", "4100"),
                                   header=sweep_header(whole, age_s=3.0), sharer="UALICE",
                                   width=harness.bot.config.current().report.width)
    assert [json.loads(b) if isinstance(b, str) else b for b in posts] == \
        [m.blocks for m in expected]
    assert harness.bot.offload.in_process >= 2  # the head, then the job
    assert [r for r in returned if isinstance(r, SweepResult) and r.details] == []
    assert [r for r in returned if isinstance(r, JobDetail)] == [whole.details[("alpha", "4100")]]
    assert harness.sweeper.sweeps == 0 and harness.sweeper.jobs == []


async def test_share_refuses_a_forged_value(harness: Harness) -> None:
    """A value that is not a job reference posts nothing."""
    _, hook = await harness.press("share_to_channel", "alpha:1;rm -rf /", user="UALICE")
    (reply,) = await harness.slack.wait_for(hook)
    assert "no valid job reference" in reply.params["text"]
    assert not [p for p in harness.slack.to("/api/chat.postMessage")
                if p.params["channel"] == "D0ALICE"]


def test_manifest_enables_the_home_tab_and_its_event() -> None:
    """The Slack app manifest turns the Home tab on and subscribes to app_home_opened."""
    from pathlib import Path

    import yaml  # type: ignore[import-untyped]  # PyYAML comes with kubernetes_asyncio

    path = Path(__file__).resolve().parents[2] / "deploy" / "slack-app-manifest.yaml"
    manifest = yaml.safe_load(path.read_text())
    assert manifest["features"]["app_home"]["home_tab_enabled"] is True
    events = manifest["settings"]["event_subscriptions"]
    assert events["bot_events"] == ["app_home_opened"]
    assert events["request_url"].endswith("/slack/events")


async def test_callers_sharing_one_sweep_write_the_cache_once(harness: Harness) -> None:
    """Several commands waiting on one live sweep: the sweep is written to the cache once
    (at 5,000 jobs each write was a 31 MB encode and a Redis write timing out)."""
    from bot.slash_answers import live_sweep

    shared = harness.sweeper.make()
    harness.sweeper.make = lambda: shared  # what Sweeper's single flight hands every caller
    writes: list[str] = []
    save = harness.bot.store.save_cache

    async def counted(payload: str, *, stamp: Any, ttl_s: float) -> None:
        writes.append(payload)
        await save(payload, stamp=stamp, ttl_s=ttl_s)

    harness.bot.store.save_cache = counted  # type: ignore[method-assign]
    results = await asyncio.gather(*(live_sweep(harness.bot) for _ in range(4)))
    assert all(r is shared for r in results)
    assert len(writes) == 1
    assert await harness.bot.store.load_cache() == writes[0]


async def test_a_double_click_on_share_posts_the_job_once(harness: Harness) -> None:
    """Two presses of Share close together (a double click, or a second person on the same
    answer in the channel) post the job's detail into the channel once; the second presser
    is told it was just shared. A later share (past the window) posts again."""
    hooks = await asyncio.gather(*(harness.press("share_to_channel", "alpha:4100", user=user)
                                   for user in ("UALICE", "UALICE", "UBOB")))
    replies = [r for _, hook in hooks for r in await harness.slack.wait_for(hook)]
    await harness.bot.tasks.drain()
    posts = [p for p in harness.slack.to("/api/chat.postMessage")
             if p.params["channel"] == "D0ALICE"]
    assert len(posts) == 1
    texts = sorted(r.params["text"] for r in replies)
    assert sum("Shared `alpha:4100`" in t for t in texts) == 1
    assert sum("was shared to this channel" in t for t in texts) == 2
    harness.clock.advance(120)
    await harness.bot.store.release(share_lock("D0ALICE", "alpha", "4100"))  # its TTL's end
    _, hook = await harness.press("share_to_channel", "alpha:4100", user="UBOB")
    (reply,) = await harness.slack.wait_for(hook)
    assert "Shared `alpha:4100`" in reply.params["text"]


def mrkdwn_objects(value: Any) -> list[dict[str, Any]]:
    """Every ``mrkdwn`` text object in a Slack payload (blocks, a view, a confirm)."""
    if isinstance(value, str) and value[:1] in "[{":
        try:
            value = json.loads(value)
        except ValueError:
            return []
    if isinstance(value, dict):
        own = [value] if value.get("type") == "mrkdwn" else []
        return own + [o for v in value.values() for o in mrkdwn_objects(v)]
    if isinstance(value, list):
        return [o for v in value for o in mrkdwn_objects(v)]
    return []


async def test_no_text_object_lets_slack_make_links_or_mentions(harness: Harness) -> None:
    """Every mrkdwn text object the bot sends is ``verbatim``: without it Slack turns a bare
    URL into a link, ``#channel`` into a channel link and some ``@`` words into mentions
    (Slack's text object: "When set to false (as is default) URLs will be auto-converted into
    links, conversation names will be link-ified, and certain mentions will be automatically
    parsed"); a job named ``rl-https://evil.example/login`` read as a link in the channel
    parent, the collapse DM and the job-end DM. The bot's own mentions and links are written
    ``<@U…>`` / ``<url|text>``, which verbatim text still renders."""
    await scheduled_sweep(harness.bot, 0)  # the collapse DM, the day's parent and thread
    _, hook = await harness.command("/jobs")
    await harness.slack.wait_for(hook)
    _, hook = await harness.command("/job", "alpha:4242")
    await harness.slack.wait_for(hook)
    await open_home(harness, "UALICE")
    await harness.press_alert("snooze", user="UALICE")
    await harness.bot.tasks.drain()
    sent = [c for c in harness.slack.calls if c.path.startswith(("/api/", "/webhook/"))]
    objects = [o for c in sent for k in ("blocks", "view")
               for o in mrkdwn_objects(c.params.get(k))]
    assert len(objects) > 20
    assert [o["text"][:60] for o in objects if o.get("verbatim") is not True] == []


async def test_a_share_that_posted_nothing_can_be_pressed_again(harness: Harness) -> None:
    """A share refused by Slack (the bot is not in the channel) posted nothing: once the bot
    is invited, pressing Share again within the window posts the job, as the refusal said.
    Found by review of 30ba9ce (its lock outlived a share that posted nothing)."""
    harness.slack.fail("chat.postMessage", "not_in_channel", target="D0ALICE")
    _, hook = await harness.press("share_to_channel", "alpha:4100", user="UALICE")
    (refused,) = await harness.slack.wait_for(hook)
    assert "invite the bot" in refused.params["text"]
    _, hook = await harness.press("share_to_channel", "alpha:4100", user="UALICE")
    (reply,) = await harness.slack.wait_for(hook)
    assert "Shared `alpha:4100`" in reply.params["text"], reply.params["text"]
    posts = [p for p in harness.slack.to("/api/chat.postMessage")
             if p.params["channel"] == "D0ALICE" and p.status == 200]
    assert len(posts) == 1
