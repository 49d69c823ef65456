"""Judging what an RL run runs: its fingerprint, earlier attempts, and config-declared ablations.

Policy (seed §RL "New/untested RL run? → deep-probe it"):

- The fingerprint is what the run runs, not its name: the model, container image, geometry
  (nodes x GPUs/node, world size, TP/PP/DP) and a hash of the rest of the printed config
  (``probes.logs.fingerprint``), plus scheduler/Kubernetes labels naming a config, image, model,
  geometry or commit. Keys that differ between attempts of one unchanged run (names, paths,
  checkpoint/resume/logging settings, seeds, ports, ranks) are left out of the hash.
- Memory entries are ``<content>|<name stem>``: with a fingerprint, a run is known when some
  entry has the same content (a known setting under a new name is not new; a known name with a
  new image, model or config is); when its log no longer shows the dump (the tail rolled past
  the banner), the name stem decides, so a long run does not turn "new" once its banner is gone.
  Entries without ``|`` (older memory) count as both content and stem.
- Earlier attempts of the same run in the same sweep (same cluster and user; same name stem, or
  a chain predecessor named in ``depends_on``; submitted earlier) stand in for memory: when the
  latest one that has ended and printed a fingerprint differs in model, image, geometry or
  config, the run is a relaunch in a new setting. An attempt still running beside it is a
  parallel arm, not the one it relaunches. With memory, memory decides (a setting seen healthy
  is known) and the relaunch comparison only words the reason.
- A spike-mitigation ablation is recognised from its config as well as its name: the same
  configurable pattern list is searched in ``key=value`` entries whose value is set (not
  false/0/null/empty), skipping sections switched off by ``enabled``/``enable``/``use`` = false.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta

from probes.models import TERMINAL_STATES, JobFacts, RunFingerprint, SchedulerRecord
from report.chain import name_stem

LABEL_KEY = re.compile(r"config|image|model|geometry|hash|commit|git", re.IGNORECASE)
VOLATILE_KEY = re.compile(
    r"(?:^|[._])(?:(?:experiment|exp|run|project|job|group|wandb|hub_model|output|model)_?name"
    r"\w*|\w*dir|\w*path|save\w*|load\w*|resume\w*|ckpt\w*|"
    r"checkpoint\w*|wandb\w*|log\w*|report_to|seed|\w*port|master_addr|host\w*|\w*rank|"
    r"timestamp|run_id|job_id|hub_\w+|push_to_hub|total_training_steps|val_before_train|"
    r"tracking\w*|project\w*|experiment\w*|trust_remote_code)$"
)
_FALSY = frozenset({"", "false", "0", "0.0", "null", "none", "[]", "{}", "no", "off"})
_SWITCHES = ("enabled", "enable", "use")
_PARTS = ("model", "image", "geometry", "config")


def fingerprint_parts(facts: JobFacts) -> dict[str, str]:
    """The fingerprint's named parts (absent parts left out)."""
    parts: dict[str, str] = {}
    printed = facts.summary.fingerprint if facts.summary else None
    if printed is not None:
        if printed.model:
            parts["model"] = printed.model
        if printed.image:
            parts["image"] = printed.image
        geometry = _geometry(printed)
        if geometry:
            parts["geometry"] = geometry
        stable = sorted((k, v) for k, v in printed.config.items() if not VOLATILE_KEY.search(k))
        if stable:
            digest = hashlib.sha256(repr(stable).encode("utf-8", "replace")).hexdigest()
            parts["config"] = digest[:12]
    for key, value in sorted(facts.record.labels.items()):
        if LABEL_KEY.search(key):
            parts.setdefault(key, value)  # the printed part wins over a label of that name
    return parts


def _geometry(printed: RunFingerprint) -> str:
    cells = []
    if printed.nodes or printed.gpus_per_node:
        cells.append(f"{printed.nodes or '?'}x{printed.gpus_per_node or '?'}")
    for label, value in (("world", printed.world_size), ("tp", printed.tp), ("pp", printed.pp),
                         ("dp", printed.dp)):
        if value:
            cells.append(f"{label}{value}")
    return ",".join(cells)


def run_identity(job: JobFacts | SchedulerRecord) -> tuple[str, str]:
    """(content fingerprint, name stem); the content is empty when nothing is known."""
    facts = job if isinstance(job, JobFacts) else JobFacts(record=job)
    parts = fingerprint_parts(facts)
    content = ";".join(f"{k}={v}" for k, v in sorted(parts.items()))
    return content, name_stem(facts.record.name)


def run_fingerprint(job: JobFacts | SchedulerRecord) -> str:
    """The memory entry for a run: ``<content>|<name stem>``, or the stem alone when nothing
    about its content is known (the older form, read as both)."""
    content, stem = run_identity(job)
    return f"{content}|{stem}" if content else stem


def _split(entry: str) -> tuple[str, str]:
    if "|" not in entry:
        return entry, entry.lower()
    content, stem = entry.rsplit("|", 1)
    return content, stem


def known_in_memory(job: JobFacts, seen: frozenset[str]) -> bool:
    """Whether this run's setting was already seen healthy (module policy)."""
    content, stem = run_identity(job)
    known = [_split(s) for s in seen]
    if content:
        return any(c == content for c, _ in known)
    return any(s == stem for _, s in known)


def _before(record: SchedulerRecord, other: SchedulerRecord) -> bool:
    def key(r: SchedulerRecord) -> tuple[datetime, int]:
        at = r.submit_time or r.start_time or datetime.max
        naive = at.replace(tzinfo=None) - (at.utcoffset() or timedelta())
        return naive, int(r.job_id) if r.job_id.isdigit() else 0
    return key(other) < key(record)


def run_attempts(facts: JobFacts, sweep: Sequence[JobFacts]) -> list[JobFacts]:
    """Earlier attempts of the same run among ``sweep``, oldest first."""
    record = facts.record
    stem = name_stem(record.name)
    found = [
        other for other in sweep
        if other.record.job_id != record.job_id and other.record.cluster == record.cluster
        and other.record.user == record.user
        and (name_stem(other.record.name) == stem or other.record.job_id in record.depends_on)
        and _before(record, other.record)
    ]
    return sorted(found, key=lambda o: (o.record.submit_time is None, o.record.submit_time
                                        or datetime.min, o.record.job_id))


def relaunch_change(facts: JobFacts, sweep: Sequence[JobFacts]) -> str | None:
    """How this run differs from its latest earlier attempt that printed a fingerprint."""
    mine = fingerprint_parts(facts)
    if not mine:
        return None
    ended = [o for o in run_attempts(facts, sweep) if o.record.state in TERMINAL_STATES]
    for other in reversed(ended):
        theirs = fingerprint_parts(other)
        if not theirs:
            continue
        order = [*_PARTS, *sorted(set(mine) - set(_PARTS))]
        changed = [p for p in order if p in mine and p in theirs and mine[p] != theirs[p]]
        if not changed:
            return None
        shown = ", ".join(f"{p} {theirs[p]}→{mine[p]}" if p != "config" else "config"
                          for p in changed)
        return f"relaunch of {other.record.job_id} with new {shown}"
    return None


def config_ablation(config: Mapping[str, str], patterns: Sequence[str]) -> str | None:
    """The first set ``key=value`` entry a spike-mitigation pattern matches, else None."""
    off = {k.rsplit(".", 1)[0] for k, v in config.items()
           if k.rsplit(".", 1)[-1] in _SWITCHES and v.lower() in _FALSY and "." in k}
    compiled = [re.compile(p, re.IGNORECASE) for p in patterns]
    for key, value in config.items():
        if value.lower() in _FALSY or any(key.startswith(section + ".") for section in off):
            continue
        entry = f"{key}={value}"
        if any(p.search(entry) for p in compiled):
            return entry
    return None
