"""The latest log text of each job's stored state: written by its new bytes only.

Policy (issue 12, "cost bounded by what changed"): a job's :class:`LogState` holds up to
``RECENT_CHARS`` (16 K) of the log's latest text, the excerpts a restarted bot shows; the rest
of the state (cursor, fold carry, contexts) is a few KB. Stored as one JSON value, every warm
sweep rewrote every running job's 16 KB for a few hundred new bytes (a 256-job sweep wrote
5.9 MB, and a Sentinel setup copied it to each replica). So the text lives apart:

    P logs:{cluster}           HASH job id -> ``{"end": E, "state": <LogState JSON, no text>}``
    P logtext:{cluster}:{job}  STRING ``<token>:<start>\\n`` then the log's bytes start..E

``E`` is the byte offset where the state's text ends (``recent_offset`` + its UTF-8 length);
the stored bytes begin at ``start`` <= ``recent_offset`` and the state's text is their part
from ``recent_offset`` on. A sweep that continued the job's log (same ``LogState.stream``:
no rotation, truncation or rewrite since) APPENDs the bytes after the stored end; the stored
text is written whole (a new ``token``) when the stream changed, when no write of this
process is known (its first save, a failure) or when the bytes kept before ``recent_offset``
would pass :data:`SLACK_BYTES` (16 KB), so a job keeps at most its text and 16 KB more in
Redis, and a warm sweep's writes grow with the new bytes.

An append is a compare-and-append in Redis (:data:`APPEND_LUA`): it runs only if the key
still holds this process's token and the length it wrote. Another replica's write, a write
lost in a failover, an expired or flushed key all fail it, and that job's text is written
whole in one more pipelined round trip. A reader trusts nothing either: a value whose bytes
do not end exactly at the state's ``E`` (or begin after ``recent_offset``, or do not decode)
is dropped and that job read cold. A value stored whole by an earlier version (its JSON
holding the text) is still read.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Mapping
from dataclasses import dataclass

from pydantic import Field, ValidationError

from probes.models import Frozen
from probes.slurm.cursors import MAX_STATE_BYTES, RECENT_CHARS, LogState

SLACK_BYTES = RECENT_CHARS
"""Bytes a stored text may keep before its state's text: past this it is written whole."""

APPEND_LUA = """
-- KEYS: per job, its text key. ARGV: expiry (ms), then per job: the token the key must
-- begin with, the length it must have, the bytes to append.
-- Answers per job: the new length, or -1 (not appended: the key is not as this process left it).
local px = ARGV[1]
local out, a = {}, 2
for j = 1, #KEYS do
  local key, token, want = KEYS[j], ARGV[a], tonumber(ARGV[a + 1])
  if redis.call("STRLEN", key) == want and redis.call("GETRANGE", key, 0, #token - 1) == token then
    out[j] = redis.call("APPEND", key, ARGV[a + 2])
    redis.call("PEXPIRE", key, px)
  else
    out[j] = -1
  end
  a = a + 3
end
return out
"""
APPEND_SHA = hashlib.sha1(APPEND_LUA.encode()).hexdigest()


class StoredState(Frozen):
    """A ``logs`` hash value: the state without its text, and where that text ends."""

    end: int = Field(ge=0)
    state: LogState


@dataclass(frozen=True)
class Held:
    """What this process last wrote to a job's text key (and Redis confirmed)."""

    stream: str
    token: str
    start: int
    end: int

    def header(self) -> bytes:
        return f"{self.token}:{self.start}\n".encode()


@dataclass(frozen=True)
class Write:
    """One job's text write: whole (``payload`` the header and text) or appended (``payload``
    the new bytes); ``held`` is what the key holds once it is done."""

    job_id: str
    held: Held
    payload: bytes
    want: int | None = None
    """For an append, the key's length before it (header + stored bytes); ``None``: whole."""

    def length(self) -> int:
        """The key's length once written."""
        if self.want is None:
            return len(self.payload)
        return self.want + len(self.payload)


def encode(state: LogState) -> tuple[str, bytes] | None:
    """``(hash value, text bytes)`` of a state, or ``None`` over :data:`MAX_STATE_BYTES`."""
    body = state.recent.encode("utf-8")
    inner = state.model_dump_json(exclude={"recent"})
    value = f'{{"end":{state.recent_offset + len(body)},"state":{inner}}}'
    return (value, body) if len(value) <= MAX_STATE_BYTES else None


def needs_text(raw: bytes | str) -> bool:
    """A hash value that keeps its text apart (else an earlier version's whole state)."""
    head = raw[:7]
    return head in (b'{"end":', '{"end":')


def decode(raw: bytes | str, text: bytes | None) -> tuple[LogState, Held] | None:
    """The state of a hash value and its text key's value, and what that key holds; ``None``
    when either is oversized, malformed, or the two do not agree (read that job cold)."""
    if len(raw) > MAX_STATE_BYTES or text is None:
        return None
    try:
        stored = StoredState.model_validate_json(raw)
    except ValidationError:
        return None
    header, newline, body = text.partition(b"\n")
    token, colon, start_text = header.partition(b":")
    if (not newline or not colon or not start_text.isdigit() or len(token) != 32
            or token.strip(b"0123456789abcdef")):
        return None
    state, start = stored.state, int(start_text)
    if not start <= state.recent_offset <= start + len(body) == stored.end:
        return None
    if len(body) > SLACK_BYTES + 4 * RECENT_CHARS:  # more than any write leaves
        return None
    try:
        recent = body[state.recent_offset - start:].decode("utf-8")
    except UnicodeDecodeError:
        return None
    held = Held(stream=state.stream, token=token.decode(), start=start, end=stored.end)
    return state.model_copy(update={"recent": recent}), held


def plan(job_id: str, state: LogState, body: bytes, held: Held | None) -> Write:
    """The write that leaves ``state``'s text in its key, given what the key ``held``."""
    begin = state.recent_offset
    end = begin + len(body)
    if (held is not None and held.stream == state.stream
            and held.start <= begin <= held.end <= end
            and begin - held.start <= SLACK_BYTES):
        return Write(job_id, Held(held.stream, held.token, held.start, end),
                     body[held.end - begin:], want=len(held.header()) + held.end - held.start)
    fresh = Held(state.stream, uuid.uuid4().hex, begin, end)
    return Write(job_id, fresh, fresh.header() + body)


class TextBook:
    """The text keys this process wrote last, per (cluster, job): what an append may assume."""

    def __init__(self) -> None:
        self._held: dict[tuple[str, str], Held] = {}

    def get(self, cluster: str, job_id: str) -> Held | None:
        return self._held.get((cluster, job_id))

    def keep(self, cluster: str, job_id: str, held: Held) -> None:
        self._held[(cluster, job_id)] = held

    def forget(self, cluster: str, job_ids: Mapping[str, object] | list[str]) -> None:
        for job_id in job_ids:
            self._held.pop((cluster, job_id), None)

    def __len__(self) -> int:
        return len(self._held)
