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
"""

from __future__ import annotations

import re
from functools import lru_cache

from report.models import Bucket
from report.settings import BucketRules

_ORDER: tuple[Bucket, ...] = ("rl", "sft", "datagen", "eval")


@lru_cache(maxsize=256)
def _compiled(patterns: tuple[str, ...]) -> tuple[re.Pattern[str], ...]:
    # Patterns are validated when the config is loaded; compiling once per rule set keeps a
    # sweep over hundreds of jobs from recompiling the same handful of regexes.
    return tuple(re.compile(p, re.IGNORECASE) for p in patterns)


def bucket_for(name: str, rules: BucketRules) -> Bucket:
    """The bucket for ``name``: leading-token matches first, then inner keywords (module policy)."""
    if any(p.search(name) for p in _compiled(rules.other)):
        return "other"
    compiled = [(bucket, _compiled(getattr(rules, bucket))) for bucket in _ORDER]
    for bucket, patterns in compiled:
        if any((m := p.match(name)) is not None and m.end() > 0 for p in patterns):
            return bucket
    for bucket, patterns in compiled:
        if any(p.search(name) for p in patterns):
            return bucket
    return "other"
