"""What the bot leaves behind and shows unauthenticated: every Redis key expires or is pruned,
and /metrics and /healthz carry no secret and no job detail."""

from __future__ import annotations

import redis.asyncio as aioredis

from bot.scheduled import make_scheduler
from report.memory import SweepMemory
from tests.bot.builders import collapsing, rl_history, sweep_result
from tests.bot.conftest import REDIS_URL, Harness
from tests.bot.fake_slack import SIGNING_SECRET
from tests.bot.test_store_logs import log_state


async def test_every_redis_key_expires_or_is_pruned(harness: Harness) -> None:
    """After a sweep, an alert, follow-ups, /jobs and a cancel, each key has a TTL; the audit
    stream (the only one without) is capped."""
    assert await make_scheduler(harness.bot).tick()
    _, hook = await harness.command("/jobs")
    await harness.slack.wait_for(hook)
    await harness.press_alert("cancel_salvage", user="UALICE")
    await harness.bot.tasks.drain()
    # What the real Sweeper writes through the store (the fake sweeper writes none of it).
    store = harness.bot.store
    await store.save_memory(SweepMemory())
    await store.merge_history("alpha", "4242", rl_history(3))
    await store.save_log_states("alpha", {"4242": log_state("/logs/x.out")})
    raw = aioredis.Redis.from_url(REDIS_URL)
    try:
        keys = [k.decode() async for k in raw.scan_iter(match=harness.bot.store.prefix + "*")]
        ttls = {k: await raw.pttl(k) for k in keys}
        audit_len = await raw.xlen(harness.bot.store.key("audit"))
    finally:
        await raw.aclose()
    kinds = {k[len(harness.bot.store.prefix):].split(":")[0] for k in keys}
    assert {"memory", "window", "logs", "doc", "lock", "tick", "sweep-cache",
            "audit"} <= kinds
    forever = [k for k, ttl in ttls.items() if ttl < 0 and not k.endswith("audit")]
    assert forever == []
    assert audit_len >= 2


async def test_metrics_and_healthz_carry_no_secret_or_job_detail(harness: Harness) -> None:
    """With a hostile job in the sweep and Slack failing, the two open endpoints show neither
    the tokens, nor job names, ids, users or log paths."""
    name = "rl-grpo-secret-project <!channel>"
    sick = collapsing(user="alice")
    sick = sick.model_copy(update={"report": sick.report.model_copy(update={"name": name})})
    harness.sweeper.make = lambda: sweep_result([sick], at=harness.clock())
    harness.slack.fail("chat.postMessage", "not_in_channel", times=3, target="C0SWEEP")
    assert await make_scheduler(harness.bot).tick()
    _, metrics = await harness.get("/metrics")
    _, health = await harness.get("/healthz")
    for body in (metrics, health):
        for secret in ("xoxb-test", SIGNING_SECRET, name, "rl-grpo", "4242", "alice",
                       "UALICE", "/logs/", "C0SWEEP", "DALICE"):
            assert secret not in body, secret
    assert "not_in_channel" in health and "not_in_channel" in metrics
