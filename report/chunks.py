"""Slack-sized pieces of a report: code-block sections, messages, and the sweep summary lines.

Policy: a message never exceeds Slack's limits (research/slack.md §3: a section's text is at
most 3,000 characters, a message at most 50 blocks, about 10,000 characters of block text in
all (Slack's undocumented aggregate cap sits near 12-13k), top-level ``text`` at most 4,000);
when a report is bigger it is split across messages, and a caller that must stop early says so
(:func:`cut_messages`). Each table becomes
one or more code blocks split between rows, never inside one: every chunk is a complete box
(top rule, the header rows, some body rows, bottom rule), so a continuation reads on its own.
Only a single row taller than a whole block (pathological widths) is split between its lines,
still inside a closed box. :func:`escape_mrkdwn` is the one escape for text that came from a
cluster or a user: ``&``, ``<`` and ``>`` become entities everywhere, code blocks included, so
nothing outside the bot can write a mention (``<!channel>``, ``<@U…>``) or a link. Inside a code
block a backtick becomes the look-alike ``ˋ`` (same width), so a log line's ```` ``` ```` cannot
end the block. Limits are counted on the escaped text. Plain dicts only: no Slack SDK here.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from report.models import BUCKET_ORDER, JobReport, Report
from report.tables import BUCKET_TITLES, RenderedTable, is_buffering

FENCE = "```"
BACKTICK_LOOKALIKE = "ˋ"
CONTINUED = " (cont.)"
FALLBACK_MAX = 150
SECTION_CHARS = 3000
MESSAGE_CHARS = 10_000
MESSAGE_BLOCKS = 50
TEXT_CHARS = 3900
"""Top-level ``text`` budget: Slack recommends at most 4,000."""

# Verdict wording for the summary, in reading order; the named ones need a human.
_VERDICT_WORDS: tuple[tuple[str, str], ...] = (
    ("collapse", "COLLAPSE"), ("failed", "FAILED"), ("stalled", "STALLED"),
    ("warning", "warning"), ("unknown", "unknown"), ("restarting", "restart"),
    ("buffering", "filling buffer"), ("healthy", "healthy"), ("done", "done"),
)
_NEEDS_HUMAN = frozenset({"collapse", "failed", "stalled", "warning", "unknown"})
_ACTION_WORDS = {
    "cleanup": "to clean up", "consolidate_manually": "to consolidate by hand",
    "deep_probe": "to deep-probe", "diagnose": "to diagnose",
}
_NAMES_SHOWN = 3


@dataclass(frozen=True)
class SlackMessage:
    """One ``chat.postMessage`` worth: notification ``text`` and Block Kit ``blocks``."""

    text: str
    blocks: list[dict[str, Any]] = field(default_factory=list)
    cut: bool = False
    """True on the note that ends a cut answer (the caller may send the whole as a file)."""


def escape_mrkdwn(text: str) -> str:
    """Escape the three characters Slack's mrkdwn treats as control characters; a fence
    (```` ``` ````) from outside the bot becomes look-alikes so it cannot open a code block."""
    escaped = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return escaped.replace(FENCE, BACKTICK_LOOKALIKE * 3)


def no_backticks(text: str) -> str:
    """Every backtick a look-alike: text that cannot close a code span or fence (escape for
    mrkdwn separately, or use ``escape_code``)."""
    return text.replace("`", BACKTICK_LOOKALIKE)


def escape_code(text: str) -> str:
    """Text for inside a code block or span: escaped, and no backtick left to close it."""
    return no_backticks(escape_mrkdwn(text))


_TORN_TAIL = re.compile(r"(&[a-z]{0,4}|<[^>]*)\Z")


def cut_text(text: str, limit: int = TEXT_CHARS, *, note: str = "… (cut)") -> str:
    """``text`` within ``limit`` characters, saying it was cut; never ends in a torn
    ``&amp;`` entity or a half-written ``<@U…>`` (which would leave a bare ``<``)."""
    if len(text) <= limit:
        return text
    return _TORN_TAIL.sub("", text[: max(0, limit - len(note))]) + note


def plain_chunks(text: str, limit: int) -> list[str]:
    """Split text into pieces of at most ``limit`` characters, at line breaks where possible."""
    if limit < 1:
        raise ValueError(f"limit must be positive, got {limit}")
    pieces: list[str] = []
    current = ""
    for whole_line in text.split("\n"):
        line = whole_line
        while len(line) > limit:
            if current:
                pieces.append(current)
                current = ""
            space = line.rfind(" ", 1, limit + 1)
            cut = space if space > 0 else limit
            pieces.append(line[:cut])
            line = line[cut:].lstrip(" ") if space > 0 else line[cut:]
        candidate = f"{current}\n{line}" if current else line
        if current and len(candidate) > limit:
            pieces.append(current)
            current = line
        else:
            current = candidate
    if current or not pieces:
        pieces.append(current)
    return pieces


def escaped_chunks(text: str, limit: int, escape: Any = escape_mrkdwn) -> list[str]:
    """Raw ``text`` cut into escaped pieces of at most ``limit`` characters. The cut is made
    on the raw text, so an entity (``&lt;``) is never torn in two; a piece whose escaping grew
    past the limit is cut again at a fifth of it (an entity is at most five characters)."""
    out: list[str] = []
    for piece in plain_chunks(text, limit):
        escaped = escape(piece)
        if len(escaped) <= limit:
            out.append(escaped)
        else:
            out.extend(escape(p) for p in plain_chunks(piece, max(1, limit // 5)))
    return out


def _frame(table: RenderedTable) -> tuple[list[str], list[list[str]], str]:
    """Split a table into its head (top rule, header rows, rule), its body rows, its bottom."""
    # A literal ``` in a cell would close the code fence early; a look-alike keeps the width.
    lines = [escape_code(line) for line in table.text.split("\n")]
    head_end = 2 + table.header_lines
    head, body, bottom = lines[:head_end], lines[head_end:-1], lines[-1]
    heights = table.row_heights if sum(table.row_heights) == len(body) else (1,) * len(body)
    rows, start = [], 0
    for height in heights:
        rows.append(body[start:start + height])
        start += height
    return head, rows, bottom


def _section_text(title: str, lines: Sequence[str], continued: bool) -> str:
    label = f"*{title}*{CONTINUED if continued else ''}\n" if title else ""
    return f"{label}{FENCE}\n" + "\n".join(lines) + f"\n{FENCE}"


def table_sections(table: RenderedTable, *, max_chars: int = 3000) -> list[str]:
    """One table as mrkdwn section texts of at most ``max_chars``, each a complete box."""
    title = escape_mrkdwn(table.title)
    head, rows, bottom = _frame(table)
    overhead = len(_section_text(title, [*head, bottom], continued=True)) + 1
    budget = max_chars - overhead
    if budget <= 0:
        # Not even the bare frame fits: give up on boxes rather than exceed the limit.
        return [f"{FENCE}\n{p}\n{FENCE}"
                for p in escaped_chunks(table.text, max_chars - 8, escape_code)]
    groups: list[list[str]] = []
    current: list[str] = []
    used = 0
    for row in rows:
        size = sum(len(line) + 1 for line in row)
        if current and used + size > budget:
            groups.append(current)
            current, used = [], 0
        if size > budget:
            groups.extend(_split_tall_row(row, budget))
            continue
        current.extend(row)
        used += size
    if current or not groups:
        groups.append(current)
    return [_section_text(title, [*head, *g, bottom], continued=i > 0)
            for i, g in enumerate(groups)]


def _split_tall_row(row: Sequence[str], budget: int) -> list[list[str]]:
    groups: list[list[str]] = [[]]
    used = 0
    for line in row:
        if groups[-1] and used + len(line) + 1 > budget:
            groups.append([])
            used = 0
        groups[-1].append(line)
        used += len(line) + 1
    return groups


def _section(text: str) -> dict[str, Any]:
    return {"type": "section", "text": {"type": "mrkdwn", "text": text}}


def text_sections(text: str, *, max_chars: int = SECTION_CHARS) -> list[str]:
    """Plain (non-table) report text as code-block section texts, split between lines."""
    return [f"{FENCE}\n{p}\n{FENCE}" for p in escaped_chunks(text, max_chars - 8, escape_code)]


def slack_messages(
    pieces: Sequence[RenderedTable | str],
    *,
    header: str | None = None,
    max_block_chars: int = SECTION_CHARS,
    max_blocks: int = MESSAGE_BLOCKS,
    max_message_chars: int = MESSAGE_CHARS,
) -> list[SlackMessage]:
    """Pack the header and every table/text chunk into as few messages as Slack allows.

    ``header`` and string pieces are raw text (escaped here); tables keep their boxes.
    """
    block_limit = min(max_block_chars, max_message_chars)
    texts = escaped_chunks(header, block_limit) if header else []
    for piece in pieces:
        if isinstance(piece, str):
            texts.extend(text_sections(piece, max_chars=block_limit))
        else:
            texts.extend(table_sections(piece, max_chars=block_limit))
    groups: list[list[str]] = []
    used = 0
    for text in texts:
        if not groups or len(groups[-1]) >= max_blocks or used + len(text) > max_message_chars:
            groups.append([])
            used = 0
        groups[-1].append(text)
        used += len(text)
    titles = [p.title for p in pieces if not isinstance(p, str) and p.title]
    base = (header or "").split("\n", 1)[0] or (
        "Job tables: " + ", ".join(dict.fromkeys(titles)))
    base = cut_text(escape_mrkdwn(base), FALLBACK_MAX, note="…")
    return [
        SlackMessage(text=base + (f" ({i + 1}/{len(groups)})" if len(groups) > 1 else ""),
                     blocks=[_section(t) for t in group])
        for i, group in enumerate(groups)
    ]


def cut_messages(messages: Sequence[SlackMessage], keep: int, *, hint: str
                 ) -> list[SlackMessage]:
    """At most ``keep`` messages; when more, the last one kept says how many were cut and
    what to do (``hint``, bot-written mrkdwn)."""
    if len(messages) <= keep:
        return list(messages)
    left = len(messages) - (keep - 1)
    note = f"…{left} more message(s) cut. {hint}"
    return [*messages[: keep - 1], SlackMessage(text=note, cut=True, blocks=[
        {"type": "context", "elements": [{"type": "mrkdwn", "text": note}]}])]


def _names(jobs: Sequence[JobReport]) -> str:
    names = [job.name for job in jobs[:_NAMES_SHOWN]]
    extra = len(jobs) - len(names)
    return ", ".join(names) + (f" +{extra} more" if extra else "")


def _bucket_line(title: str, jobs: Sequence[JobReport]) -> str:
    verdicts: Counter[str] = Counter(
        "buffering" if is_buffering(j) else j.verdict for j in jobs)
    parts = [f"{len(jobs)} job{'s' if len(jobs) != 1 else ''}"]
    for verdict, word in _VERDICT_WORDS:
        if verdicts[verdict]:
            part = f"{verdicts[verdict]} {word}"
            if verdict in _NEEDS_HUMAN:
                part += f" ({_names([j for j in jobs if j.verdict == verdict])})"
            parts.append(part)
    for action, words in _ACTION_WORDS.items():
        todo = [j for j in jobs if j.recommendation and j.recommendation.action == action]
        if todo:
            parts.append(f"{len(todo)} {words} ({_names(todo)})")
    return f"{title}: " + " · ".join(parts)


def summary_lines(report: Report) -> list[str]:
    """One line per non-empty bucket for the sweep's parent message, plus unreachable clusters."""
    lines = [
        _bucket_line(BUCKET_TITLES[bucket], [j for j in report.jobs if j.bucket == bucket])
        for bucket in BUCKET_ORDER
        if any(j.bucket == bucket for j in report.jobs)
    ] or ["No active or recent jobs."]
    down = [c for c in report.clusters if c.status == "unreachable"]
    if down:
        lines.append("Unreachable: " + ", ".join(
            f"{c.name} ({c.detail})" if c.detail else c.name for c in down))
    return lines
