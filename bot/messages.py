"""Every message the bot sends, built here from models: the one place text meets mrkdwn.

Policy: text that came from a cluster or a user (job names, users, paths, log lines, error
messages, cluster details) is passed through :func:`report.chunks.escape_mrkdwn` (or
``escape_code`` inside code blocks) as it is put into a message, fallback ``text`` included;
the bot writes ``<@U…>`` only through :func:`mention`, which accepts nothing but a user id, and
writes no links. Every builder returns messages within Slack's limits (report.chunks): at most
50 blocks, sections of at most 3,000 characters, about 10,000 characters of block text, and
top-level text of at most 3,900; what had to be cut says so. Builders are pure: no I/O.
Tables show arrays and grids grouped (:mod:`report.grouping`): one row per array with its
tally and worst member, attention members keeping their own rows.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Collection, Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from bot.config import SLACK_USER_ID
from report.cells import one_line
from report.chunks import (
    SlackMessage,
    cut_messages,
    cut_text,
    escape_code,
    escape_mrkdwn,
    escaped_chunks,
    inert,
    kept_messages,
    mrkdwn_object,
    no_backticks,
    public_reason,
    slack_messages,
    summary_lines,
    unformatted,
    unformatted_beside_spans,
)
from report.grouping import group_report, pending_task_counts
from report.models import JobDetail, JobReport, Report
from report.render import job_detail_pieces, read_in_part, render_tables
from report.sweep_summary import NO_JOBS

if TYPE_CHECKING:
    from bot.sweep_result import SweepResult
    from report.changes import Change


Key = tuple[str, str]

esc = escape_code
"""Text from outside the bot, for mrkdwn: escaped, and each backtick a look-alike, so a name
or a log line can neither open a code span nor pair with one of the bot's own (`alpha:42`)."""


def code(text: str) -> str:
    """For inside an inline code span: no backtick left to close it (a hostile path or name),
    and on one line (a span does not cross a line break)."""
    return escape_code(one_line(text))


MAX_RESPONSES = 5
"""Slack accepts at most five posts to one ``response_url``."""
SPARK_POINTS = 20
CANCEL, KEEP, SNOOZE, ACKNOWLEDGE = "cancel_salvage", "keep_running", "snooze", "acknowledge"
DEEP_PROBE = "deep_probe"
"""Runs the deep probe of the alert's job and posts its verdict in the message's thread."""
SHARE = "share_to_channel"
SNOOZE_HOURS = 4.0


def mention(user_id: str | None) -> str:
    """``<@U…>`` for a well-formed Slack user id; anything else is shown as escaped text."""
    if user_id and SLACK_USER_ID.match(user_id):
        return f"<@{user_id}>"
    return inert(user_id or "someone")


def context(text: str, block_id: str | None = None) -> dict[str, Any]:
    """A context block; ``text`` is mrkdwn the caller already escaped."""
    block: dict[str, Any] = {"type": "context",
                             "elements": [mrkdwn_object(cut_text(text, 2000))]}
    if block_id:
        block["block_id"] = block_id
    return block


def section(text: str) -> dict[str, Any]:
    """A section block; ``text`` is mrkdwn the caller already escaped."""
    return {"type": "section", "text": mrkdwn_object(cut_text(text, 3000))}


def text_message(text: str) -> SlackMessage:
    """A plain message of bot-built mrkdwn, cut to the top-level text budget."""
    return SlackMessage(text=cut_text(text))


# -- sweeps ------------------------------------------------------------------------------------


def sweep_header(result: SweepResult, *, age_s: float | None) -> str:
    """Raw (unescaped) ``Jobs at 16:00:05Z · cached 42 s ago · beta UNREACHABLE (...)``, made
    :func:`report.chunks.unformatted`: it heads messages escaped as the bot's mrkdwn
    (``report.chunks``), and a cluster's error text must neither open a code span there nor
    format itself (a key path's ``_``); its only spans are those around such words."""
    stamp = result.report.generated_at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%SZ")
    parts = [f"Jobs at {stamp}"]
    parts.append(f"cached {age_s:.0f} s ago" if age_s is not None
                 else f"live sweep, {result.duration_s:.1f} s")
    for cluster in result.report.clusters:
        if cluster.status == "unreachable":
            parts.append(f"{cluster.name} UNREACHABLE ({public_reason(cluster.detail or '')})")
        elif partial := read_in_part(cluster):  # read in part (JobSets refused or failing)
            parts.append(f"{cluster.name} ok ({public_reason(partial)})")
    inactive = [c.name for c in result.report.clusters if c.status == "inactive"]
    if inactive:  # contract: skipped, and listed as inactive (as the CLI's header)
        parts.append("inactive: " + ", ".join(inactive))
    header = " · ".join(parts)
    if result.degraded:
        header += f"\n⚠️ {result.degraded}"
    return unformatted(header)


def grouped(result: SweepResult, keep: Callable[[JobReport], bool] | None = None,
            *, for_counts: bool = False, grid: bool = True) -> tuple[Report, dict[Key, JobDetail]]:
    """The sweep's jobs (those ``keep`` accepts) as tables show them: arrays and grids grouped.
    ``grid=False`` drops the SFT grid rollups (a change reply, one person's jobs)."""
    report, details = result.report, result.details
    if keep is not None:
        update: dict[str, Any] = {"jobs": [j for j in report.jobs if keep(j)]}
        report = report.model_copy(update=update if grid else {**update, "grid": []})
        details = {k: d for k, d in details.items() if keep(d.report)}
    return group_report(report, details, pending_tasks=pending_task_counts(result.facts),
                        for_counts=for_counts)


def _unread(kept: tuple[int, datetime | None] | None) -> str:
    """What an unreachable cluster's warning adds: the jobs it held when last read."""
    if not kept or not kept[0]:
        return ""
    n, at = kept
    when = f"as of {at:%H:%M}Z" if at else "as last read"
    return f": its {n} job{'s' if n != 1 else ''} {when} not read"


def _trouble(result: SweepResult,
             unread: Mapping[str, tuple[int, datetime | None]] | None = None) -> list[str]:
    """Raw lines for unreachable clusters and a degraded sweep (the parent must say so)."""
    lines = [f"⚠️ {c.name} UNREACHABLE ({public_reason(c.detail or '')})"
             f"{_unread((unread or {}).get(c.name))}"
             if c.status == "unreachable" else
             f"⚠️ {c.name} ok ({public_reason(read_in_part(c) or '')})"
             for c in result.report.clusters
             if c.status == "unreachable" or read_in_part(c)]
    return [*lines, f"⚠️ {result.degraded}"] if result.degraded else lines


def sweep_parent(result: SweepResult, *, period_start: datetime, now: datetime,
                 period_hours: float, sweeps: int,
                 unread: Mapping[str, tuple[int, datetime | None]] | None = None,
                 ) -> SlackMessage:
    """The period's parent message (edited in place by each sweep): a title with the counts,
    one summary line per bucket (an array counted once), unreachable clusters, and the time
    it is as of. ``unread``: each unreachable cluster's jobs as last read and when
    (``bot.cluster_watch``): the warning counts them, and no 'No active or recent jobs.'
    stands beside it as if they had gone."""
    report = result.report
    states = Counter(j.state.value.lower() for j in report.jobs)
    counts = " · ".join(f"{n} {s}" for s, n in states.most_common())
    day = period_start.strftime("%a %d %b %Y") if period_hours >= 24 else (
        period_start.strftime("%a %d %b %Y %H:%MZ"))
    # A cluster not read holds jobs this sweep did not count: the count is of those read.
    read = " read" if any(n for n, _ in (unread or {}).values()) else ""
    title = f"*Jobs · {day} (UTC)* — {len(report.jobs)} jobs{read}" + (
        f": {counts}" if counts else "")
    summary, _ = grouped(result, for_counts=True)
    # Unreachable clusters are told once, by the warning lines of _trouble.
    buckets = summary_lines(summary, unreachable=False)
    if not report.jobs and any(n for n, _ in (unread or {}).values()):
        buckets = [line for line in buckets if line != NO_JOBS]  # not read is not none
    lines = [inert(line) for line in [*buckets, *_trouble(result, unread)]]
    foot = f"_as of {now:%H:%M}Z · sweep {sweeps} of this period · changes in the thread_"
    text = cut_text("\n".join([title, *lines]), 2800) + "\n" + foot
    return SlackMessage(text=text, blocks=[section(text)])


def sweep_thread(result: SweepResult, *, width: int, header: str | None = None,
                 only: Collection[Key] | None = None) -> list[SlackMessage]:
    """Tables (arrays grouped) as thread replies, as many messages as Slack's limits need.

    ``header``: raw text above them; ``only``: just those jobs' rows (a change reply).
    """
    keep = None if only is None else (lambda j: (j.cluster, j.job_id) in only)
    report, details = grouped(result, keep, grid=only is None)
    tables = render_tables(report, details, width=width)
    return slack_messages(tables, header=header or (None if tables else
                                                    "No active or recent jobs."))


LINES_PER_KIND = 8
"""A kind of change (cancelled, finished, ...) with more distinct lines than this in one sweep
is one summary line per cluster: 500 jobs cancelled at once is one event to a reader, not 500
lines over eight replies."""
ROWS_SHOWN = 20
"""A change reply shows at most this many jobs' rows; past it, only the jobs that need a human
(failed, collapsed, stalled), the first ``ROWS_SHOWN`` of them."""
ATTENTION_KINDS = frozenset({"failed", "collapsed", "stalled", "warning"})


_FIGURE = re.compile(r"[-+]?\d+(?:\.\d+)?(?:e[-+]?\d+)?", re.IGNORECASE)
WHYS_SHOWN = 3


def folded_why(whys: Sequence[str]) -> str:
    """The reasons of a folded mass change: whys that differ only in their figures (each
    run's own grad norm, step, count) are one reason, counted whole and shown by its most
    common wording ('150 like grad_norm 1.30 >1.0 ...'), so the counts add up to the jobs;
    the :data:`WHYS_SHOWN` most common, then how many more."""
    kinds: dict[str, Counter[str]] = {}
    for why in whys:
        kinds.setdefault(_FIGURE.sub("#", why), Counter())[why] += 1
    ranked = sorted(kinds.values(), key=lambda c: -c.total())
    if len(ranked) == 1 and len(ranked[0]) == 1:
        return whys[0]
    parts = [f"{c.total()} {'like ' if len(c) > 1 else ''}{c.most_common(1)[0][0]}"
             for c in ranked[:WHYS_SHOWN]]
    rest = sum(c.total() for c in ranked[WHYS_SHOWN:])
    return " · ".join(parts) + (f" · {rest} other" if rest else "")


def change_lines(changes: Sequence[Change]) -> list[str]:
    """One line per (kind, job name) (array tasks merged), a kind with more than
    :data:`LINES_PER_KIND` of them folded into one line per cluster. Raw text (escaped with the
    reply)."""
    from report.changes import merged_lines

    by_kind: dict[str, list[Change]] = {}
    for change in changes:
        by_kind.setdefault(change.kind, []).append(change)
    lines: list[str] = []
    for kind, members in by_kind.items():
        merged = merged_lines(members)
        if len(merged) <= LINES_PER_KIND:
            lines.extend(merged)
            continue
        clusters: dict[str, list[Change]] = {}
        for change in members:
            clusters.setdefault(change.cluster, []).append(change)
        for cluster, group in clusters.items():
            names = list(dict.fromkeys(c.name for c in group))
            shown = ", ".join(names[:3]) + (f" +{len(names) - 3} more" if len(names) > 3 else "")
            why = folded_why([c.why for c in group])
            count = sum(c.tasks for c in group)  # an unsplit array remainder: its tasks
            lines.append(f"• {kind}: {count} jobs on {cluster} ({shown}) — {why}")
    return lines


def change_rows(changes: Sequence[Change]) -> set[Key]:
    """The jobs whose rows a change reply shows: every changed job but a routine one (a chain
    restart: its bullet says all), or past :data:`ROWS_SHOWN`, the first of those that need a
    human."""
    changes = [c for c in changes if not c.routine]
    keys = [(c.cluster, c.job_id) for c in changes]
    if len(keys) <= ROWS_SHOWN:
        return set(keys)
    needing = [(c.cluster, c.job_id) for c in changes if c.kind in ATTENTION_KINDS]
    return set(needing[:ROWS_SHOWN])


OWN_LINE_KINDS = frozenset({"collapsed", "failed", "finished"})
"""Changes a job's own line can tell (its collapse alert, its failure diagnosis, its cleanup)."""


def changes_header(changes: Sequence[Change], extra: Sequence[str], *, since: datetime | None,
                   now: datetime, told: Collection[tuple[str, str]] = (),
                   every_row: bool = False) -> str:
    """Raw text heading a change reply: one line per change (arrays merged, a mass change of
    one kind folded: :func:`change_lines`), then follow-ups. ``told``: the jobs (cluster, id)
    whose own line in ``extra`` tells their change; a bullet saying it again goes.
    ``every_row``: the full tables follow (no note on the rows a mass change shows)."""
    # No last sweep to compare with (a fresh store): its lines tell what was already there.
    heading = (f"Changes since {since:%H:%M}Z" if since else
               "First sweep: what was already there")
    shown = change_rows(changes)
    bullets = [c for c in changes
               if not (c.kind in OWN_LINE_KINDS and (c.cluster, c.job_id) in told)]
    rowed = sum(1 for c in changes if not c.routine)
    rows = [] if every_row or len(shown) == rowed else [
        f"_Rows shown for {len(shown)} of {rowed} changed jobs (those needing a human); "
        "`/jobs` has every table._"]
    # The change lines are outside text only (names, whys): no backtick of theirs may pair
    # with a span of the follow-ups below, no word format itself (escaped with the reply).
    # Under the full tables' own 'as of' the time is said once.
    return "\n".join([heading if every_row else f"{heading} (as of {now:%H:%M}Z)",
                      *map(unformatted, change_lines(bullets)), *extra, *rows])


def _span(text: str) -> str:
    """Raw outside text for one of the bot's inline spans: one line, no backtick to close it."""
    return no_backticks(one_line(text))


def collapse_line(ref: str, user: str | None, *, mapped: bool, by_dm: bool,
                  name: str | None = None) -> str:
    """The day's thread line when a collapse alert went out, raw (escaped with the sweep's
    change reply, where it stands for the run's 'collapsed' bullet: ``name`` is the run's).
    It names the owner (their cluster user) without a mention: the alert itself reached them,
    as a DM or as a channel post that mentions them, and a second ping for one collapse is
    what gets a bot muted."""
    who = f"owner `{_span(user)}`" if user else "owner unknown"
    if by_dm:
        told = f"{who} told by DM"
    elif user and mapped:
        told = f"{who} not reachable by DM, alert in the channel"
    else:
        told = f"{who}" + (" (no Slack id mapped)" if user else "") + ", alert in the channel"
    run = f" {unformatted(one_line(name))}" if name else ""
    return f"🚨 collapse on `{_span(ref)}`{run}, {told}"


def cluster_down_line(name: str, detail: str | None, *, since: datetime) -> str:
    """The day's thread line when a cluster is still unreachable a sweep interval after it
    was first found so (``bot.cluster_watch``), raw (escaped with the sweep's reply)."""
    why = f" (`{_span(public_reason(detail))}`)" if detail else ""
    return (f"⚠️ cluster `{_span(name)}` unreachable since {since:%H:%M}Z{why}: its jobs are "
            "not being read; the parent shows them as last read")


def cluster_back_line(name: str, *, since: datetime, now: datetime) -> str:
    """The day's thread line when a cluster whose outage was told answers again, raw."""
    return (f"✅ cluster `{_span(name)}` answers again (unreachable from {since:%H:%M}Z to "
            f"{now:%H:%M}Z)")


def config_refused_line(reason: str) -> str:
    """The day's thread line when an edit of the config was refused (the sweeps go on with the
    last good one), raw (escaped with the sweep's change reply); the reason may quote the
    file."""
    return f"⚠️ config edit refused, the last good config stays in use: `{_span(reason)}`"


def cancel_line(ref: str, actor: str | None, evidence: str) -> str:
    """The day's thread line when a cancel from a button completed. ``actor``: who pressed,
    as their cluster user (or None: an operator with no cluster user mapped), named without
    a mention: they pressed the button and know."""
    who = f"`{code(actor)}`" if actor else "an operator"
    return cut_text(f"🛑 `{code(ref)}` cancelled by {who}, evidence at `{code(evidence)}`")


def followup_messages(lines: Sequence[str]) -> list[SlackMessage]:
    """Failure and cleanup follow-ups (raw lines from bot.incidents) for the sweep thread."""
    return [text_message(piece) for piece in escaped_chunks("\n".join(lines), 3800) if piece]


# -- slash commands ------------------------------------------------------------------------------


def error_text(message: str) -> str:
    """An ephemeral error line: the message (which may quote the user or a cluster's reason)
    escaped, its outside words unable to format (``report.chunks.unformatted_beside_spans``).
    Its backticks are the bot's own spans (`/job`); the raiser quotes outside text without
    any."""
    return cut_text("⚠️ " + escape_mrkdwn(unformatted_beside_spans(message)))


def jobs_messages(result: SweepResult, *, bucket: str | None, age_s: float | None,
                  width: int, keep: Callable[[JobReport], bool] | None = None,
                  limit: int = MAX_RESPONSES, what: str | None = None) -> list[SlackMessage]:
    """The ``/jobs`` answer: code-block tables (arrays grouped), split to Slack's limits, at
    most ``limit`` messages. ``keep`` filters the rows (else ``bucket``) and drops the grid
    rollup, as does a bucket other than SFT; ``what`` names the filter in the "No … jobs."
    answer."""
    report, details = grouped(result, keep or ((lambda j: j.bucket == bucket) if bucket else None),
                              grid=keep is None and bucket in (None, "sft"))
    header = sweep_header(result, age_s=age_s)
    tables = render_tables(report, details, width=width)
    if not tables:
        label = what or bucket
        none = f"No {label} jobs." if label else "No active or recent jobs."
        return [text_message(escape_mrkdwn(f"{header}\n{none}"))]
    return kept_messages(tables, max(1, limit), header=header,
                         hint=cut_hint(narrowed=bool(bucket or what)))


def cut_hint(*, narrowed: bool) -> str:
    """What a cut ``/jobs`` answer suggests: one bucket when the whole report was asked for;
    an answer already narrowed (a bucket, ``mine``, a user, a cluster) only points at the DM,
    never at the command the user just typed."""
    whole = "The whole answer is in your DM with the bot, as a file"
    return f"{whole}." if narrowed else f"{whole}; or ask for one bucket, e.g. `/jobs rl`."


def job_messages(detail: JobDetail, *, header: str, width: int, note: str) -> list[SlackMessage]:
    """The ``/job`` answer: header, tables split between rows, text between lines, a note."""
    messages = slack_messages(job_detail_pieces(detail, width=width), header=header)
    ref = esc(f"{detail.report.cluster}:{detail.report.job_id}: {detail.report.verdict}")
    messages = [SlackMessage(text=cut_text(ref, 150), blocks=m.blocks) for m in messages]
    messages = cut_messages(messages, MAX_RESPONSES,
                            hint="The whole record is in your DM with the bot, as a file.")
    last = messages[-1]
    blocks = [*last.blocks, context(inert(note))]
    if len(blocks) > 50:
        return messages
    return [*messages[:-1], SlackMessage(text=last.text, blocks=blocks, cut=last.cut)]


def shared_job_messages(detail: JobDetail, *, header: str, sharer: str,
                        width: int) -> list[SlackMessage]:
    """A ``/job`` answer shared to a channel ("Share to channel"), saying who shared it."""
    by = context(f"Shared by {mention(sharer)}")
    messages = slack_messages(job_detail_pieces(detail, width=width), header=header,
                              max_blocks=49)
    ref = esc(f"{detail.report.cluster}:{detail.report.job_id} {one_line(detail.report.name)}")
    messages = cut_messages([SlackMessage(text=cut_text(ref, 150), blocks=m.blocks)
                             for m in messages], MAX_RESPONSES,
                            hint="`/job` shows the whole record.")
    first = messages[0]
    return [SlackMessage(text=first.text, blocks=[by, *first.blocks], cut=first.cut),
            *messages[1:]]


def share_button(detail: JobDetail) -> dict[str, Any]:
    """The actions block with "Share to channel"; the value is a job ref looked up again."""
    ref = f"{detail.report.cluster}:{detail.report.job_id}"
    return {"type": "actions", "block_id": "share_actions",
            "elements": [button(SHARE, "Share to channel", ref[:2000])]}


# -- job-end DMs ----------------------------------------------------------------------------------


# -- collapse alerts ------------------------------------------------------------------------------


def button(action_id: str, text: str, value: str, **extra: Any) -> dict[str, Any]:
    return {"type": "button", "action_id": action_id, "value": value,
            "text": {"type": "plain_text", "text": text}, **extra}
