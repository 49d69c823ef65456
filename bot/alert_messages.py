"""The messages about one job the bot raises on its own: collapse alerts and job-end DMs.

Policy: as in :mod:`bot.messages` (whose builders these use), text from a cluster or a user is
escaped as it is put in, mentions go through :func:`bot.messages.mention`, and every message
stays within Slack's limits. A collapse alert carries its evidence and the buttons a press
acts on (cancel only for who may cancel); several collapses of one sweep are batched, each job
keeping its own buttons; a job-end DM says how the job ended once. What a pressed button
leaves in the message is :func:`outcome_blocks`. Builders are pure: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from bot.episodes import restart_of
from bot.messages import (
    ACKNOWLEDGE,
    CANCEL,
    DEEP_PROBE,
    KEEP,
    SNOOZE,
    SNOOZE_HOURS,
    SPARK_POINTS,
    button,
    code,
    context,
    esc,
    mention,
    section,
)
from probes.models import ACTIVE_STATES
from report.cells import format_value as _fmt
from report.cells import one_line
from report.chunks import (
    SlackMessage,
    cut_text,
    escape_code,
    escaped_chunks,
    inert,
    mrkdwn_object,
    strong,
)
from report.findings import fault_words
from report.models import JobDetail
from report.trend import shorten, sparkline

if TYPE_CHECKING:
    from report.changes import Change


def _first_fault(detail: JobDetail) -> str | None:
    return next((f for f in detail.faults if not f.startswith("time-limit")), None)


def _said(fault: str | None) -> set[str]:
    """The Trend cells that only repeat ``fault`` (``kind: line``): the judge's Trend is the
    fault in its own words (report.findings.fault_words: a c10 line head left out, srun's line
    reordered), cut to the cell (report.trend.shorten); quoted under the whole fault, it
    would say the same thing twice."""
    if not fault:
        return set()
    kind, _, line = fault.partition(": ")
    worded = f"{kind}: {fault_words(line)}"
    return {fault, shorten(fault), worded, shorten(worded)}


def _code(text: str, limit: int = 1500) -> str:
    pieces = escaped_chunks(text, limit, escape_code)
    return f"```\n{pieces[0]}{' …' if len(pieces) > 1 else ''}\n```"


OTHER_FAULTS_SHOWN = 3
"""Other faults of an array's tasks quoted in its one job-end DM (the rest are counted)."""


def fault_kinds(details: Sequence[JobDetail]) -> list[tuple[str, list[str]]]:
    """The tasks' first real faults, alike ones together (numbers blanked: ``rank 3`` and
    ``rank 5`` are one fault): ``(the first task's fault, the job ids)`` in order of first
    appearance; a task with no fault is its own kind (``""``)."""
    kinds: dict[str, tuple[str, list[str]]] = {}
    for d in details:
        fault = _first_fault(d) or ""
        key = re.sub(r"\d+", "#", fault)[:300]
        kinds.setdefault(key, (fault, []))[1].append(d.report.job_id)
    return list(kinds.values())


NOTIFY_FOOTER = "_Turn these off with `/jobs notify off`._"
"""The last line of every job-end DM (said once in a DM telling several jobs)."""



DM_TEXT_MAX = 3900
"""A DM's top-level text at most (Slack's readable bound, as every message here)."""


def job_end_dms(texts: Sequence[str]) -> list[str]:
    """One owner's job-end DMs of a sweep (:func:`job_end_dm` texts) as few messages as
    Slack's limit allows: one ping per sweep, not one per job; each job's text whole, and
    the way to turn them off said once, at the end of each message."""
    bodies = [t.removesuffix("\n" + NOTIFY_FOOTER) for t in texts]
    messages: list[list[str]] = []
    for body in bodies:
        if messages and len("\n\n".join([*messages[-1], body])) + len(NOTIFY_FOOTER) + 1 \
                <= DM_TEXT_MAX:
            messages[-1].append(body)
        else:
            messages.append([body])
    return [cut_text("\n\n".join(group) + "\n" + NOTIFY_FOOTER, DM_TEXT_MAX)
            for group in messages]


def job_end_dm(change: Change, detail: JobDetail, count: int = 1, *,
               others: Sequence[tuple[str, list[str]]] = ()) -> SlackMessage:
    """The owner's DM for a job that failed, completed or stalled (``count``: the array's
    tasks told in it; ``others``: the faults of those that failed otherwise than ``detail``,
    with their ids, from :func:`fault_kinds`)."""
    job = detail.report
    many = f" (×{count} tasks)" if count > 1 else ""
    head = f"{strong(esc(one_line(job.name)))} `{code(f'{job.cluster}:{job.job_id}')}`{many}"
    rec = job.recommendation
    advice = (f"*Recommendation:* {esc(rec.action)} — {inert(rec.why)}"
              if rec and rec.action != "none" else "")
    if change.kind == "failed":
        fault = _first_fault(detail)
        # A live row judged failed (a Kubernetes silent wedge) has not ended on the scheduler.
        lines = [f"❌ {head} failed (the scheduler still says {esc(job.state.value)})."
                 if job.state in ACTIVE_STATES else f"❌ {head} ended {esc(job.state.value)}."]
        if fault:
            lines += ["First real fault:", _code(fault)]
        for other, ids in others[:OTHER_FAULTS_SHOWN]:
            shown = ", ".join(ids[:3]) + (f" +{len(ids) - 3}" if len(ids) > 3 else "")
            lines += [f"Failed otherwise ×{len(ids)} (`{code(shown)}`):",
                      _code(other or "no fault found in the log", 400)]
        if len(others) > OTHER_FAULTS_SHOWN:
            rest = sum(len(ids) for _, ids in others[OTHER_FAULTS_SHOWN:])
            lines.append(f"…and {rest} more tasks with {len(others) - OTHER_FAULTS_SHOWN} "
                         "other faults (`/job` each for its own).")
        if job.trend and job.trend not in _said(fault):
            lines.append(_code(job.trend))
        lines.append(advice or "*Recommendation:* diagnose before relaunching.")
    elif change.kind == "finished" and rec is not None and rec.action == "diagnose":
        # Ended COMPLETED, but the run went wrong (a NaN loss, short of its total): no tick.
        lines = [f"⚠️ {head} completed, but the run needs a look.", advice]
    elif change.kind == "finished":
        lines = [f"✅ {head} completed.", advice or "No cleanup routine matched; nothing to do."]
    else:
        what = "zombie (all trials done, still RUNNING)" if "zombie" in job.flags else "stalled"
        lines = [f"⏸ {head} is {what}.", _code(job.trend or "no progress"), advice]
    lines.append(NOTIFY_FOOTER)
    text = "\n".join(line for line in lines if line)
    return SlackMessage(text=text if len(text) <= 3900 else cut_text(
        "\n".join([lines[0], *lines[-2:]])))


def evidence_lines(detail: JobDetail) -> list[str]:
    """One line per signal (value vs window), then sparklines of the key metrics (escaped)."""
    lines = []
    for ev in detail.evidence:
        mark = "🔴" if ev.fired else "⚪"
        lines.append(
            f"{mark} `{code(ev.signal)}` step {ev.step}: {_fmt(ev.value)} vs window mean "
            f"{_fmt(ev.window_mean)} ({len(ev.window)} pts) {sparkline(ev.window, len(ev.window))}"
            f" — {inert(ev.why or '')}"
        )
    for name in ("reward", "entropy", "grad_norm", "log_ratio_abs_mean", "loss"):
        values = [p.values[name] for p in detail.history if name in p.values]
        if len(values) >= 2:
            lines.append(f"`{name}` {sparkline(values, SPARK_POINTS)} last {_fmt(values[-1])}")
    return lines


def _goes_on(detail: JobDetail) -> str:
    """What carries on after the alert: the job itself, or (an ended run's collapse its chain
    restart resumes, ``bot.episodes.chain_restart_collapse``) the restart."""
    job = detail.report
    restart = restart_of(detail) if job.state not in ACTIVE_STATES else None
    if restart is not None:
        return (f"the job ended {job.state.value}; the run goes on as its restart "
                f"{code(restart)}")
    return "the job keeps running"


def salvage_text(detail: JobDetail) -> str:
    """What the collapse's salvage takes, as its recommendation names it
    (``report.findings.salvage_target``): the last banked step before the collapse began (a
    save at or after it holds collapsed weights), or that no banked checkpoint is safe. Without
    a known onset, the newest banked step (the alert's head before 7b0419f7)."""
    onset, banked = detail.collapse_onset, detail.report.banked_step
    if onset is None:
        return (f"banked checkpoint: step {banked}" if banked is not None
                else "no banked checkpoint found")
    if detail.salvage_step is not None:
        return (f"salvage banked step {detail.salvage_step} (the last before the collapse "
                f"began at step {onset})")
    if banked is not None:
        return (f"no banked checkpoint is safe (the newest, step {banked}, is not before the "
                f"collapse began at step {onset}): salvage the rollouts")
    return f"no banked checkpoint found (none before the collapse began at step {onset})"


def collapse_message(detail: JobDetail, *, can_cancel: bool, evidence_path: str | None = None,
                     delivered_for: str | None = None) -> SlackMessage:
    """The collapse alert with its evidence and buttons.

    ``delivered_for``: the owner's Slack id when the DM failed and the alert went to the channel.
    """
    job = detail.report
    ref = code(f"{job.cluster}:{job.job_id}")
    head = (
        f"*Collapse on* `{ref}` {strong(esc(one_line(job.name)))} "
        f"(owner {inert(job.user or 'unknown')})\n"
        f"step {job.step if job.step is not None else '—'}, collapse at step "
        f"{detail.collapse_step if detail.collapse_step is not None else '—'}; "
        f"{salvage_text(detail)}"
    )
    why = inert(job.recommendation.why) if job.recommendation else "collapse rule fired"
    body = cut_text("\n".join(evidence_lines(detail)), 2900) or "(no signal evidence recorded)"
    blocks: list[dict[str, Any]] = [section(head), section(body), context(why)]
    if delivered_for is not None:
        blocks.insert(0, context(f"For {mention(delivered_for)}: the direct message to the "
                                 "owner could not be delivered."))
    if evidence_path is not None:
        blocks.append(context(f"Evidence recorded ({_goes_on(detail)}): `{code(evidence_path)}`"))
    blocks.append({"type": "actions", "block_id": "collapse_actions",
                   "elements": _buttons(detail, can_cancel=can_cancel)})
    return SlackMessage(text=cut_text(f"Collapse on {ref} {esc(one_line(job.name))}", 150),
                        blocks=blocks)


BATCH_ENTRY_CHARS = 1200
"""One job's entry in a batched alert at most this long: a dozen fit in one message."""


def batch_actions_id(ref: str) -> str:
    """The block id of one job's buttons in a batched alert: an outcome replaces that block
    only (:func:`outcome_blocks`), the other jobs keep theirs."""
    return f"collapse_actions:{ref}"


def _batch_entry(detail: JobDetail, *, can_cancel: bool, evidence_path: str | None,
                 ) -> list[dict[str, Any]]:
    """One job of a batched alert: its head, its fired evidence, why; then its buttons."""
    job = detail.report
    raw = f"{job.cluster}:{job.job_id}"
    ref = code(raw)
    fired = [line for line, ev in zip(evidence_lines(detail), detail.evidence, strict=False)
             if ev.fired] or evidence_lines(detail)[:1] or ["(no signal evidence recorded)"]
    why = inert(job.recommendation.why) if job.recommendation else "collapse rule fired"
    name, owner = strong(esc(one_line(job.name))), inert(job.user or "unknown")
    lines = [f"`{ref}` {name} (owner {owner}): step "
             f"{job.step if job.step is not None else '—'}, collapse at step "
             f"{detail.collapse_step if detail.collapse_step is not None else '—'}; "
             + salvage_text(detail),
             *fired, why]
    if evidence_path is not None:
        lines.append(f"Evidence recorded ({_goes_on(detail)}): `{code(evidence_path)}`")
    text = cut_text("\n".join(lines), BATCH_ENTRY_CHARS)
    return [section(text), {"type": "actions", "block_id": batch_actions_id(raw),
                            "elements": _buttons(detail, can_cancel=can_cancel)}]


def with_job_buttons(blocks: Sequence[dict[str, Any]], detail: JobDetail, *,
                     can_cancel: bool) -> list[dict[str, Any]]:
    """A batched alert's blocks with ``detail``'s own buttons as they may be pressed now (its
    outcome line, if any, dropped: the caller adds the new one); the other jobs' untouched."""
    ref = f"{detail.report.cluster}:{detail.report.job_id}"
    actions = {"type": "actions", "block_id": batch_actions_id(ref),
               "elements": _buttons(detail, can_cancel=can_cancel)}
    out: list[dict[str, Any]] = []
    for block in blocks:
        if block.get("block_id") in (batch_actions_id(ref), f"outcome:{ref}"):
            if actions not in out:
                out.append(actions)
        else:
            out.append(block)
    return out


def collapse_batch_messages(
    alerts: Sequence[tuple[JobDetail, bool, str | None]], *, delivered_for: str | None = None,
) -> list[tuple[SlackMessage, list[int]]]:
    """Several collapse alerts for one recipient, in as few messages as Slack's limits allow
    (50 blocks, about 10,000 characters of block text); each job with its evidence and its own
    buttons (their ``value`` names it: a press is checked against that job's own alert).

    ``alerts``: (detail, can_cancel, evidence path) per job. Returns each message with the
    indexes of the alerts it carries.
    """
    from report.chunks import MESSAGE_BLOCKS, MESSAGE_CHARS

    entries = [_batch_entry(d, can_cancel=c, evidence_path=p) for d, c, p in alerts]
    note = (context(f"For {mention(delivered_for)}: the direct message to the owner could not "
                    "be delivered.") if delivered_for is not None else None)
    # The header section (and the note), and room for one outcome line beside its buttons.
    head_room = 2 + (1 if note else 0)
    head_chars = 200
    groups: list[list[int]] = []
    blocks_used = chars_used = 0
    for n, entry in enumerate(entries):
        size = len(entry[0]["text"]["text"]) + 100  # the buttons' labels
        if not groups or blocks_used + len(entry) > MESSAGE_BLOCKS - head_room \
                or chars_used + size > MESSAGE_CHARS - head_chars:
            groups.append([])
            blocks_used = chars_used = 0
        groups[-1].append(n)
        blocks_used += len(entry)
        chars_used += size
    out = []
    for part, group in enumerate(groups, 1):
        of = f" (message {part} of {len(groups)})" if len(groups) > 1 else ""
        refs = ", ".join(code(f"{alerts[i][0].report.cluster}:{alerts[i][0].report.job_id}")
                         for i in group)
        header = section(f"*{len(alerts)} collapses* in this sweep{of}: each job with its "
                         "evidence and its own buttons (a button acts only on its job).")
        blocks = [*([note] if note else []), header,
                  *(block for i in group for block in entries[i])]
        out.append((SlackMessage(text=cut_text(f"{len(group)} collapses{of}: {refs}", 150),
                                 blocks=blocks), group))
    return out


def _buttons(detail: JobDetail, *, can_cancel: bool) -> list[dict[str, Any]]:
    # The value names the job so a human reading the payload sees it; it is never authority:
    # a press is checked against the stored episode of the message it came from.
    ref = f"{detail.report.cluster}:{detail.report.job_id}"
    # Reading the literal rollouts is how a collapse is confirmed (CONTRACT §7); it changes
    # nothing, so every alert offers it, a no-kill recommendation too.
    probe = button(DEEP_PROBE, "Deep-probe", ref)
    if not can_cancel:
        return [button(ACKNOWLEDGE, "Acknowledge (recommendation only)", ref), probe]
    banked = detail.report.banked_step
    salvage = (f"Banked step: {banked if banked is not None else 'none'}"
               if detail.collapse_onset is None
               else f"Salvage: {salvage_text(detail).removeprefix('salvage ')}")
    confirm = {
        "title": {"type": "plain_text", "text": "Cancel and salvage?"},
        "text": mrkdwn_object(cut_text(
            f"Evidence (log tail, metric window, scheduler record) is saved first, then "
            f"`{code(ref)}` is cancelled. {salvage}.", 300, note="…")),
        "confirm": {"type": "plain_text", "text": "Salvage and cancel"},
        "deny": {"type": "plain_text", "text": "Keep it"},
        "style": "danger",
    }
    return [
        button(CANCEL, "Cancel & salvage", ref, style="danger", confirm=confirm),
        button(KEEP, "Keep running", ref),
        button(SNOOZE, f"Snooze {SNOOZE_HOURS:g}h", ref),
        probe,
    ]


def outcome_blocks(blocks: Sequence[dict[str, Any]], line: str, *,
                   keep_buttons: bool, ref: str | None = None) -> list[dict[str, Any]]:
    """The alert's blocks with the outcome line (escaped mrkdwn) in place of the last one.

    In a batched alert (``ref``'s buttons under :func:`batch_actions_id`), only that job's
    buttons (or its earlier outcome) give way to its outcome; the other jobs keep theirs."""
    actions, told = batch_actions_id(ref or ""), f"outcome:{ref}"
    if ref is not None and any(str(b.get("block_id", "")).startswith(("collapse_actions:",
                                                                       "outcome:"))
                               for b in blocks):
        out: list[dict[str, Any]] = []
        placed = False
        for block in blocks:
            if block.get("block_id") not in (actions, told):
                out.append(block)
                continue
            if block.get("block_id") == actions and keep_buttons:
                out.append(block)
            if not placed:  # this job's earlier outcome (or its buttons) gives way to it
                out.append(context(line, block_id=told))
                placed = True
        if not placed:
            out.append(context(line, block_id=told))
        # Past Slack's 50 blocks (failed cancels keep their buttons and add a line each):
        # other jobs' lines beside their buttons go first (in the message's order), never
        # a job's buttons or evidence.
        for block in list(out):
            if len(out) <= 50:
                break
            block_id = str(block.get("block_id", ""))
            if (block_id.startswith("outcome:") and block_id != told and any(
                    b.get("block_id") == batch_actions_id(block_id.removeprefix("outcome:"))
                    for b in out)):
                out.remove(block)
        return out[:50]
    kept = [b for b in blocks if keep_buttons or b.get("type") != "actions"]
    kept = [b for b in kept if b.get("block_id") != "outcome"][:49]
    return [*kept, context(line, block_id="outcome")]
