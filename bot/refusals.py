"""Telling the channel of a refused config edit once, across every replica of the bot.

Each replica re-reads the one config file at its sweeps (CONTRACT §2) and keeps the last good
config when an edit is refused (:class:`bot.config_source.ConfigSource`). Which refusal the channel
was told is shared in Redis (``P doc:config-refused``: the SHA-256 of the reason told), so
the replica leading the next interval does not tell it again; any replica's sweep that reads
the file valid deletes it, so the same bad edit made again later is told again, whichever
replica read the fix. While Redis cannot answer, each replica's own memory decides
(:meth:`~bot.config_source.ConfigSource.news`), as with one replica.
"""

from __future__ import annotations

import hashlib

from bot.config_source import ConfigSource
from bot.store import RedisStore, StoreUnavailable

REFUSAL_DOC = "config-refused"
"""The document naming the refusal last told (expires with ``[redis] expire_hours``)."""


async def refusal_news(source: ConfigSource, store: RedisStore) -> str | None:
    """The refusal of the latest read when no replica told it yet (and claim it told), else
    None; a valid read forgets the refusal told."""
    local = source.news()  # kept in step: it answers while Redis cannot
    try:
        return await _claim(source.error, store)
    except StoreUnavailable:
        return local


async def _claim(reason: str | None, store: RedisStore) -> str | None:
    if reason is None:
        await store.delete_doc(REFUSAL_DOC)  # fixed: the same bad edit again is told again
        return None
    told = await store.get_doc(REFUSAL_DOC)
    mine = {"sha256": hashlib.sha256(reason.encode()).hexdigest()}
    if told == mine:
        return None
    # One step against the value read: of two replicas claiming at once, one tells it.
    return reason if await store.put_doc_if(REFUSAL_DOC, mine, expected=told) else None
