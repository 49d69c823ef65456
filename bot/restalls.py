"""A job that stalls again soon after its stall was told: no news for the day's thread.

Policy: a hard long-horizon eval landing a result.json every hour or two, a datagen chunk
that goes quiet between bursts, reads 'stalled' past its stall window and 'recovered' at the
next result, by turns: each turn is a change (``report.changes``), and the thread told every
one. Its first stall is told, and the recovery after it; a stall of the same job again within
:data:`STALL_QUIET_HOURS` of the one told is left out of the thread, and so is the recovery
from such an untold stall (it is already known to come and go; the parent still shows it).
After the quiet hours a stall is told again. The mark is a document in Redis
(``digest:stall-told:{cluster}:{job}``: when the told stall was seen, and whether a later one
went untold); while Redis cannot say, every change is told (a line too many beats a silent
stall). The owner's DM is gated the same way by ``bot.notify`` (once in as long).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta

from bot.store import RedisStore, StoreUnavailable
from report.changes import Change, Key, Snapshot

STALL_QUIET_HOURS = 24.0
"""A job's stall is told in the thread at most once in this long (as ``bot.notify`` DMs it)."""


def _mark(cluster: str, job_id: str) -> str:
    return f"digest:stall-told:{cluster}:{job_id}"


def _at(doc: object) -> datetime | None:
    """The mark's time; None for a mark that is no aware ISO time (by hand, cut): no mark."""
    text = doc.get("at") if isinstance(doc, dict) else None
    try:
        when = datetime.fromisoformat(text) if isinstance(text, str) else None
    except ValueError:
        return None
    return when if when is not None and when.tzinfo is not None else None


async def quiet_restalls(store: RedisStore, changes: Sequence[Change],
                         previous: Mapping[Key, Snapshot] | None,
                         clock: Callable[[], datetime]) -> list[Change]:
    """``changes`` less the stalls of a job whose stall was told less than
    :data:`STALL_QUIET_HOURS` ago, and the recoveries from such untold stalls."""
    quiet = timedelta(hours=STALL_QUIET_HOURS)
    kept: list[Change] = []
    try:
        for change in changes:
            key = (change.cluster, change.job_id)
            was = (previous or {}).get(key)
            if change.kind == "stalled":
                name, now = _mark(*key), clock()
                doc = await store.get_doc(name)
                told = _at(doc)
                if told is not None and now - told < quiet:
                    await store.put_doc(name, {"at": told.isoformat(), "untold": True},
                                        ttl_s=quiet.total_seconds())
                    continue
                await store.put_doc(name, {"at": now.isoformat(), "untold": False},
                                    ttl_s=quiet.total_seconds())
            elif change.kind == "recovered" and was is not None and was.stalled:
                doc = await store.get_doc(_mark(*key))
                if isinstance(doc, dict) and doc.get("untold"):
                    continue
            kept.append(change)
    except StoreUnavailable:
        return list(changes)
    return kept
