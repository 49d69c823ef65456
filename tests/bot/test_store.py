"""The Redis store against a real Redis: windows, memory, locks, audit, cache."""

from __future__ import annotations

import math

import pytest

from bot.store import RedisStore, StoreUnavailable, decode_sweep, encode_sweep
from probes.models import MetricPoint
from report.memory import SweepMemory
from tests.bot.builders import collapsing, detail, job, sweep_result
from tests.bot.conftest import make_store


def points(*steps: int, loss: float = 1.0) -> list[MetricPoint]:
    return [MetricPoint(step=s, values={"loss": loss, "grad_norm": 0.1 * s}) for s in steps]


async def test_merge_appends_in_step_order(store: RedisStore) -> None:
    """Points from two sweeps merge into one history in step order."""
    await store.merge_history("alpha", "1", points(1, 2, 3))
    merged = await store.merge_history("alpha", "1", points(5, 4))
    assert [p.step for p in merged] == [1, 2, 3, 4, 5]


async def test_repeated_step_keeps_the_latest_value(store: RedisStore) -> None:
    """A step logged again (a resume) replaces the earlier value instead of duplicating it."""
    await store.merge_history("alpha", "1", points(1, 2, 3, loss=1.0))
    merged = await store.merge_history("alpha", "1", points(3, loss=0.5))
    assert [p.step for p in merged] == [1, 2, 3]
    assert merged[-1].values["loss"] == 0.5


async def test_window_is_capped(redis_server: str, prefix: str) -> None:
    """Only the newest window_len points are kept (near miss: exactly window_len stays whole)."""
    capped = make_store(prefix, url=redis_server, window_len=5)
    try:
        assert len(await capped.merge_history("alpha", "1", points(1, 2, 3, 4, 5))) == 5
        merged = await capped.merge_history("alpha", "1", points(6, 7))
        assert [p.step for p in merged] == [3, 4, 5, 6, 7]
    finally:
        await capped.delete_prefix()
        await capped.aclose()


async def test_nan_survives_the_round_trip(store: RedisStore) -> None:
    """A NaN loss is evidence: it is stored and read back as NaN, not dropped or nulled."""
    nan = [MetricPoint(step=1, values={"loss": math.nan, "grad_norm": math.inf})]
    (back,) = await store.merge_history("alpha", "1", nan)
    assert math.isnan(back.values["loss"]) and math.isinf(back.values["grad_norm"])


async def test_windows_expire(store: RedisStore) -> None:
    """Every window carries an expiry (expire_hours after the run was last seen)."""
    await store.merge_history("alpha", "1", points(1))
    ttl = await store._r.pttl(store.key("window", "alpha", "1"))
    assert 0 < ttl <= store.expire_ms


async def test_memory_round_trip(store: RedisStore) -> None:
    """The sweep memory comes back as saved; a fresh store has empty memory (log states:
    ``test_store_logs``)."""
    assert await store.load_memory() == SweepMemory()
    memory = SweepMemory(known_edges={"alpha": {"40880": "41120"}})
    await store.save_memory(memory)
    assert await store.load_memory() == memory


async def test_lock_is_exclusive_until_released(store: RedisStore) -> None:
    """SET NX: the second taker fails and sees the holder; after release it can take it."""
    assert await store.acquire("alpha:1:cancel", {"user": "U1"}, ttl_s=60)
    assert not await store.acquire("alpha:1:cancel", {"user": "U2"}, ttl_s=60)
    assert await store.holder("alpha:1:cancel") == {"user": "U1"}
    await store.release("alpha:1:cancel")
    assert await store.acquire("alpha:1:cancel", {"user": "U2"}, ttl_s=60)


async def test_a_conditional_put_goes_in_only_over_the_copy_expected(
        store: RedisStore, prefix: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """``put_doc_if``: written where the document is still what the writer last saw (or absent,
    for ``None``); not over another copy, nor when another client writes between the read and
    the write (WATCH)."""
    assert await store.put_doc_if("d", {"n": 1}, expected=None)
    assert not await store.put_doc_if("d", {"n": 9}, expected=None)
    assert not await store.put_doc_if("d", {"n": 9}, expected={"n": 0})
    assert await store.put_doc_if("d", {"n": 2}, expected={"n": 1})
    other = make_store(prefix)
    real_pipeline = store._r.pipeline

    def racing(*args: object, **kwargs: object) -> object:
        pipe = real_pipeline(*args, **kwargs)
        read = pipe.get

        async def get(key: str) -> object:
            raw = await read(key)
            await other.put_doc("d", {"n": 3})  # another replica, between the read and write
            return raw

        pipe.get = get  # type: ignore[method-assign]
        return pipe

    monkeypatch.setattr(store._r, "pipeline", racing)
    try:
        assert not await store.put_doc_if("d", {"n": 4}, expected={"n": 2})
    finally:
        await other.aclose()
    assert await store.get_doc("d") == {"n": 3}


async def test_tick_is_claimed_once(store: RedisStore) -> None:
    """One claim per interval number; the next number is free."""
    assert await store.claim_tick(7, ttl_s=60, owner="a")
    assert not await store.claim_tick(7, ttl_s=60, owner="b")
    assert await store.claim_tick(8, ttl_s=60, owner="b")


async def test_audit_trail_keeps_order(store: RedisStore) -> None:
    """Audit entries come back oldest first, timestamped."""
    await store.audit({"actor": "U1", "outcome": "refused"})
    await store.audit({"actor": "U2", "outcome": "cancelled"})
    entries = await store.audit_entries()
    assert [e["actor"] for e in entries] == ["U1", "U2"]
    assert all("at" in e for e in entries)


def test_sweep_cache_round_trip() -> None:
    """A cached sweep decodes to the same report and details (grid and NaN included)."""
    sick = collapsing()
    odd = detail(job("9", "sft-x", bucket="sft")).model_copy(
        update={"history": (MetricPoint(step=1, values={"loss": math.nan}),)})
    result = sweep_result([sick, odd], degraded=None)
    back = decode_sweep(encode_sweep(result))
    assert back.report == result.report
    assert back.details[("alpha", "4242")] == sick
    assert math.isnan(back.details[("alpha", "9")].history[0].values["loss"])
    assert back.started_at == result.started_at and back.facts == ()


async def test_closed_port_raises_store_unavailable(prefix: str) -> None:
    """A Redis that is not there is one StoreUnavailable, with the redis error chained."""
    dead = make_store(prefix, url="redis://127.0.0.1:1/0")
    try:
        with pytest.raises(StoreUnavailable) as caught:
            await dead.merge_history("alpha", "1", points(1))
        assert caught.value.__cause__ is not None
    finally:
        await dead.aclose()
