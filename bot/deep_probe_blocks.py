"""The deep probe's Slack blocks: the offer, the verdict and its buttons, a row's button.

Policy (``bot.deep_probe``): every piece of cluster text is made inert for mrkdwn
(``report.chunks.inert``; inside a code span, :func:`code`); a verdict's reasons are whole
lines while they fit and the rest is counted, never sliced mid-entity or dropped unsaid; a
KILL verdict on a running job offers ``cancel_salvage`` (with a confirm) where
:func:`bot.alerts.cancel_allowed` says so, else a recommendation with ``acknowledge``.
Pure: details in, block lists out.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bot.alerts import ACKNOWLEDGE, CANCEL, cancel_allowed
from bot.config import Config
from bot.messages import DEEP_PROBE
from probes.ids import scheduler_job
from probes.models import JobState
from report.cells import one_line
from report.chunks import cut_text, inert, mrkdwn_object, strong
from report.chunks import escape_code as esc
from report.models import JobDetail

RUN_TASKS_SHOWN = 4
"""An array run's offer names at most this many of its running tasks."""



def code(text: str) -> str:
    """For inside an inline code span: no backtick to close it, on one line."""
    return esc(one_line(text))


def mrkdwn(text: str) -> str:
    """Cluster text made inert for mrkdwn (CONTRACT §7: ``&``, ``<``, ``>``; each backtick a
    look-alike, so it cannot pair with the bot's own code spans; a word holding ``*`` ``_``
    ``~`` in a code span, so it cannot format itself: ``report.chunks.inert``)."""
    return inert(text)


def _button(action_id: str, text: str, value: str, **extra: Any) -> dict[str, Any]:
    return {"type": "button", "action_id": action_id, "value": value,
            "text": {"type": "plain_text", "text": text}, **extra}


def offer_blocks(detail: JobDetail, tasks: Sequence[str] = (), *,
                 block_id: str = "deep_probe_actions") -> list[dict[str, Any]]:
    """The "new run, deep-probe it" message with its button; ``tasks``: the array run's
    tasks running now (one offer for the run, its button for the first task)."""
    job = detail.report
    ref = f"{job.cluster}:{job.job_id}"
    why = job.recommendation.why if job.recommendation else "new or untested RL run"
    text = (f"*New RL run* `{code(ref)}` {strong(esc(one_line(job.name)))}: don't trust its "
            "row yet.\n"
            f"{mrkdwn(why)}")
    if scheduler_job(job.job_id) != job.job_id:
        shown = ", ".join(code(t) for t in tasks[:RUN_TASKS_SHOWN]) + (
            f" +{len(tasks) - RUN_TASKS_SHOWN} more" if len(tasks) > RUN_TASKS_SHOWN else "")
        run = code(f"{job.cluster}:{scheduler_job(job.job_id)}")
        text += (f"\n{max(len(tasks), 1)} tasks of array `{run}` running ({shown}): offered "
                 "once for the run, its later tasks too; `/job` on another task offers its "
                 "own probe.")
    return [{"type": "section", "text": mrkdwn_object(cut_text(text, 3000))},
            {"type": "actions", "block_id": block_id,
             "elements": [_button(DEEP_PROBE, "Deep-probe", ref)]}]


OFFER_BLOCKS = 49
"""Blocks of a batched offer message: Slack takes 50 (a heading, two a run)."""
OFFER_CHARS = 10_000
"""Text of a batched offer message (Slack's aggregate cap on block text sits near 12k)."""


def offers_blocks(offers: Sequence[tuple[JobDetail, Sequence[str]]]) -> list[list[dict[str, Any]]]:
    """One destination's offers of a sweep (run, its array's running tasks) as few messages'
    blocks as Slack's limits allow: a heading, then each run's offer and button, the button's
    block id numbered (unique in the message, which Slack requires)."""
    messages: list[list[dict[str, Any]]] = []
    used = 0
    for n, (detail, tasks) in enumerate(offers):
        # Numbered, not named by the run: unique, and within Slack's 255 characters whatever
        # the cluster's name (a press is bound by the button's value, not its block).
        blocks = offer_blocks(detail, tasks, block_id=f"deep_probe_actions:{n}")
        size = len(blocks[0]["text"]["text"])
        if not messages or len(messages[-1]) + 2 > OFFER_BLOCKS or used + size > OFFER_CHARS:
            messages.append([])
            used = 0
        messages[-1].extend(blocks)
        used += size
    heading = (f"*{len(offers)} new RL runs*: don't trust their rows before a deep probe; "
               "each button probes its own run.")
    return [[{"type": "section", "text": mrkdwn_object(
                heading + (f" ({n}/{len(messages)})" if len(messages) > 1 else ""))}, *blocks]
            for n, blocks in enumerate(messages, 1)]


REASONS_CHARS = 2900
"""A verdict's reasons section (a section holds 3,000 characters)."""
REASON_CHARS = 600
"""One reason's line at most: a longer one is cut, saying so."""


def _reason_lines(reasons: Sequence[str], ref: str) -> str:
    """Each reason on its line, escaped, whole reasons while they fit; what did not fit is
    counted and pointed at ``jobtables probe``, never sliced mid-entity or dropped unsaid."""
    lines: list[str] = []
    used = 0
    for index, reason in enumerate(reasons):
        line = cut_text(f"• {mrkdwn(reason)}", REASON_CHARS)
        if used + len(line) + 1 > REASONS_CHARS - 120:
            lines.append(f"… {len(reasons) - index} more reason(s) cut: `jobtables probe "
                         f"{code(ref)}` prints them all.")
            break
        lines.append(line)
        used += len(line) + 1
    return "\n".join(lines)


def verdict_blocks(detail: JobDetail, config: Config, *,
                   can_cancel: bool | None = None) -> list[dict[str, Any]]:
    """The verdict, its quoted reasons, and (KILL) cancel-and-salvage or a recommendation.

    ``can_cancel``: whether Cancel is offered (default: :func:`bot.alerts.cancel_allowed`)."""
    job = detail.report
    probe = job.deep_probe
    if probe is None:
        return []
    ref = f"{job.cluster}:{job.job_id}"
    read = probe.read
    head = (f"*Deep probe of* `{code(ref)}` {strong(esc(one_line(job.name)))}: "
            f"*{probe.verdict}*\n"
            f"read: {read.get('log_steps', 0)} logged steps, "
            f"{sum(d.get('samples', 0) for d in read.get('dumps', []))} rollout samples, "
            f"{read.get('trials', {}).get('sampled', 0)} trials")
    body = _reason_lines(probe.reasons, ref)
    blocks: list[dict[str, Any]] = [
        {"type": "section", "text": mrkdwn_object(cut_text(head, 3000))},
        {"type": "section", "text": mrkdwn_object(body or "(no reasons)")},
    ]
    if probe.verdict == "KILL" and job.state is JobState.RUNNING:
        if cancel_allowed(detail, config) if can_cancel is None else can_cancel:
            confirm = {
                "title": {"type": "plain_text", "text": "Cancel and salvage?"},
                "text": mrkdwn_object((
                    f"The deep probe says KILL. Evidence is saved first, then `{code(ref)}` is "
                    "cancelled.")[:300]),
                "confirm": {"type": "plain_text", "text": "Salvage and cancel"},
                "deny": {"type": "plain_text", "text": "Keep it"}, "style": "danger",
            }
            elements = [_button(CANCEL, "Cancel & salvage", ref, style="danger",
                                confirm=confirm)]
        else:
            blocks.append({"type": "context", "elements": [mrkdwn_object(
                           "no-kill: this is a recommendation; the job keeps running.")]})
            elements = [_button(ACKNOWLEDGE, "Acknowledge (recommendation only)", ref)]
        blocks.append({"type": "actions", "block_id": "deep_probe_verdict",
                       "elements": elements})
    return blocks


def _summary(detail: JobDetail) -> str:
    job = detail.report
    if job.deep_probe is None:
        return f"Deep-probe {job.cluster}:{job.job_id}?"
    return f"Deep probe of {job.cluster}:{job.job_id}: {job.deep_probe.verdict}"


def row_actions(detail: JobDetail) -> list[dict[str, Any]]:
    """The Deep-probe button under a ``deep-probe`` row (``/job``); nothing for other rows."""
    job = detail.report
    if "deep-probe" not in job.flags or job.state is not JobState.RUNNING:
        return []
    return [{"type": "actions", "block_id": "deep_probe_row",
             "elements": [_button(DEEP_PROBE, "Deep-probe", f"{job.cluster}:{job.job_id}")]}]


def offers_cancel(blocks: Sequence[dict[str, Any]]) -> bool:
    """Whether a message's buttons include ``cancel_salvage``."""
    return any(element.get("action_id") == CANCEL for block in blocks
               if block.get("type") == "actions" for element in block.get("elements", []))


def _has_buttons(blocks: list[dict[str, Any]]) -> bool:
    return any(block.get("type") == "actions" for block in blocks)
