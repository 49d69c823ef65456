"""Catch-all jobs (consolidate, pretokenize, uploads, image builds, GPU-CI, smoke tests,
probes): one line each, with a guessed type and the one signal that matters.

Policy (seed §Catch-all): no metric table. The Type column is guessed from the job name. The
Note (the row's trend) carries the one signal that matters, from ``LogSummary.outcome``:

- pytest's closing tally (``2 passed``, ``1 failed, 3 passed``) wins over the state word
  ("Completed") and, on a FAILED job, over the generic exit diagnosis: it *is* the diagnosis;
- an upload reads what was pushed (``pushed 6,977 rows → org/dataset``, ``pushing →
  s3://bucket/run``), above "Completed" but below a real failure's diagnosis;
- otherwise the log's own summary line, else its last meaningful line, else the scheduler's
  reason: below a live or failed job's state word, above a COMPLETED one's ("Completed" is
  what the State column says; ``SMOKE TEST PASSED``, ``Avg bus bandwidth: 158.3`` is the
  signal) unless it is a bare word such as ``done.``.

A FAILED job whose log holds no fault (no traceback, OOM, signal) is diagnosed with the log's
failing line (the first failing pytest test, else the last line naming an error, e.g.
BuildKit's ``ERROR: failed to solve``), never the exit code alone: the failed-state rule every
bucket shares (``report.judge``, :func:`report.failure_text.failure_why`).

Terminal COMPLETED/FAILED states are judged by the cross-cutting rules; a live job is
``healthy`` unless a fault says otherwise.
"""

from __future__ import annotations

import re

from probes.logs.excerpt import last_tally_line
from probes.models import JobState
from report.findings import (
    Findings,
    JudgeContext,
    Priority,
    pending_note,
)
from report.trend import shorten

_TYPES: tuple[tuple[str, str], ...] = (
    (r"consolidat", "consolidate"),
    (r"pre-?tok|tokeni[sz]", "pretokenize"),
    (r"upload|push|publish", "upload"),
    (r"gpu[-_]?ci|(?:^|[-_])ci(?:$|[-_])", "gpu-ci"),
    (r"build|image|docker|container", "image build"),
    (r"smoke", "smoke test"),
    (r"grid[-_]?probe|probe|measure|bench|sweep", "probe"),
    (r"convert|export|merge", "convert"),
    (r"download|fetch|mirror", "download"),
)
_DOMAINS: tuple[tuple[str, str], ...] = (
    (r"(?:^|[-_])rl(?:$|[-_])", "RL "), (r"datagen", "datagen-"), (r"sft", "SFT "),
    (r"eval", "eval-"),
)


def type_label(name: str) -> str:
    """Guess the Type column from a job name (``datagen-consolidate``, ``gpu-ci``, ...)."""
    label = next((t for pattern, t in _TYPES if re.search(pattern, name, re.IGNORECASE)), None)
    if label is None:
        return "ad-hoc"
    domain = next((d for pattern, d in _DOMAINS if re.search(pattern, name, re.IGNORECASE)), "")
    return domain + label


def log_note(ctx: JudgeContext) -> str:
    """The one line worth showing from a catch-all job's log: its last tally line (in the kept
    last lines, else the one ``probes.logs.excerpt`` found above them), else its last line."""
    log = ctx.facts.log
    text = log.text if log else ""
    tallied = last_tally_line(text)  # the whole line: "pushing 6,977 rows -> ...", not "977 rows"
    if tallied is not None:
        return shorten(tallied.strip("= "))
    if log is not None and log.tally_line and log.tally_line.strip():
        return shorten(log.tally_line.strip().strip("= "))
    last = next((stripped for line in reversed(text.splitlines()) if (stripped := line.strip())),
                None)
    if last is not None:
        return shorten(last)
    return ctx.facts.record.reason or ""


def judge_other(ctx: JudgeContext, f: Findings) -> None:
    """Label a catch-all job and write its note."""
    f.type_label = type_label(ctx.facts.record.name)
    note = log_note(ctx)
    if ctx.state is JobState.PENDING:
        # In queue admission as any bucket's pending job: the flag goes with the table it is
        # shown in (a held job drops both, a queued resume the flag: report.holds)
        f.flag("buffer-filling")
        f.verdict("buffering")
        f.trend(Priority.BACKGROUND, shorten(pending_note(ctx.facts.record, ctx.now)))
    elif ctx.running and ctx.fetch_ok:
        f.verdict("healthy")
    if note:
        f.notes.append(note)
        f.trend(Priority.BACKGROUND + 1, note)
        if ctx.state is JobState.COMPLETED and len(_WORD.findall(note)) >= 2:
            # The State column says COMPLETED; the note says what came of it (a bare
            # "done." says no more than "Completed").
            f.trend(Priority.BACKGROUND + 3, note)
    _outcome(ctx, f)


_WORD = re.compile(r"[A-Za-z]\w*")


def _outcome(ctx: JudgeContext, f: Findings) -> None:
    outcome = ctx.facts.summary.outcome if ctx.facts.summary else None
    if outcome is None:
        return
    if outcome.pytest_summary:
        f.trend(Priority.TERMINAL + 1, shorten(outcome.pytest_summary))
    if outcome.pushed:
        verb = "pushing" if ctx.running else "pushed"
        what = outcome.pushed if "→" in outcome.pushed else f"→ {outcome.pushed}"
        f.trend(Priority.BACKGROUND + 4, shorten(f"{verb} {what}"))
