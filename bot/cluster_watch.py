"""Which clusters the digest could not read, since when, and what the day's thread says of it.

Policy: a cluster unreachable at one sweep (an SSH blip, a login node restarting) is no news:
its jobs are kept as last read (``bot.digest.seen_now``), the parent says it was not read and
how many jobs it held when last read (not "0 jobs", as if they had gone), and the thread says
nothing, either when it fails or when it answers again. A cluster still unreachable one
sweep interval after the first failed read (the next scheduled sweep; a retry a minute later
is not it) is told once in the thread, a line with no table: its runs are not being watched.
Its return is told once, only if its outage was. State rides in the digest's ``seen``
document (``read_at``: each cluster's last good read; ``down``: when each unreadable cluster
was first found so, and whether that was told). :func:`seen_now` is what the next sweep
compares with, the jobs of a cluster not read kept as last read. Pure: the digest reads and
writes the document.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from bot.messages import cluster_back_line, cluster_down_line
from probes.models import ACTIVE_STATES
from report.changes import (
    Key,
    Snapshot,
    snapshots,
    through_requeue,
    through_restarts,
    through_untold,
)
from report.models import Report
from report.render import read_in_part


@dataclass(frozen=True)
class Watch:
    """One sweep's view of its clusters' reads."""

    read_at: dict[str, str] = field(default_factory=dict)
    """Cluster -> ISO time of its last good read (this sweep's for those read now)."""
    down: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Unreadable cluster -> ``{"since": ISO, "told": bool}``."""
    lines: list[str] = field(default_factory=list)
    """Raw thread lines of this sweep (a long outage told, a told one over)."""
    unread: dict[str, tuple[int, datetime | None]] = field(default_factory=dict)
    """Unreachable cluster -> (jobs kept from its last read, when that was) for the parent."""


def _when(text: Any) -> datetime | None:
    """An aware ISO time, else None (a document written by hand, or cut)."""
    try:
        when = datetime.fromisoformat(text) if isinstance(text, str) else None
    except ValueError:
        return None
    return when if when is not None and when.tzinfo is not None else None


def watch(seen: Any, report: Report, previous: Mapping[Key, Snapshot] | None, now: datetime,
          *, interval_s: float) -> Watch:
    """This sweep's :class:`Watch`, from the last ``seen`` document and this ``report``."""
    doc: dict[str, Any] = seen if isinstance(seen, dict) else {}
    read_before: dict[str, Any] = doc.get("read_at") or {}
    down_before: dict[str, Any] = doc.get("down") or {}
    if not isinstance(read_before, dict) or not isinstance(down_before, dict):
        read_before, down_before = {}, {}  # a document of another shape: start afresh
    out = Watch()
    for cluster in report.clusters:
        name = cluster.name
        last = read_before.get(name)
        was = down_before.get(name) if isinstance(down_before.get(name), dict) else None
        since = _when(was.get("since")) if was else None
        if cluster.status == "ok":
            out.read_at[name] = now.isoformat()
            if was and was.get("told") and since is not None:
                out.lines.append(cluster_back_line(name, since=since, now=now))
            continue
        if isinstance(last, str):
            out.read_at[name] = last
        if cluster.status != "unreachable":
            continue  # inactive: set so on purpose, and listed as such
        since = since or now
        told = bool(was and was.get("told"))
        if not told and (now - since).total_seconds() >= interval_s:
            out.lines.append(cluster_down_line(name, cluster.detail, since=since))
            told = True
        out.down[name] = {"since": since.isoformat(), "told": told}
        kept = sum(1 for key in (previous or {}) if key[0] == name)
        out.unread[name] = (kept, _when(last))
    return out


def seen_now(previous: Mapping[Key, Snapshot] | None, report: Report,
             restarts: Mapping[Key, int] | None = None) -> dict[Key, Snapshot]:
    """What the next sweep compares with: this sweep's jobs, and the last snapshots of the
    jobs of a cluster this sweep could not read (unreachable, or set inactive): a cluster
    back after a blip has not changed its jobs, so its ended jobs are not told again. So are
    those of the live jobs missing from a cluster read in part (its JobSet list failed: the
    runs it hid are no news when it answers again); an ended one missing there is gone (a
    finished Job deleted), not hidden, and is not carried on. A cluster gone from the config
    is forgotten."""
    before = previous or {}
    # A told trouble read unknown (a log not fetched) or warning is kept: its recovery is
    # told once it reads healthy. A run pending again after it ran is marked requeued, one
    # whose restart count rose since is marked restarting (its episode told once).
    current = {k: through_restarts(before.get(k), through_requeue(
        before.get(k), through_untold(before.get(k), s)))
        for k, s in snapshots(report, restarts).items()}
    unread = {c.name for c in report.clusters if c.status != "ok"}
    partial = {c.name for c in report.clusters if read_in_part(c)}
    kept = {k: s for k, s in before.items() if k not in current and (
        k[0] in unread or (k[0] in partial and s.state in ACTIVE_STATES))}
    return {**kept, **current}
