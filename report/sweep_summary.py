"""The sweep's summary lines, and what Slack may be told of an error.

Policy: :func:`summary_lines` gives one line per non-empty bucket for the sweep's parent
message (its verdicts in reading order, the jobs that need a human named, a long name
shortened in its middle and kept distinct), then the unreachable and inactive clusters.
:func:`public_reason` is the one way an error's own text
reaches Slack: a team channel (or a DM) is told what failed and a short reason, never a
host:port, a credentials file's path, a URL with its password or a traceback (the full text
goes to the bot's log). Text out, no Slack SDK here (the messages are :mod:`report.chunks`').
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable, Sequence

from report.cells import one_line
from report.holds import is_queued_resume
from report.linebreaks import shorten_middle
from report.models import BUCKET_ORDER, JobReport, Report
from report.tables import BUCKET_TITLES, is_buffering

# Verdict wording for the summary, in reading order; the named ones need a human.
_VERDICT_WORDS: tuple[tuple[str, str], ...] = (
    ("collapse", "COLLAPSE"), ("failed", "FAILED"), ("stalled", "STALLED"),
    ("warning", "warning"), ("unknown", "unknown"), ("restarting", "restart"),
    ("buffering", "filling buffer"), ("queued", "resume queued"), ("healthy", "healthy"),
    ("done", "done"),
)
_NEEDS_HUMAN = frozenset({"collapse", "failed", "stalled", "warning", "unknown"})
_ACTION_WORDS = {
    "cleanup": "to clean up", "consolidate_manually": "to consolidate by hand",
    "deep_probe": "to deep-probe", "diagnose": "to diagnose",
}
_NAMES_SHOWN = 3
SUMMARY_NAME_CELLS = 40
"""The widest a job name is shown in a summary line (cells; its ``cluster/`` not counted)."""


SUMMARY_NAME_STEP = 8
"""Cells more a shortened name keeps while it reads like another's."""
Shown = Callable[[JobReport], str]
"""How a job is named in the summary lines (:func:`_naming`)."""


def short_names(names: Iterable[str], cells: int = SUMMARY_NAME_CELLS) -> dict[str, str]:
    """Each of ``names`` as shown in a summary line: at most ``cells`` wide, its middle taken
    out (``report.linebreaks.shorten_middle``); names that would read alike (one recipe,
    runs differing mid-name) keep :data:`SUMMARY_NAME_STEP` cells more each round until
    they differ, or are whole."""
    shown = {name: shorten_middle(name, cells) for name in set(names)}
    while True:
        seen = Counter(shown.values())
        alike = [name for name, short in shown.items() if seen[short] > 1 and short != name]
        if not alike:
            return shown
        cells += SUMMARY_NAME_STEP
        for name in alike:
            shown[name] = shorten_middle(name, cells)


def _naming(jobs: Sequence[JobReport]) -> Shown:
    """How each job is named: on one line, shortened (:func:`short_names`, distinct over the
    whole summary), and as ``cluster/name`` when two clusters report (two may run jobs of one
    name: the cluster as the table rows show it); the cluster is never cut."""
    multi_cluster = len({j.cluster for j in jobs}) > 1
    short = short_names(one_line(j.name) for j in jobs)
    if multi_cluster:
        return lambda job: f"{one_line(job.cluster)}/{short[one_line(job.name)]}"
    return lambda job: short[one_line(job.name)]


def _names(jobs: Sequence[JobReport], shown: Shown) -> str:
    names = [shown(job) for job in jobs[:_NAMES_SHOWN]]
    extra = len(jobs) - len(names)
    return ", ".join(names) + (f" +{extra} more" if extra else "")


def _bucket_line(title: str, jobs: Sequence[JobReport], shown: Shown) -> str:
    verdicts: Counter[str] = Counter(
        "queued" if is_queued_resume(j) else "buffering" if is_buffering(j) else j.verdict
        for j in jobs)
    parts = [f"{len(jobs)} job{'s' if len(jobs) != 1 else ''}"]
    for verdict, word in _VERDICT_WORDS:
        if verdicts[verdict]:
            part = f"{verdicts[verdict]} {word}"
            if verdict in _NEEDS_HUMAN:
                part += f" ({_names([j for j in jobs if j.verdict == verdict], shown)})"
            parts.append(part)
    for action, words in _ACTION_WORDS.items():
        todo = [j for j in jobs if j.recommendation and j.recommendation.action == action]
        if todo:
            parts.append(f"{len(todo)} {words} ({_names(todo, shown)})")
    return f"{title}: " + " · ".join(parts)


# -- what Slack may be told of an error -----------------------------------------------------
# Slack text goes to a team channel (or a DM): an error's own text may carry internal detail
# (a host:port, a credentials file's path, a URL with its password, a traceback). Slack is
# told what failed and a short reason; the full text goes to the bot's log.

_TRACEBACK = re.compile(r"Traceback \(most recent call last\)")
_URL = re.compile(r"\b([a-z][a-z0-9+.-]*)://\S+", re.IGNORECASE)
_PATH = re.compile(r"(?<![\w.:/])(?:~|\.{1,2})?/[^\s'\",;:()\[\]]+")
_HOST_PORT = re.compile(r"\[[0-9a-f:.]+\]:\d{1,5}\b|"
                        r"\b(?=[\w.-]*[a-z])[\w-]+(?:\.[\w-]+)*:\d{1,5}\b", re.IGNORECASE)
_IPV4 = re.compile(r"\b\d{1,3}(?:\.\d{1,3}){3}(?::\d{1,5})?\b")
_ADDRESS_TUPLE = re.compile(r"\(?'?\[address\]'?,\s*\d{1,5}(?:,\s*\d+)*\)?")
_IPV6 = re.compile(r"(?<![\w:])[0-9a-f]*::[0-9a-f:]*(?![\w:])", re.IGNORECASE)
_FQDN = re.compile(r"\b[a-z][a-z0-9-]*(?:\.[a-z0-9-]+){2,}\b", re.IGNORECASE)
PUBLIC_REASON_CHARS = 200
"""The longest reason shown in Slack (one line)."""
_READ_CHARS = 4 * PUBLIC_REASON_CHARS
"""How much of the first line the patterns read: the address patterns backtrack on long runs
of host-name-like text (16 KB of ``a-`` took 7.8 s, growing with its square), and what they
replace shrinks, so a few times the shown length is read, cut back to whole words."""


def public_reason(text: str) -> str:
    """``text`` (an error's message) as Slack may show it: its first line before any
    traceback, URLs, file paths, addresses and host names replaced by what they are, at most
    :data:`PUBLIC_REASON_CHARS` characters."""
    text = _TRACEBACK.split(text, maxsplit=1)[0]
    line = next((part.strip() for part in text.splitlines() if part.strip()), "")
    if len(line) > _READ_CHARS:
        # whole words only: an address split by the cut would escape its pattern in part
        line = " ".join([*line[:_READ_CHARS + 1].split()[:-1], "…"])
    line = _URL.sub(lambda m: f"[{m.group(1).lower()} URL]", line)
    line = _PATH.sub("[path]", line)
    line = _HOST_PORT.sub("[address]", line)
    line = _IPV4.sub("[address]", line)
    line = _IPV6.sub("[address]", line)
    line = _FQDN.sub("[host]", line)
    line = _ADDRESS_TUPLE.sub("[address]", line)  # asyncio's ('127.0.0.1', 6379)
    line = line.rstrip(" :(")
    if len(line) > PUBLIC_REASON_CHARS:
        line = line[:PUBLIC_REASON_CHARS - 1].rstrip() + "…"
    return line or "no reason given"


NO_JOBS = "No active or recent jobs."
"""The summary line of a sweep that reported no job."""


def summary_lines(report: Report, *, unreachable: bool = True) -> list[str]:
    """One line per non-empty bucket for the sweep's parent message, plus unreachable and
    inactive clusters (``unreachable=False``: a caller that warns of them itself).
    Jobs are named ``cluster/name`` when more than one cluster reports jobs (as the table rows),
    a long name shortened in its middle (:func:`short_names`)."""
    shown = _naming(report.jobs)
    lines = [
        _bucket_line(BUCKET_TITLES[bucket], [j for j in report.jobs if j.bucket == bucket],
                     shown)
        for bucket in BUCKET_ORDER
        if any(j.bucket == bucket for j in report.jobs)
    ] or [NO_JOBS]
    down = [c for c in report.clusters if c.status == "unreachable"]
    if down and unreachable:
        lines.append("Unreachable: " + ", ".join(
            f"{c.name} ({public_reason(c.detail)})" if c.detail else c.name for c in down))
    off = [c.name for c in report.clusters if c.status == "inactive"]
    if off:  # contract: an inactive cluster is skipped and listed as inactive
        lines.append("Inactive: " + ", ".join(off))
    return lines
