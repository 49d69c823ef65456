"""The latest log text of each job's stored state: written by its new bytes only.

Policy (issue 12, "cost bounded by what changed"): a job's :class:`LogState` holds up to
``RECENT_CHARS`` (16 K characters) of the log's latest text, the excerpts a restarted bot
shows; the rest of the state (cursor, fold carry, contexts) is a few KB. Stored as one JSON
value, every warm sweep rewrote every running job's text for a few hundred new bytes (a
256-job sweep sent Redis 6.0 MB, and a Sentinel setup copied it to each replica). So the text
lives apart:

    P logs:{cluster}           HASH job id -> ``{"end": E, "state": <LogState JSON, no text>}``
    P logtext:{cluster}:{job}  LIST ``<stream id>:<start>:<E>``, then chunks: the log's bytes
                               start..E (each append one more chunk)

``E`` is the byte offset where the state's text ends (``recent_offset`` + its UTF-8 length);
the stored bytes begin at ``start`` <= ``recent_offset`` and the state's text is their part
from ``recent_offset`` on. The stream id names the reading of the file the bytes belong to
(:func:`stream_id` of ``LogState.stream``: one per read from nothing, kept by every resumed
read), so two writers of one stream hold the same bytes at the same offsets. A save whose
state continues a stream this process saw in the key APPENDs only the bytes the key lacks
(:data:`APPEND_LUA`, run in Redis: the key must hold that stream, begin at or before the
state's text, within :data:`SLACK_BYTES` of it, and end between what this process last saw
there and the state's end). That holds when another replica saved the same stream since,
which it does whenever replicas take turns. A LIST of chunks, not a STRING: Redis grows an
appended string's allocation to twice its length, which doubled what the texts held in memory.
Otherwise the text is written whole, in one more
pipelined round trip for those jobs: a new stream, a key lost in a failover or expired, one
ahead of this state (another replica's later save), or past the slack. So a job keeps at most
its text and 16 KB more in Redis, and a warm sweep's writes grow with the new bytes.

Saves and the load's second trip are MULTI/EXEC transactions, so a load sees each job's state
and text as one save left them. A reader trusts nothing either: a value whose text is of
another stream, or does not end exactly at the state's ``E`` (or begins after
``recent_offset``, or does not decode) is skipped, that job read cold, and the pair left for
the next save to replace (a save that tore in the middle, between its two trips, is such a
pair). A malformed or oversized value is deleted. A value stored whole by an earlier version
(its JSON holding the text) is still read.
"""

from __future__ import annotations

import hashlib
import math
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from pydantic import Field, ValidationError

from probes.models import Frozen
from probes.slurm.cursors import MAX_STATE_BYTES, RECENT_CHARS, LogState

SLACK_BYTES = RECENT_CHARS
"""Bytes a stored text may keep before its state's text: past this it is written whole."""

APPEND_LUA = """
-- KEYS: per job, its text key (a LIST: the header "<stream id>:<start>:<end>", then chunks).
-- ARGV: expiry (ms), slack, then per job: the stream id, where the state's text begins and
-- ends, where the bytes sent begin, and those bytes.
-- Answers per job: the key's start once appended, or -1 (not appended: write it whole).
local px, slack = ARGV[1], tonumber(ARGV[2])
local out, a = {}, 3
for j = 1, #KEYS do
  local key, sid = KEYS[j], ARGV[a]
  local begin, stop, from = tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3])
  local head = redis.pcall("LINDEX", key, 0)
  local held, first, last = nil, nil, nil
  if type(head) == "string" then
    held, first, last = string.match(head, "^(%x+):(%d+):(%d+)$")
  end
  out[j] = -1
  if held == sid then
    local start, have = tonumber(first), tonumber(last)
    if start <= begin and begin - start <= slack and from <= have and have <= stop then
      if have < stop then
        redis.call("RPUSH", key, string.sub(ARGV[a + 4], have - from + 1))
        redis.call("LSET", key, 0, sid .. ":" .. first .. ":" .. ARGV[a + 2])
      end
      redis.call("PEXPIRE", key, px)
      out[j] = start
    end
  end
  a = a + 5
end
return out
"""
APPEND_SHA = hashlib.sha1(APPEND_LUA.encode()).hexdigest()


def stream_id(stream: str) -> str:
    """The header's name of a stream: 32 hex characters whatever the stream's text."""
    return hashlib.sha256(stream.encode("utf-8")).hexdigest()[:32]


class StoredState(Frozen):
    """A ``logs`` hash value: the state without its text, and where that text ends."""

    end: int = Field(ge=0)
    state: LogState


@dataclass(frozen=True)
class Held:
    """A job's text key as this process last saw it (wrote, appended to or loaded)."""

    stream: str
    start: int
    end: int


@dataclass(frozen=True)
class Write:
    """One job's text write: whole (``payload`` the text), or an append (``payload`` the
    bytes from ``sent_from``, of which Redis appends what the key lacks)."""

    job_id: str
    stream: str
    begin: int
    end: int
    payload: bytes
    sent_from: int | None = None
    """For an append, the byte offset ``payload`` begins at; ``None``: a whole write."""

    def held(self, start: int) -> Held:
        """The key once written (``start``: where its bytes begin)."""
        return Held(self.stream, start, self.end)

    def items(self) -> list[bytes]:
        """A whole write's LIST items: the header, then the text (if any)."""
        header = f"{stream_id(self.stream)}:{self.begin}:{self.end}".encode()
        return [header, self.payload] if self.payload else [header]


def encode(state: LogState) -> tuple[str, bytes] | None:
    """``(hash value, text bytes)`` of a state, or ``None`` when the two are over
    :data:`MAX_STATE_BYTES` (as the state was bounded when stored whole)."""
    body = state.recent.encode("utf-8")
    inner = state.model_dump_json(exclude={"recent"})
    value = f'{{"end":{state.recent_offset + len(body)},"state":{inner}}}'
    return (value, body) if len(value) + len(body) <= MAX_STATE_BYTES else None


def needs_text(raw: bytes | str) -> bool:
    """A hash value that keeps its text apart (else an earlier version's whole state)."""
    head = raw[:7]
    return head in (b'{"end":', '{"end":')


def parse(raw: bytes | str) -> StoredState | None:
    """A hash value that keeps its text apart, or ``None`` when oversized or malformed."""
    if len(raw) > MAX_STATE_BYTES:
        return None
    try:
        return StoredState.model_validate_json(raw)
    except ValidationError:
        return None


def decode(stored: StoredState, items: list[bytes] | None) -> tuple[LogState, Held] | None:
    """A state and its text key's items (``None`` or empty: missing), and what that key
    holds; ``None`` when the two do not agree (read that job cold)."""
    if not items:
        return None
    state = stored.state
    parts = items[0].split(b":")
    if len(parts) != 3 or not all(p.isdigit() for p in parts[1:]) \
            or parts[0] != stream_id(state.stream).encode():
        return None
    start, end = int(parts[1]), int(parts[2])
    body = b"".join(items[1:])
    if not start <= state.recent_offset <= start + len(body) == end == stored.end:
        return None
    try:
        recent = body[state.recent_offset - start:].decode("utf-8")
    except UnicodeDecodeError:
        return None
    held = Held(stream=state.stream, start=start, end=end)
    return state.model_copy(update={"recent": recent}), held


def plan(job_id: str, state: LogState, body: bytes, held: Held | None) -> Write:
    """The write that leaves ``state``'s text in its key, given what the key ``held``."""
    begin = state.recent_offset
    end = begin + len(body)
    if (held is not None and held.stream == state.stream
            and held.start <= begin <= held.end <= end
            and begin - held.start <= SLACK_BYTES):
        return Write(job_id, state.stream, begin, end, body[held.end - begin:],
                     sent_from=held.end)
    return whole(job_id, state, body)


def whole(job_id: str, state: LogState, body: bytes) -> Write:
    """The whole text of ``state`` (its header is :meth:`Write.header`)."""
    begin = state.recent_offset
    return Write(job_id, state.stream, begin, begin + len(body), body)


class TextBook:
    """The text keys this process wrote last, per (cluster, job): what an append may assume,
    and when each key's expiry was last set (a quiet job's is renewed now and then)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._held: dict[tuple[str, str], Held] = {}
        self._set_at: dict[tuple[str, str], float] = {}
        self._clock = clock

    def get(self, cluster: str, job_id: str) -> Held | None:
        return self._held.get((cluster, job_id))

    def keep(self, cluster: str, job_id: str, held: Held) -> None:
        self._held[(cluster, job_id)] = held
        self._set_at[(cluster, job_id)] = self._clock()

    def due(self, cluster: str, job_ids: Iterable[str], *, every_s: float) -> list[str]:
        """Those of ``job_ids`` whose key's expiry was set over ``every_s`` ago (or never by
        this process)."""
        now = self._clock()
        return [job for job in job_ids
                if now - self._set_at.get((cluster, job), -math.inf) >= every_s]

    def renewed(self, cluster: str, job_ids: Iterable[str]) -> None:
        now = self._clock()
        for job_id in job_ids:
            if (cluster, job_id) in self._held:
                self._set_at[(cluster, job_id)] = now

    def forget(self, cluster: str, job_ids: Iterable[str] | None = None) -> None:
        """Those jobs' entries; with ``None``, every entry of the cluster."""
        if job_ids is None:
            job_ids = [job for c, job in self._held if c == cluster]
        for job_id in job_ids:
            self._held.pop((cluster, job_id), None)
            self._set_at.pop((cluster, job_id), None)

    def __len__(self) -> int:
        return len(self._held)
