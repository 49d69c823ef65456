"""JSON documents, locks, the sweep cache and the audit trail in Redis.

Policy (``bot.store``'s keys ``doc:``, ``lock:``, ``seen:``, ``tick:``, ``sweep-cache``,
``audit``): every document is written with an expiry; a lock (and a request's ``seen:``
mark) is a key set only if absent, with a TTL, so an action happens exactly once across
replicas; the sweep cache and its stamp are written and read as one; the audit stream is
trimmed to about :data:`AUDIT_MAXLEN` entries.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from redis.exceptions import WatchError

from bot.store_base import StoreBase, _text, dump_json

AUDIT_MAXLEN = 10_000
"""Audit entries kept (approximate trim); older ones age out of Redis, the log keeps all."""
RELEASE_IF_HELD = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""
"""Delete a lock only while its record is the caller's (the compare-and-delete of
redis-py's ``Lock.release``, on our JSON holder record)."""


class DocStore(StoreBase):
    """:class:`bot.store.RedisStore`'s documents, locks, sweep cache and audit trail."""

    async def get_doc(self, name: str) -> Any:
        """The JSON document stored under ``name``, or ``None``."""
        async with self._translated("get"):
            raw = await self._r.get(self.key("doc", name))
        return None if raw is None else json.loads(raw)

    async def put_doc(
        self, name: str, value: Any, *, ttl_s: float | None = None, only_new: bool = False
    ) -> bool:
        """Store ``value``; with ``only_new`` only if absent. True if it was written.

        Without ``ttl_s`` the store's ``expire_hours`` applies: no document lives forever.
        """
        px = int(ttl_s * 1000) if ttl_s else self.expire_ms
        async with self._translated("put"):
            done = await self._r.set(self.key("doc", name), dump_json(value), px=px, nx=only_new)
        return bool(done)

    async def put_doc_if(self, name: str, value: Any, *, expected: Any,
                         ttl_s: float | None = None) -> bool:
        """Store ``value`` only if the document is still ``expected`` (``None``: absent), as
        one step (WATCH/MULTI: a write by anyone in between makes it False). True if written.

        What a replica kept in memory through an outage goes back this way: a newer copy
        another replica wrote meanwhile is not overwritten by an older one."""
        key = self.key("doc", name)
        px = int(ttl_s * 1000) if ttl_s else self.expire_ms
        async with self._translated("put if"), self._r.pipeline(transaction=True) as p:
            try:
                await p.watch(key)
                raw = await p.get(key)
                if (None if raw is None else json.loads(raw)) != expected:
                    return False
                p.multi()  # type: ignore[no-untyped-call]
                p.set(key, dump_json(value), px=px)
                await p.execute()
            except WatchError:
                return False
        return True

    async def delete_doc(self, name: str) -> None:
        async with self._translated("delete"):
            await self._r.delete(self.key("doc", name))

    async def acquire(self, name: str, holder: Mapping[str, Any], *, ttl_s: float) -> bool:
        """Take lock ``name`` (SET NX PX) for ``holder``; False if someone else holds it."""
        async with self._translated("lock"):
            done = await self._r.set(
                self.key("lock", name), dump_json(dict(holder)), nx=True, px=int(ttl_s * 1000)
            )
        return bool(done)

    async def first_seen(self, name: str, *, ttl_s: float) -> bool:
        """Note ``name`` for ``ttl_s`` (SET NX PX under ``seen:``); False if it is noted
        already: a signed Slack request played back (``bot.replays``)."""
        async with self._translated("seen"):
            done = await self._r.set(self.key("seen", name), b"1", nx=True,
                                     px=int(ttl_s * 1000))
        return bool(done)

    async def holder(self, name: str) -> dict[str, Any] | None:
        async with self._translated("lock holder"):
            raw = await self._r.get(self.key("lock", name))
        return None if raw is None else dict(json.loads(raw))

    async def update_lock(self, name: str, holder: Mapping[str, Any], *, ttl_s: float) -> None:
        """Rewrite a held lock's record (e.g. ``in progress`` -> ``done``), resetting its expiry."""
        async with self._translated("lock update"):
            await self._r.set(self.key("lock", name), dump_json(dict(holder)), px=int(ttl_s * 1000))

    async def release(self, name: str, *, holder: Mapping[str, Any] | None = None) -> bool:
        """Free lock ``name``; with ``holder``, only while it is still that holder's record
        (compare-and-delete, one step in Redis): a holder whose TTL ran out must not free a
        later holder's lock. True if a lock was deleted."""
        key = self.key("lock", name)
        async with self._translated("unlock"):
            if holder is None:
                return bool(await self._r.delete(key))
            done = await self._r.eval(
                RELEASE_IF_HELD, 1, key, dump_json(dict(holder)))
        return bool(done)

    async def locks(self, pattern: str) -> list[tuple[str, dict[str, Any]]]:
        """Every held lock whose name matches the glob ``pattern``, with its record."""
        found = []
        start = len(self.key("lock", ""))
        async with self._translated("scan locks"):
            async for key in self._r.scan_iter(match=self.key("lock", pattern), count=500):
                raw = await self._r.get(key)
                if raw is not None:
                    found.append((_text(key)[start:], dict(json.loads(raw))))
        return found

    async def claim_tick(self, tick: int, *, ttl_s: float, owner: str) -> bool:
        """True for exactly one replica per interval number ``tick``."""
        async with self._translated("tick lock"):
            done = await self._r.set(
                self.key("tick", str(tick)), owner, nx=True, px=int(ttl_s * 1000)
            )
        return bool(done)

    # -- sweep cache ---------------------------------------------------------------------------

    async def save_cache(self, payload: str, *, stamp: Any, ttl_s: float) -> None:
        """The sweep cache and the JSON ``stamp`` naming it, as one MULTI/EXEC transaction:
        two replicas writing at once never leave one's stamp beside the other's sweep."""
        px = max(1, int(ttl_s * 1000))
        async with self._translated("save cache"), self._r.pipeline(transaction=True) as p:
            p.set(self.key("sweep-cache"), payload, px=px)
            p.set(self.key("sweep-cache-stamp"), dump_json(stamp), px=px)
            await p.execute()

    async def load_cache_stamp(self) -> Any:
        """The stamp of the sweep cache (small: whether the cache is still the one in
        memory), or ``None``."""
        async with self._translated("load cache stamp"):
            raw = await self._r.get(self.key("sweep-cache-stamp"))
        return None if raw is None else json.loads(raw)

    async def load_stamped_cache(self) -> tuple[Any, str] | None:
        """(stamp or ``None``, sweep cache) read as one (``MGET``), or ``None`` without one."""
        async with self._translated("load cache"):
            stamp, raw = await self._r.mget(self.key("sweep-cache-stamp"), self.key("sweep-cache"))
        if raw is None:
            return None
        return (None if stamp is None else json.loads(stamp)), _text(raw)

    async def load_cache(self) -> str | None:
        """The sweep cache alone."""
        loaded = await self.load_stamped_cache()
        return None if loaded is None else loaded[1]

    # -- audit trail ---------------------------------------------------------------------------

    async def audit(self, entry: Mapping[str, Any]) -> None:
        """Append one audit entry (timestamped here) to the capped stream."""
        fields: dict[Any, Any] = {
            k: v if isinstance(v, str) else dump_json(v) for k, v in entry.items()
        }
        fields.setdefault("at", self._clock().isoformat())
        async with self._translated("audit"):
            await self._r.xadd(self.key("audit"), fields, maxlen=AUDIT_MAXLEN, approximate=True)

    async def audit_entries(self, count: int = 100) -> list[dict[str, str]]:
        """The latest ``count`` audit entries, oldest first."""
        async with self._translated("audit read"):
            rows: Any = await self._r.xrevrange(
                self.key("audit"), count=count
            )
        return [{_text(k): _text(v) for k, v in fields.items()} for _, fields in reversed(rows)]

    async def delete_prefix(self) -> int:
        """Delete every key under this store's prefix (tests and decommissioning)."""
        deleted = 0
        async with self._translated("delete prefix"):
            async for key in self._r.scan_iter(match=self.prefix + "*", count=500):
                deleted += await self._r.delete(key)
        return deleted


# -- the client --------------------------------------------------------------------------------
