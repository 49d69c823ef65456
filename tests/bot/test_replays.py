"""bot.replays: each signed Slack request runs once; a copy of it is refused."""

from __future__ import annotations

from bot.replays import REMEMBER_S, SeenRequests
from tests.bot.conftest import make_store


async def test_without_redis_this_process_still_refuses_a_copy() -> None:
    """Redis unreachable (nothing listens on its port): the request runs, and its copy sent to
    the same process is refused from the process's own memory."""
    store = make_store("jt-test-replays:", url="redis://127.0.0.1:1/0")
    try:
        seen = SeenRequests(store)
        assert await seen.first_time("v0=aa") is True
        assert await seen.first_time("v0=aa") is False
        assert await seen.first_time("v0=bb") is True  # near miss: another request
    finally:
        await store.aclose()


async def test_a_signature_is_forgotten_once_no_timestamp_check_could_pass_it() -> None:
    """Remembered for REMEMBER_S (longer than the 2 x 300 s a timestamp can be accepted
    over), then forgotten: the memory does not grow without end."""
    now = [0.0]
    seen = SeenRequests(None, clock=lambda: now[0])
    assert await seen.first_time("v0=aa") is True
    now[0] = REMEMBER_S - 1
    assert await seen.first_time("v0=aa") is False
    now[0] = REMEMBER_S + 1
    assert await seen.first_time("v0=bb") is True
    assert len(seen._seen) == 1
