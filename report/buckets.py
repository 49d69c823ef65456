"""Routing a job name to its bucket (RL · SFT · Datagen · Eval · Catch-all).

Policy: the rules are regexes from the config (``[buckets]``), searched anywhere in the name
and case-insensitively; buckets are tried in the contract's order (rl, sft, datagen, eval)
and the first that matches wins, so a ``grpo-sft-warmstart`` is RL. Anything unmatched is
``other`` (the catch-all: consolidate, pretokenize, uploads, image builds, CI, probes).
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
    """Return the first bucket (rl, sft, datagen, eval) whose regex matches ``name``, else other."""
    for bucket in _ORDER:
        patterns: tuple[str, ...] = getattr(rules, bucket)
        if any(p.search(name) for p in _compiled(patterns)):
            return bucket
    return "other"
