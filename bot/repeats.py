"""A job in the same trouble again soon after it was told: no news for the day's thread.

Policy: a hard long-horizon eval landing a result.json every hour or two, a datagen chunk that
goes quiet between bursts, reads 'stalled' past its stall window and 'recovered' at the next
result, by turns; a spike-mitigation run (or one whose owner has not answered the alert yet)
collapses, recovers and collapses again. Each turn is a change (``report.changes``), and the
thread told every one; a grad norm hovering at 1.0 reads warning and healthy by turns. The
first trouble is told, and the recovery after it (a warning's end is told nowhere:
``report.changes``); the same trouble (``stalled``, ``collapsed``, ``warning``) of the same job
again within :data:`QUIET_HOURS` of the one told is left out of the thread, and so is the
recovery from such an untold turn (the parent still shows each). After the quiet hours it is
told again. A new collapse *alert* (its episode was answered, so a new one opened:
``bot.alerts``) is told by its own line whatever this says. The mark is a document in Redis
(``digest:told:{kind}:{cluster}:{job}``: when the told trouble was seen, and whether a later
turn went untold); while Redis cannot say, every change is told (a line too many beats a silent
trouble). The owner's stall DM is gated the same way by ``bot.notify`` (once in as long), a
collapse DM by its open episode.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from datetime import datetime, timedelta

from bot.store import RedisStore, StoreUnavailable
from report.changes import Change, Key, Snapshot

TOLD_ONCE = frozenset({"stalled", "collapsed", "warning"})
"""The troubles told at most once in :data:`QUIET_HOURS` per job."""
QUIET_HOURS = 24.0
"""The same trouble of a job is told in the thread at most once in this long (as
``bot.notify`` DMs a stall)."""


def _mark(kind: str, cluster: str, job_id: str) -> str:
    return f"digest:told:{kind}:{cluster}:{job_id}"


def _at(doc: object) -> datetime | None:
    """The mark's time; None for a mark that is no aware ISO time (by hand, cut): no mark."""
    text = doc.get("at") if isinstance(doc, dict) else None
    try:
        when = datetime.fromisoformat(text) if isinstance(text, str) else None
    except ValueError:
        return None
    return when if when is not None and when.tzinfo is not None else None


def _recovered_from(change: Change, was: Snapshot | None) -> str | None:
    """The trouble kind a ``recovered`` change ends (``stalled``, ``collapsed``), if any."""
    if change.kind != "recovered" or was is None:
        return None
    return "stalled" if was.stalled else "collapsed" if was.verdict == "collapse" else None


async def quiet_repeats(store: RedisStore, changes: Sequence[Change],
                        previous: Mapping[Key, Snapshot] | None,
                        clock: Callable[[], datetime], *,
                        told: Collection[Key] = ()) -> list[Change]:
    """``changes`` less a job's stall or collapse told less than :data:`QUIET_HOURS` ago
    already, and the recoveries from such untold turns. ``told``: the jobs the sweep's own
    lines tell (a new collapse alert): told whatever the mark says, and marked told."""
    quiet = timedelta(hours=QUIET_HOURS)
    kept: list[Change] = []
    try:
        for change in changes:
            key = (change.cluster, change.job_id)
            if change.kind in TOLD_ONCE:
                name, now = _mark(change.kind, *key), clock()
                if key not in told and (at := _at(await store.get_doc(name))) is not None \
                        and now - at < quiet:
                    await store.put_doc(name, {"at": at.isoformat(), "untold": True},
                                        ttl_s=quiet.total_seconds())
                    continue
                await store.put_doc(name, {"at": now.isoformat(), "untold": False},
                                    ttl_s=quiet.total_seconds())
            elif (ended := _recovered_from(change, (previous or {}).get(key))) is not None:
                doc = await store.get_doc(_mark(ended, *key))
                if isinstance(doc, dict) and doc.get("untold"):
                    continue
            kept.append(change)
    except StoreUnavailable:
        return list(changes)
    return kept
