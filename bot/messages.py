"""Every message the bot sends, built here from models: the one place text meets mrkdwn.

Policy: text that came from a cluster or a user (job names, users, paths, log lines, error
messages, cluster details) is passed through :func:`report.chunks.escape_mrkdwn` (or
``escape_code`` inside code blocks) as it is put into a message, fallback ``text`` included;
the bot writes ``<@U…>`` only through :func:`mention`, which accepts nothing but a user id, and
writes no links. Every builder returns messages within Slack's limits (report.chunks): at most
50 blocks, sections of at most 3,000 characters, about 10,000 characters of block text, and
top-level text of at most 3,900; what had to be cut says so. Builders are pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC
from typing import TYPE_CHECKING, Any

from bot.config import SLACK_USER_ID
from report.cells import format_value as _fmt
from report.chunks import (
    SlackMessage,
    cut_messages,
    cut_text,
    escape_mrkdwn,
    escaped_chunks,
    slack_messages,
    summary_lines,
)
from report.models import JobDetail
from report.render import job_detail_pieces, render_tables
from report.trend import sparkline

if TYPE_CHECKING:
    from bot.sweep import SweepResult

esc = escape_mrkdwn
MAX_RESPONSES = 5
"""Slack accepts at most five posts to one ``response_url``."""
SPARK_POINTS = 20
CANCEL, KEEP, SNOOZE, ACKNOWLEDGE = "cancel_salvage", "keep_running", "snooze", "acknowledge"
SNOOZE_HOURS = 4.0


def mention(user_id: str | None) -> str:
    """``<@U…>`` for a well-formed Slack user id; anything else is shown as escaped text."""
    if user_id and SLACK_USER_ID.match(user_id):
        return f"<@{user_id}>"
    return esc(user_id or "someone")


def context(text: str, block_id: str | None = None) -> dict[str, Any]:
    """A context block; ``text`` is mrkdwn the caller already escaped."""
    block: dict[str, Any] = {"type": "context",
                             "elements": [{"type": "mrkdwn", "text": cut_text(text, 2000)}]}
    if block_id:
        block["block_id"] = block_id
    return block


def section(text: str) -> dict[str, Any]:
    """A section block; ``text`` is mrkdwn the caller already escaped."""
    return {"type": "section", "text": {"type": "mrkdwn", "text": cut_text(text, 3000)}}


def text_message(text: str) -> SlackMessage:
    """A plain message of bot-built mrkdwn, cut to the top-level text budget."""
    return SlackMessage(text=cut_text(text))


# -- sweeps ------------------------------------------------------------------------------------


def sweep_header(result: SweepResult, *, age_s: float | None) -> str:
    """Raw (unescaped) ``Jobs at 16:00:05Z · cached 42 s ago · beta UNREACHABLE (...)``."""
    stamp = result.report.generated_at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%SZ")
    parts = [f"Jobs at {stamp}"]
    parts.append(f"cached {age_s:.0f} s ago" if age_s is not None
                 else f"live sweep, {result.duration_s:.1f} s")
    for cluster in result.report.clusters:
        if cluster.status == "unreachable":
            parts.append(f"{cluster.name} UNREACHABLE ({cluster.detail or 'no reason given'})")
    header = " · ".join(parts)
    if result.degraded:
        header += f"\n⚠️ {result.degraded}"
    return header


def sweep_parent(result: SweepResult) -> SlackMessage:
    """The channel's parent message: the header and one summary line per bucket."""
    raw = "\n".join([sweep_header(result, age_s=None), *summary_lines(result.report)])
    return text_message(esc(raw))


def sweep_thread(result: SweepResult, *, width: int) -> list[SlackMessage]:
    """The full tables as thread replies (as many messages as Slack's limits need)."""
    return slack_messages(render_tables(result.report, result.details, width=width))


def followup_messages(lines: Sequence[str]) -> list[SlackMessage]:
    """Failure and cleanup follow-ups (raw lines from bot.incidents) for the sweep thread."""
    return [text_message(piece) for piece in escaped_chunks("\n".join(lines), 3800) if piece]


# -- slash commands ------------------------------------------------------------------------------


def error_text(message: str) -> str:
    """An ephemeral error line: the message (which may quote the user) escaped."""
    return cut_text("⚠️ " + esc(message))


def jobs_messages(result: SweepResult, *, bucket: str | None, age_s: float | None,
                  width: int) -> list[SlackMessage]:
    """The ``/jobs`` answer: code-block tables, split to Slack's limits, at most five messages."""
    report, details = result.report, result.details
    if bucket is not None:
        report = report.model_copy(update={"jobs": [j for j in report.jobs if j.bucket == bucket]})
        details = {k: d for k, d in details.items() if d.report.bucket == bucket}
    header = sweep_header(result, age_s=age_s)
    tables = render_tables(report, details, width=width)
    if not tables:
        what = f"No {bucket} jobs." if bucket else "No active or recent jobs."
        return [text_message(esc(f"{header}\n{what}"))]
    return cut_messages(slack_messages(tables, header=header), MAX_RESPONSES,
                        hint="The whole answer is in your DM with the bot, as a file; "
                             "or ask for one bucket, e.g. `/jobs rl`.")


def job_messages(detail: JobDetail, *, header: str, width: int, note: str) -> list[SlackMessage]:
    """The ``/job`` answer: header, tables split between rows, text between lines, a note."""
    messages = slack_messages(job_detail_pieces(detail, width=width), header=header)
    ref = esc(f"{detail.report.cluster}:{detail.report.job_id}: {detail.report.verdict}")
    messages = [SlackMessage(text=cut_text(ref, 150), blocks=m.blocks) for m in messages]
    messages = cut_messages(messages, MAX_RESPONSES,
                            hint="The whole record is in your DM with the bot, as a file.")
    last = messages[-1]
    blocks = [*last.blocks, context(esc(note))]
    if len(blocks) > 50:
        return messages
    return [*messages[:-1], SlackMessage(text=last.text, blocks=blocks, cut=last.cut)]


# -- collapse alerts ------------------------------------------------------------------------------


def evidence_lines(detail: JobDetail) -> list[str]:
    """One line per signal (value vs window), then sparklines of the key metrics (escaped)."""
    lines = []
    for ev in detail.evidence:
        mark = "🔴" if ev.fired else "⚪"
        lines.append(
            f"{mark} `{esc(ev.signal)}` step {ev.step}: {_fmt(ev.value)} vs window mean "
            f"{_fmt(ev.window_mean)} ({len(ev.window)} pts) {sparkline(ev.window, len(ev.window))}"
            f" — {esc(ev.why or '')}"
        )
    for name in ("reward", "entropy", "grad_norm", "log_ratio_abs_mean", "loss"):
        values = [p.values[name] for p in detail.history if name in p.values]
        if len(values) >= 2:
            lines.append(f"`{name}` {sparkline(values, SPARK_POINTS)} last {_fmt(values[-1])}")
    return lines


def collapse_message(detail: JobDetail, *, can_cancel: bool, evidence_path: str | None = None,
                     delivered_for: str | None = None) -> SlackMessage:
    """The collapse alert with its evidence and buttons.

    ``delivered_for``: the owner's Slack id when the DM failed and the alert went to the channel.
    """
    job = detail.report
    ref = esc(f"{job.cluster}:{job.job_id}")
    banked = f"banked checkpoint: step {job.banked_step}" if job.banked_step is not None else (
        "no banked checkpoint found")
    head = (
        f"*Collapse on `{ref}` {esc(job.name)}* (owner {esc(job.user or 'unknown')})\n"
        f"step {job.step if job.step is not None else '—'}, collapse at step "
        f"{detail.collapse_step if detail.collapse_step is not None else '—'}; {banked}"
    )
    why = esc(job.recommendation.why) if job.recommendation else "collapse rule fired"
    body = cut_text("\n".join(evidence_lines(detail)), 2900) or "(no signal evidence recorded)"
    blocks: list[dict[str, Any]] = [section(head), section(body), context(why)]
    if delivered_for is not None:
        blocks.insert(0, context(f"For {mention(delivered_for)}: the direct message to the "
                                 "owner could not be delivered."))
    if evidence_path is not None:
        blocks.append(context(f"Evidence recorded (the job keeps running): "
                              f"`{esc(evidence_path)}`"))
    blocks.append({"type": "actions", "block_id": "collapse_actions",
                   "elements": _buttons(detail, can_cancel=can_cancel)})
    return SlackMessage(text=cut_text(f"Collapse on {ref} {esc(job.name)}", 150), blocks=blocks)


def _button(action_id: str, text: str, value: str, **extra: Any) -> dict[str, Any]:
    return {"type": "button", "action_id": action_id, "value": value,
            "text": {"type": "plain_text", "text": text}, **extra}


def _buttons(detail: JobDetail, *, can_cancel: bool) -> list[dict[str, Any]]:
    # The value names the job so a human reading the payload sees it; it is never authority:
    # a press is checked against the stored episode of the message it came from.
    ref = f"{detail.report.cluster}:{detail.report.job_id}"
    if not can_cancel:
        return [_button(ACKNOWLEDGE, "Acknowledge (recommendation only)", ref)]
    banked = detail.report.banked_step
    confirm = {
        "title": {"type": "plain_text", "text": "Cancel and salvage?"},
        "text": {"type": "mrkdwn", "text": cut_text(
            f"Evidence (log tail, metric window, scheduler record) is saved first, then "
            f"`{esc(ref)}` is cancelled. Banked step: {banked if banked is not None else 'none'}.",
            300, note="…")},
        "confirm": {"type": "plain_text", "text": "Salvage and cancel"},
        "deny": {"type": "plain_text", "text": "Keep it"},
        "style": "danger",
    }
    return [
        _button(CANCEL, "Cancel & salvage", ref, style="danger", confirm=confirm),
        _button(KEEP, "Keep running", ref),
        _button(SNOOZE, f"Snooze {SNOOZE_HOURS:g}h", ref),
    ]


def outcome_blocks(blocks: Sequence[dict[str, Any]], line: str, *,
                   keep_buttons: bool) -> list[dict[str, Any]]:
    """The alert's blocks with the outcome line (escaped mrkdwn) in place of the last one."""
    kept = [b for b in blocks if keep_buttons or b.get("type") != "actions"]
    kept = [b for b in kept if b.get("block_id") != "outcome"][:49]
    return [*kept, context(line, block_id="outcome")]
