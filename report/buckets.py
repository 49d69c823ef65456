"""Routing a job name to its bucket (RL · SFT · Datagen · Eval · Catch-all).

Policy: the rules are regexes from the config (``[buckets]``), case-insensitive. Precedence:

0. **Catch-all tasks first.** A name matching ``[buckets] other`` (consolidate, pretokenize,
   upload, push, GPU-CI, image build) is a one-line catch-all row whatever its domain prefix:
   the seed lists ``datagen-consolidate`` and "RL upload" among the catch-all jobs. (RL smoke
   tests stay RL: the deep-probe rule needs them.)
1. **Then the name's leading token.** Every bucket's patterns are tried against the
   start of the name (a pattern matching at position 0, anchored ``^eval-`` or not), in the
   contract's order (rl, sft, datagen, eval): ``eval-grpo-qwen`` is Eval and
   ``datagen-grpo-traces`` is Datagen, whatever keywords follow.
2. **Then inner keywords**, searched anywhere, in the same bucket order: ``my-grpo-sft-warmstart``
   is RL (rl is tried before sft), ``qwen-sft-2ep`` is SFT.
3. Anything unmatched is ``other`` (the catch-all: consolidate, pretokenize, uploads, image
   builds, CI, probes).
4. **Side tasks** (``[buckets] side_tasks``: feature smoke tests, measurement and grid probes)
   are catch-all too, unless the name routed to RL: ``smoke-sft-mix-0.5b`` and
   ``sft-mix-grid-probe-mbs8`` are one-line rows (an SFT row read them as runs, with
   ``sft-job-cleanup`` after them), while ``rl-smoke-test`` stays RL, where the deep-probe
   rule needs it.
"""

from __future__ import annotations

import re
from functools import lru_cache

from report.models import Bucket
from report.settings import BucketRules, compiled

_ORDER: tuple[Bucket, ...] = ("rl", "sft", "datagen", "eval")
_MEMO_MAX = 8192
"""Names remembered per rule set (a bot re-judges the same names every sweep)."""


class _Router:
    """One rule set's patterns, compiled once, and the names already routed.

    Each bucket's patterns are also joined into one alternation (``(?:a)|(?:b)``) when none
    has a group of its own and the join compiles: a search of the join finds a match exactly
    when one pattern's search does, and a match of the join at position 0 is the first
    pattern's, in order, that matches there, as its own ``match`` returns it (the join's only
    groups say which). That holds for any regex without groups: no backreference can be
    renumbered, and a global flag such as ``(?x)`` does not compile inside the join, which is
    then not used. So a name costs one search for the catch-all patterns, one match for the
    leading token and at most four searches, not one per pattern; a leading match that is
    empty (a pattern such as ``x*``) is settled pattern by pattern, as before."""

    def __init__(self, other: tuple[str, ...], buckets: tuple[tuple[str, ...], ...],
                 side: tuple[str, ...] = ()) -> None:
        self.other = (compiled(other), _joined([other]))
        self.side = (compiled(side), _joined([side]))
        self.inner = [(bucket, compiled(patterns), _joined([patterns]))
                      for bucket, patterns in zip(_ORDER, buckets, strict=True)]
        self.leading = _joined(list(buckets))
        # Group k of ``leading`` wraps the k-th pattern in bucket order: its bucket.
        self.leading_bucket = [None, *(b for b, g in zip(_ORDER, buckets, strict=True) for _ in g)]
        self.memo: dict[str, Bucket] = {}

    def route(self, name: str) -> Bucket:
        found = self.memo.get(name)
        if found is None:
            if len(self.memo) >= _MEMO_MAX:
                self.memo.clear()
            found = self.memo[name] = self._route(name)
        return found

    def _route(self, name: str) -> Bucket:
        if _searched(*self.other, name):
            return "other"
        found = self._domain(name)
        if found != "rl" and _searched(*self.side, name):
            return "other"
        return found

    def _domain(self, name: str) -> Bucket:
        leading = self._leading(name)
        if leading is not None:
            return leading
        for bucket, patterns, joined in self.inner:
            if _searched(patterns, joined, name):
                return bucket
        return "other"

    def _leading(self, name: str) -> Bucket | None:
        if self.leading is not None:
            m = self.leading.match(name)
            if m is None:
                return None
            if m.end() > 0 and m.lastindex is not None:
                return self.leading_bucket[m.lastindex]
        for bucket, patterns, _ in self.inner:
            if any((m := p.match(name)) is not None and m.end() > 0 for p in patterns):
                return bucket
        return None


def _searched(patterns: tuple[re.Pattern[str], ...], joined: re.Pattern[str] | None,
              name: str) -> bool:
    if joined is not None:
        return joined.search(name) is not None
    return any(p.search(name) for p in patterns)


def _joined(groups: list[tuple[str, ...]]) -> re.Pattern[str] | None:
    """Every pattern of ``groups`` in one alternation, in order (each in a capturing group
    when there are several groups), or None when there is no pattern, one has groups of its
    own, or the join does not compile (:class:`_Router`: each pattern is then tried alone)."""
    patterns = [p for g in groups for p in g]
    if not patterns or any(re.compile(p, re.IGNORECASE).groups for p in patterns):
        return None
    wrap = "({})" if len(groups) > 1 else "(?:{})"
    try:
        return re.compile("|".join(wrap.format(p) for p in patterns), re.IGNORECASE)
    except re.error:
        return None


@lru_cache(maxsize=64)
def _router(other: tuple[str, ...], buckets: tuple[tuple[str, ...], ...],
            side: tuple[str, ...]) -> _Router:
    return _Router(other, buckets, side)


def bucket_for(name: str, rules: BucketRules) -> Bucket:
    """The bucket for ``name``: leading-token matches first, then inner keywords (module policy)."""
    return _router(rules.other, (rules.rl, rules.sft, rules.datagen, rules.eval),
                   rules.side_tasks).route(name)
