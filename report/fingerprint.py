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
from report.settings import compiled

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


def _naive_utc(at: datetime) -> datetime:
    return at.replace(tzinfo=None) - (at.utcoffset() or timedelta())


def _order(record: SchedulerRecord) -> tuple[datetime, int]:
    """Which of two attempts came first: submitted (or started) earlier, then the lower id."""
    at = record.submit_time or record.start_time or datetime.max
    return _naive_utc(at), int(record.job_id) if record.job_id.isdigit() else 0


def _shown_order(facts: JobFacts) -> tuple[bool, datetime, str]:
    """How attempts are listed: by submit time (unknown last; a naive time read as UTC, so a
    sweep mixing naive and aware times sorts instead of raising), then id."""
    submitted = facts.record.submit_time
    return (submitted is None, _naive_utc(submitted) if submitted else datetime.min,
            facts.record.job_id)


class Attempts:
    """A sweep's jobs indexed once for :func:`run_attempts` and :func:`relaunch_change`.

    Policy (issue 12): each RL job asks for its earlier attempts, and scanning the user's
    jobs for each one was quadratic: 256 RL jobs of one user took 2.1 s to judge, a lab's
    thousands minutes. Here a job's candidates are those of its cluster, user and name stem
    (plus its ``depends_on`` ids), each job's stem, order and fingerprint parts are computed
    once, and a relaunch is looked up among the ended attempts that printed a fingerprint,
    latest first. The answers are those of the scan this replaces."""

    def __init__(self, jobs: Sequence[JobFacts]) -> None:
        self._stems: dict[int, str] = {}
        self._orders: dict[int, tuple[datetime, int]] = {}
        self._parts: dict[int, dict[str, str]] = {}
        self._by_stem: dict[tuple[str, str | None, str], list[JobFacts]] = {}
        self._by_id: dict[tuple[str, str | None, str], list[JobFacts]] = {}
        self._ended: dict[tuple[str, str | None, str], list[JobFacts]] | None = None
        self._firsts: dict[tuple[str, str | None, str], tuple[JobFacts, ...]] | None = None
        self._positions: dict[int, int] = {}
        for position, job in enumerate(jobs):
            record = job.record
            self._positions[id(job)] = position
            stem = self._stems[id(job)] = name_stem(record.name)
            self._orders[id(job)] = _order(record)
            self._by_stem.setdefault((record.cluster, record.user, stem), []).append(job)
            self._by_id.setdefault((record.cluster, record.user, record.job_id), []).append(job)
        self._jobs = jobs  # keeps the ids above meaning these objects

    def job(self, record: SchedulerRecord, job_id: str) -> JobFacts | None:
        """The facts of job ``job_id`` of ``record``'s cluster and user in this sweep (the
        first read), or None."""
        found = self._by_id.get((record.cluster, record.user, job_id))
        return found[0] if found else None

    def parts(self, facts: JobFacts) -> dict[str, str]:
        """``fingerprint_parts(facts)``, computed once per indexed job."""
        found = self._parts.get(id(facts))
        if found is None:
            found = fingerprint_parts(facts)
            if id(facts) in self._orders:  # held by the index: its id names it
                self._parts[id(facts)] = found
        return found

    def _listed(self, facts: JobFacts) -> tuple[tuple[bool, datetime, str], int]:
        """``_shown_order``, ties kept in sweep order (as a stable sort of the sweep kept them)."""
        return _shown_order(facts), self._positions.get(id(facts), -1)

    def _order_of(self, facts: JobFacts) -> tuple[datetime, int]:
        found = self._orders.get(id(facts))
        return found if found is not None else _order(facts.record)

    def _group(self, facts: JobFacts) -> tuple[tuple[str, str | None, str], list[JobFacts]]:
        """Its (cluster, user, name stem) group's key, and the jobs of its cluster and user its
        ``depends_on`` names."""
        record = facts.record
        where = (record.cluster, record.user)
        stem = self._stems.get(id(facts)) or name_stem(record.name)
        named = [o for job_id in record.depends_on for o in self._by_id.get((*where, job_id), ())]
        return (*where, stem), named

    def _candidates(self, facts: JobFacts) -> list[JobFacts]:
        """Same cluster and user, and the same stem or named in ``depends_on``; not itself."""
        key, named = self._group(facts)
        found = {id(o): o for o in (*self._by_stem.get(key, ()), *named)}
        return [o for o in found.values() if o.record.job_id != facts.record.job_id]

    def earlier(self, facts: JobFacts) -> list[JobFacts]:
        """Earlier attempts of the same run, oldest first."""
        mine = self._order_of(facts)
        found = [o for o in self._candidates(facts) if self._order_of(o) < mine]
        return sorted(found, key=self._listed)

    def any_earlier(self, facts: JobFacts) -> bool:
        """Whether ``earlier(facts)`` is not empty, from each group's two first attempts."""
        if self._firsts is None:
            self._firsts = {key: self._two_first(group) for key, group in self._by_stem.items()}
        key, named = self._group(facts)
        mine = self._order_of(facts)
        return any(o.record.job_id != facts.record.job_id and self._order_of(o) < mine
                   for o in (*self._firsts.get(key, ()), *named))

    def _two_first(self, group: Sequence[JobFacts]) -> tuple[JobFacts, ...]:
        """The group's first attempt, and its first of another id (the first may be the job
        asking)."""
        ordered = sorted(group, key=self._order_of)
        first = ordered[0]
        other = next((o for o in ordered if o.record.job_id != first.record.job_id), None)
        return (first,) if other is None else (first, other)

    def latest_ended_printed(self, facts: JobFacts) -> JobFacts | None:
        """The latest earlier attempt that has ended and printed a fingerprint."""
        if self._ended is None:
            self._ended = {}
            for key, group in self._by_stem.items():
                ended = [o for o in group if o.record.state in TERMINAL_STATES and self.parts(o)]
                self._ended[key] = sorted(ended, key=self._listed, reverse=True)
        key, named = self._group(facts)
        mine, job_id = self._order_of(facts), facts.record.job_id
        best: JobFacts | None = None
        for o in self._ended.get(key, ()):  # latest first: the first match is it
            if o.record.job_id != job_id and self._order_of(o) < mine:
                best = o
                break
        for o in named:
            if (o.record.job_id != job_id and self._order_of(o) < mine
                    and o.record.state in TERMINAL_STATES and self.parts(o)
                    and (best is None or self._listed(o) > self._listed(best))):
                best = o
        return best


def run_attempts(facts: JobFacts, sweep: Sequence[JobFacts] | Attempts) -> list[JobFacts]:
    """Earlier attempts of the same run among ``sweep``, oldest first."""
    return (sweep if isinstance(sweep, Attempts) else Attempts(sweep)).earlier(facts)


def relaunch_change(facts: JobFacts, sweep: Sequence[JobFacts] | Attempts) -> str | None:
    """How this run differs from its latest earlier attempt that printed a fingerprint."""
    attempts = sweep if isinstance(sweep, Attempts) else Attempts(sweep)
    mine = attempts.parts(facts)
    if not mine:
        return None
    other = attempts.latest_ended_printed(facts)
    if other is None:
        return None
    theirs = attempts.parts(other)
    order = [*_PARTS, *sorted(set(mine) - set(_PARTS))]
    changed = [p for p in order if p in mine and p in theirs and mine[p] != theirs[p]]
    if not changed:
        return None
    shown = ", ".join(f"{p} {theirs[p]}→{mine[p]}" if p != "config" else "config"
                      for p in changed)
    return f"relaunch of {other.record.job_id} with new {shown}"


def config_ablation(config: Mapping[str, str], patterns: Sequence[str]) -> str | None:
    """The first set ``key=value`` entry a spike-mitigation pattern matches, else None."""
    off = {k.rsplit(".", 1)[0] for k, v in config.items()
           if k.rsplit(".", 1)[-1] in _SWITCHES and v.lower() in _FALSY and "." in k}
    searched = compiled(tuple(patterns))
    for key, value in config.items():
        if value.lower() in _FALSY or any(key.startswith(section + ".") for section in off):
            continue
        entry = f"{key}={value}"
        if any(p.search(entry) for p in searched):
            return entry
    return None
