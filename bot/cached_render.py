"""The CPU stages of answering from a cached sweep, as plain functions of picklable arguments.

Policy: these run in the bot's worker process for a big sweep and in a thread for a small one
(:mod:`bot.offload`); the same function either way, so both give the same answer. Their input
is the sweep cache's JSON text (``bot.store.encode_sweep``), never the parent's objects: the
parent sends a string (no pickling of 5,000 models) and gets back what it will send to Slack
(tables of rows, one job's detail, a small head), so a 5,000-job sweep is decoded only in the
worker. ``/jobs`` rows are grouped as :func:`bot.messages.grouped` does, with the pending
array-task counts the live sweep's facts gave (the cache keeps no facts; ``bot.cached`` keeps
the counts beside it), and :func:`jobs_replies` ends the answer as
:func:`bot.messages.jobs_messages` does, given tables rendered once per sweep and query.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

from bot.commands import JobsQuery, job_filter
from bot.config import Config
from bot.messages import cut_hint, text_message
from bot.store import decode_sweep, encode_sweep
from bot.sweep_result import SweepResult
from report.chunks import SlackMessage, escape_mrkdwn, kept_messages
from report.grouping import group_report
from report.models import JobDetail, JobReport, Report
from report.render import render_tables, render_text
from report.tables import RenderedTable

Key = tuple[str, str]
T = TypeVar("T")



@dataclass(frozen=True)
class View:
    """Which rows a ``/jobs`` answer shows, and how wide: ``query`` as ``invoker`` asked it,
    people matched through ``config``'s owners."""

    query: JobsQuery
    invoker: str
    config: Config
    width: int

    @property
    def key(self) -> tuple[object, ...]:
        """What decides the rendering (the config is compared by identity, by the caller)."""
        q = self.query
        return (q.bucket, q.mine, q.slack_user, q.cluster_user, q.cluster,
                self.invoker if q.mine else None, self.width)


@dataclass(frozen=True)
class Rendered:
    """A ``/jobs`` answer's tables, rendered once per sweep and query."""

    tables: list[RenderedTable]


def head(result: SweepResult) -> SweepResult:
    """The sweep without its jobs: what a header (``bot.messages.sweep_header``) reads."""
    return SweepResult(report=result.report.model_copy(update={"jobs": [], "grid": []}),
                       details={}, facts=(), started_at=result.started_at,
                       duration_s=result.duration_s, degraded=result.degraded)


def encode(result: SweepResult) -> str:
    """The cache's JSON text of a sweep (its facts are not in it)."""
    return encode_sweep(result)


def head_of(payload: str) -> SweepResult:
    """The head of a cached sweep, without validating its 5,000 jobs."""
    data = json.loads(payload)
    report = Report.model_validate({**data["report"], "jobs": [], "grid": []})
    return SweepResult(report=report, details={}, facts=(),
                       started_at=datetime.fromisoformat(data["started_at"]),
                       duration_s=float(data["duration_s"]), degraded=data.get("degraded"))


def selection(view: View) -> tuple[Callable[[JobReport], bool] | None, bool]:
    """(which rows, keep the SFT grid) for ``view``, as ``bot.slash_answers.answer_jobs`` picks
    them."""
    query = view.query
    keep = job_filter(query, view.invoker, view.config) if query.filtered else None
    bucket = query.bucket
    # The SFT grid rollup belongs to the SFT bucket: not under ``/jobs rl``, nor one person's.
    grid = keep is None and bucket in (None, "sft")
    return keep or ((lambda j: j.bucket == bucket) if bucket else None), grid


def grouped_rows(result: SweepResult, keep: Callable[[JobReport], bool] | None, *,
                 grid: bool, pending: Mapping[Key, int]) -> tuple[Report, dict[Key, JobDetail]]:
    """``bot.messages.grouped`` with the pending task counts given (a cached sweep has no
    facts to count them from)."""
    report, details = result.report, result.details
    if keep is not None:
        update = {"jobs": [j for j in report.jobs if keep(j)]}
        report = report.model_copy(update=update if grid else {**update, "grid": []})
        details = {k: d for k, d in details.items() if keep(d.report)}
    return group_report(report, details, pending_tasks=pending)


def render_view(payload: str, pending: Mapping[Key, int], view: View) -> Rendered:
    """The tables of the ``/jobs`` answer ``view`` from a cached sweep."""
    keep, grid = selection(view)
    report, details = grouped_rows(decode_sweep(payload), keep, grid=grid, pending=pending)
    return Rendered(tables=render_tables(report, details, width=view.width))


def render_view_text(payload: str, pending: Mapping[Key, int], view: View) -> str:
    """The whole ``/jobs`` answer as text (the DM file when the messages were cut)."""
    keep, grid = selection(view)
    report, details = grouped_rows(decode_sweep(payload), keep, grid=grid, pending=pending)
    return render_text(report, details, width=view.width)


def find_job(payload: str, cluster: str | None, job_id: str) -> JobDetail:
    """One job of a cached sweep (``SweepResult.find``'s errors when it is not there)."""
    return decode_sweep(payload).find(cluster, job_id)


def on_payload(fn: Callable[..., T], payload: str, *args: Any) -> T:
    """``fn(sweep, *args)`` on the cached sweep ``payload`` decoded here (in the worker)."""
    return fn(decode_sweep(payload), *args)


def jobs_replies(tables: Sequence[RenderedTable], *, header: str, bucket: str | None,
                 limit: int, what: str | None) -> list[SlackMessage]:
    """The ``/jobs`` messages from rendered tables (``bot.messages.jobs_messages``'s end)."""
    if not tables:
        label = what or bucket
        none = f"No {label} jobs." if label else "No active or recent jobs."
        return [text_message(escape_mrkdwn(f"{header}\n{none}"))]
    return kept_messages(tables, max(1, limit), header=header,
                         hint=cut_hint(narrowed=bool(bucket or what)))


__all__ = ["Rendered", "View", "encode", "find_job", "head", "head_of", "jobs_replies",
           "on_payload", "render_view", "render_view_text"]
