"""Each cluster's log states in Redis: the cursor and fold carry per job, its text apart.

Policy (``bot.store``'s keys ``logs:{cluster}`` and ``logtext:{cluster}:{job}``): a state is
stored without its text, the text as a list of chunks a warm save appends the new bytes to
(``bot.store_texts``); jobs gone from the sweep are pruned with their texts; a malformed or
oversized state is deleted rather than read; every key expires ``expire_hours`` after its
last write.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

from bot import store_texts
from bot.store_base import StoreBase, _chunks, _text
from bot.store_texts import APPEND_LUA, APPEND_SHA
from bot.store_windows import JOBS_PER_CALL
from probes.slurm.cursors import LogState, decode_state


def _encode_states(
    states: Mapping[str, LogState],
) -> dict[str, tuple[str, bytes] | None]:
    """Each state as stored, its text apart (``bot.store_texts.encode``: ``None`` when over
    the size bound)."""
    return {job_id: store_texts.encode(state) for job_id, state in states.items()}



class LogStateStore(StoreBase):
    """:class:`bot.store.RedisStore`'s log states (``probes.slurm.cursors.LogState``)."""

    async def load_log_states(self, cluster: str) -> dict[str, LogState]:
        """Every job's stored log state: the jobs' names in one round trip, then their states
        and texts (``bot.store_texts``) as one transaction in a second. A malformed or
        oversized state is deleted (one more trip, only then); a state whose text does not
        match it is skipped and left for the next save to replace: that job is read cold."""
        key = self.key("logs", cluster)
        text_key = functools.partial(self.key, "logtext", cluster)
        self.texts.forget(cluster)
        async with self._translated("load log states"):
            names = [_text(name) for name in await self._r.hkeys(key)]
            if not names:
                return {}
            async with self._r.pipeline(transaction=True) as p:
                p.hgetall(key)
                for job in names:
                    p.lrange(text_key(job), 0, -1)
                raw, *texts = await p.execute(raise_on_error=False)
        if isinstance(raw, Exception):
            raise raw
        # A text key of another type (an earlier build's STRING) is a missing text: that job
        # reads cold and its next save writes the key whole.
        text_of = {job: None if isinstance(text, Exception) else text
                   for job, text in zip(names, texts, strict=True)}
        states: dict[str, LogState] = {}
        bad: list[str] = []
        for field, value in raw.items():
            job_id = _text(field)
            if not store_texts.needs_text(value):
                if (state := decode_state(value)) is not None:
                    states[job_id] = state
                else:
                    bad.append(job_id)
                continue
            stored = store_texts.parse(value)
            if stored is None:
                bad.append(job_id)
                continue
            got = store_texts.decode(stored, text_of.get(job_id))
            if got is not None:
                states[job_id] = got[0]
                self.texts.keep(cluster, job_id, got[1])
        if bad:
            async with self._translated("drop log states"), \
                    self._r.pipeline(transaction=True) as p:
                p.hdel(key, *bad)
                p.delete(*map(text_key, bad))
                await p.execute()
        return states

    async def save_log_states(self, cluster: str, states: Mapping[str, LogState], *,
                              drop: Collection[str] = (), renew: Collection[str] = ()) -> None:
        """Write ``states``, delete the ``drop`` jobs' (and any state over the size bound),
        renew the expiry of the hash and of the ``renew`` jobs' texts (present, unchanged; each
        at most every quarter of the expiry, ``TextBook.due``):
        one round trip, a transaction; one more only for the texts that could not be
        appended to (``bot.store_texts``) or when Redis lost the script. A reader skips a
        job whose state and text disagree in between."""
        # Encoding is CPU work (~0.1 ms a state): a worker thread keeps the event loop free
        # for the merge beside it and for Slack acks.
        encoded = (await asyncio.to_thread(_encode_states, states) if states else {})
        writes = {k: v for k, v in encoded.items() if v is not None}
        gone = [*drop, *(k for k, v in encoded.items() if v is None)]
        book = self.texts
        renew = book.due(cluster, renew, every_s=self.expire_ms / 4000)
        if not writes and not gone and not renew:
            return
        planned = [store_texts.plan(job, states[job], body, book.get(cluster, job))
                   for job, (_, body) in writes.items()]
        book.forget(cluster, [*gone, *writes])  # known again once Redis has answered
        async with self._translated("save log states"):
            held = await self._write_states(cluster, states, writes, planned,
                                            gone=gone, renew=renew)
        for w, start in held:
            book.keep(cluster, w.job_id, w.held(start))
        book.renewed(cluster, renew)

    async def _write_states(
        self, cluster: str, states: Mapping[str, LogState],
        writes: Mapping[str, tuple[str, bytes]], planned: Sequence[store_texts.Write], *,
        gone: Sequence[str], renew: Collection[str],
    ) -> list[tuple[store_texts.Write, int]]:
        """:meth:`save_log_states`' transaction, and the whole texts of the appends Redis
        refused; each text write that now holds, with where its key's text starts."""
        text_key = functools.partial(self.key, "logtext", cluster)
        appends = [w for w in planned if w.sent_from is not None]
        calls = self._append_calls(text_key, appends)
        async with self._r.pipeline(transaction=True) as p:
            self._queue_save(p, cluster, writes, planned,
                             gone=gone, renew=renew)
            for keys, args in calls:
                p.evalsha(APPEND_SHA, len(keys), *keys, *args)
            results = await p.execute(raise_on_error=False)
        for result in results[: len(results) - len(calls)]:
            if isinstance(result, Exception):
                raise result
        starts = await self._script_calls(APPEND_SHA, APPEND_LUA, calls,
                                          results[len(results) - len(calls):])
        done = [(w, w.begin) for w in planned if w.sent_from is None]
        refused = []
        for w, start in zip(appends, starts, strict=True):
            if start >= 0:
                done.append((w, start))
            else:  # the key is not as this process saw it: the whole text
                refused.append(store_texts.whole(w.job_id, states[w.job_id],
                                                 writes[w.job_id][1]))
        if refused:
            async with self._r.pipeline(transaction=True) as p:
                for w in refused:
                    self._write_whole(p, text_key(w.job_id), w)
                await p.execute()
        return [*done, *((w, w.begin) for w in refused)]

    def _append_calls(self, text_key: Callable[[str], str], appends: Sequence[store_texts.Write],
                      ) -> list[tuple[list[str], list[Any]]]:
        """The append script's calls (keys, args) for ``appends``, at most
        :data:`JOBS_PER_CALL` jobs a call."""
        return [([text_key(w.job_id) for w in chunk],
                 [self.expire_ms, store_texts.SLACK_BYTES,
                  *(a for w in chunk for a in (store_texts.stream_id(w.stream), w.begin, w.end,
                                               w.sent_from, w.payload))])
                for chunk in _chunks(appends, JOBS_PER_CALL)]

    def _queue_save(self, p: Any, cluster: str, writes: Mapping[str, tuple[str, bytes]],
                    planned: Sequence[store_texts.Write], *, gone: Sequence[str],
                    renew: Collection[str]) -> None:
        """Queue on pipeline ``p`` a save's states, whole texts, deletions and expiries (all
        but its appends)."""
        key = self.key("logs", cluster)
        text_key = functools.partial(self.key, "logtext", cluster)
        if writes:
            p.hset(key, mapping={k: v for k, (v, _) in writes.items()})
        for w in planned:
            if w.sent_from is None:
                self._write_whole(p, text_key(w.job_id), w)
        if gone:
            p.hdel(key, *gone)
            p.delete(*map(text_key, gone))
        for job in renew:
            p.pexpire(text_key(job), self.expire_ms)
        p.pexpire(key, self.expire_ms)

    def _write_whole(self, p: Any, key: str, write: store_texts.Write) -> None:
        """Queue ``write``'s whole text on pipeline ``p``: the key replaced, with its expiry."""
        p.delete(key)
        p.rpush(key, *write.items())
        p.pexpire(key, self.expire_ms)
