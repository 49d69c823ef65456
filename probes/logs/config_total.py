"""A run's total steps from its printed config, when no banner or bar gives one.

The rulebook: "Total steps come from the rendered config or the trainer banner". Some trainers
print no banner and no training bar, only their config: ROLL logs ``pipeline_config:
RLVRConfig(..., max_steps=500, ...)`` and loops ``range(max_steps)``. The fingerprint
(``probes.logs.fingerprint``) has already flattened that dump; its step limit is read here.

Policy: only a run-level key counts, at the top of the dump or under ``trainer.``/``train.``
(an agent's or environment's ``env.max_steps`` is a turn limit, not the run's); the first of
:data:`TOTAL_KEYS` present wins; a value that is no positive integer (HF's ``max_steps=-1``,
"not set: the epochs decide") is no total. With a banner's or bar's total too, the smaller is
the run's (``capped_total``): a trainer stops at its configured limit, and where a banner
already counts it the two agree; verl's FSDP SFT trainer prints epochs x steps an epoch
(``Number of steps/epoch ...``) even when ``trainer.total_training_steps`` stops it earlier.
"""

from __future__ import annotations

from probes.models import RunFingerprint

TOTAL_KEYS = ("max_steps", "total_training_steps", "train_iters", "max_num_steps")
_SECTIONS = ("", "trainer.", "train.")


def config_total(fingerprint: RunFingerprint | None) -> int | None:
    """The run's step limit its printed config names, or None."""
    if fingerprint is None or not fingerprint.config:
        return None
    config = fingerprint.config
    for name in TOTAL_KEYS:
        for section in _SECTIONS:
            raw = config.get(section + name)
            if raw is not None and raw.isdigit() and len(raw) <= 12 and int(raw) > 0:
                return int(raw)
    return None


def capped_total(total: int | None, fingerprint: RunFingerprint | None) -> int | None:
    """The run's total: ``total`` (a banner's or bar's) capped by the printed config's step
    limit, or that limit alone when there is no ``total``."""
    limit = config_total(fingerprint)
    if total is None or limit is None:
        return total or limit
    return min(total, limit)
