"""``read_fingerprint`` read line by line across reads of one log, resumable.

Policy: the fingerprint reader (``probes.logs.fingerprint``) walks the whole tail once, and a
dump reader there may read many lines ahead (a pprint'ed dict until its brackets balance, an
``Arguments(`` block until ``)``, a YAML run until it stops). ``FingerprintFold`` runs the same
walk, with the same readers, over the lines read so far; a reader that asks for a line not yet
read leaves its lines *pending*: its changes are undone and it runs again from its first line
when more lines come. So the settled part is read once, the carry holds the config found so far
and the pending lines (usually none; the lines of one dump cut by the read), and ``fingerprint``
with the last line equals ``read_fingerprint`` over every line. The dispatch below is
``fingerprint._collect``'s, line for line; the readers are its own (the fields built by
``fingerprint_fields``).
"""

from __future__ import annotations

import logging
from bisect import bisect_left
from collections.abc import Iterator, Sequence
from typing import overload

from pydantic import Field

from probes.logs import fingerprint as fp
from probes.logs import fingerprint_fields as fields
from probes.logs.carried import Carried
from probes.logs.fingerprint_lines import HEADERS, ReadLines
from probes.logs.lines import strip_ray_prefix
from probes.models import RunFingerprint

_log = logging.getLogger(__name__)
_ENDLESS = 1 << 62
_FAILURES = (ValueError, RecursionError, MemoryError, SyntaxError, TypeError)


class FingerprintCarry(Carried):
    """The fingerprint walk's state: what was found, and the lines still pending."""

    config: dict[str, str] = Field(default_factory=dict)
    trainer: str | None = None
    pending: tuple[str, ...] = ()
    """Ray-prefix-stripped lines from the start of a dump whose end was not read yet."""
    image: str | None = None
    banner: str | None = None
    pass_at: str | None = None
    failed: bool = False
    """A settled dump made ``read_fingerprint`` give up (no fingerprint, whatever follows)."""


class _NeedMore(Exception):
    """A reader asked for a line past the ones read so far."""


class _Unread(Sequence[str]):
    """The lines read so far, as a sequence that goes on: past them, a read raises."""

    def __init__(self, lines: list[str]) -> None:
        self.lines = lines

    def __len__(self) -> int:
        return _ENDLESS

    @overload
    def __getitem__(self, index: int) -> str: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[str]: ...
    def __getitem__(self, index: int | slice) -> str | Sequence[str]:
        if isinstance(index, slice):
            raise _NeedMore
        if index >= len(self.lines):
            raise _NeedMore
        return self.lines[index]

    def __iter__(self) -> Iterator[str]:
        raise _NeedMore


class _Journal(dict[str, str]):
    """The config dict, able to undo the writes since ``mark`` (a reader left pending)."""

    def mark(self) -> None:
        self.undo: dict[str, str | None] = {}

    def __setitem__(self, key: str, value: str) -> None:
        undo = getattr(self, "undo", None)
        if undo is not None and key not in undo:
            undo[key] = self.get(key)
        super().__setitem__(key, value)

    def rollback(self) -> None:
        for key, old in self.undo.items():
            if old is None:
                del self[key]
            else:
                super().__setitem__(key, old)
        self.undo = {}


class FingerprintFold:
    """The fingerprint walk over a log read in increments (see the module policy)."""

    def __init__(self, carry: FingerprintCarry | None = None) -> None:
        carry = carry or FingerprintCarry()
        self.config = _Journal(carry.config)
        self.trainer = carry.trainer
        self.pending = list(carry.pending)
        self.image, self.banner, self.pass_at = carry.image, carry.banner, carry.pass_at
        self.failed = carry.failed
        self.flat_until = 0
        """Where the flat ``key: value`` run the walk last read ends (indices of one walk)."""

    def feed(self, lines: Sequence[str], *, gated: bool = True) -> None:
        """Read the next complete lines (ANSI already stripped).

        ``gated``: the walk steps only onto the lines ``ReadLines`` keeps as dump starts (the
        pending lines, a dump's start, are walked whole), as ``read_fingerprint`` does; the
        tests compare it with ``gated=False``, every line walked."""
        if self.failed:
            return
        gates = ReadLines(lines, gated)
        bodies = gates.bodies
        self._once(bodies, gates)
        held = len(self.pending)
        walk = [*self.pending, *bodies]
        starts = [held + start for start in gates.starts]
        unread = _Unread(walk)
        index, at = 0, 0
        self.flat_until = 0  # fingerprint._collect's: where a flat 'key: value' run ends
        try:
            while index < len(walk):
                if index >= held:  # step over what starts no dump (fingerprint._collect)
                    at = bisect_left(starts, index, at)
                    if at == len(starts):
                        index = len(walk)
                        break
                    index = starts[at]
                trainer = self.trainer
                self.config.mark()
                try:
                    index = self._step(unread, index)
                except _NeedMore:
                    self.config.rollback()
                    self.trainer = trainer
                    break
        except _FAILURES:
            self.failed = True
        self.config.undo = {}
        self.pending = walk[index:]

    def _once(self, bodies: Sequence[str], gates: ReadLines | None = None) -> None:
        """The image and banner (first in the log) and ``pass_at_N`` (last in it); ``gates``
        name the only lines that may hold each."""
        images = gates.images if gates is not None else range(len(bodies))
        banners = gates.banners if gates is not None else range(len(bodies))
        passes = gates.passes if gates is not None else range(len(bodies))
        if self.image is None:
            self.image = fp._image(bodies[i] for i in images)
        if self.banner is None:
            banner = next((m for i in banners if "Total train batch" in bodies[i]
                           if (m := fp._BANNER_BATCH_RE.search(bodies[i]))), None)
            self.banner = banner.group(1) if banner else None
        pass_at = next((m for i in reversed(passes) if "pass_at_" in bodies[i]
                        if (m := fp._PASS_AT_RE.search(bodies[i]))), None)
        if pass_at is not None:
            self.pass_at = pass_at.group(1)

    def _step(self, bodies: Sequence[str], index: int) -> int:
        """One turn of ``fingerprint._collect``'s loop at ``index``: the next index."""
        body = bodies[index]
        stripped = body.strip()
        for mark, name in HEADERS:
            if mark in body:
                self.trainer = self.trainer or name
        config = self.config
        if stripped.startswith("{") and ("'" in stripped or '"' in stripped):
            return fp._literal_dump(bodies, index, config)
        if stripped.endswith("(") and fp._ARGS_OPEN_RE.search(stripped):
            self.trainer = self.trainer or "hf"
            return fp._args_dump(bodies, index + 1, config)
        if "=" in body and fp._one_line(body, config):
            return index + 1
        dots = fp._DOTS_RE.search(body) if " .." in body else None
        if dots is not None:
            fp._put(config, dots.group(1), dots.group(2).strip())
        elif index >= self.flat_until and fp._YAML_RE.match(body):
            index, self.flat_until = fp._yaml_dump(bodies, index, config)  # read once
            return index
        return index + 1

    def carry(self) -> FingerprintCarry:
        return FingerprintCarry(
            config=dict(self.config), trainer=self.trainer, pending=tuple(self.pending),
            image=self.image, banner=self.banner, pass_at=self.pass_at, failed=self.failed)

    def fingerprint(self, last: str) -> RunFingerprint | None:
        """The fingerprint with ``last`` (the log's last line, maybe unfinished) read too:
        ``read_fingerprint`` over every line. Consumes this walk."""
        try:
            return self._finish(strip_ray_prefix(last))
        except _FAILURES:
            return None
        except Exception:
            _log.exception("fingerprint fold failed with %d pending lines", len(self.pending))
            return None

    def _finish(self, last: str) -> RunFingerprint | None:
        if self.failed:
            return None
        self._once([last])
        walk = [*self.pending, last]
        config: dict[str, str] = dict(self.config)
        self.config = _Journal(config)
        index = self.flat_until = 0
        while index < len(walk):
            index = self._step(walk, index)
        config = dict(self.config)
        if not config and self.image is None and self.banner is None and self.pass_at is None:
            return None
        trainer = self.trainer if self.trainer is not None else fields._trainer_of(config)
        built = fields._build(config, trainer, self.image or fields._image_key(config),
                              fields._int(self.banner))
        if self.pass_at is None:
            return built
        return built.model_copy(update={"pass_at_k": fields._int(self.pass_at)})
