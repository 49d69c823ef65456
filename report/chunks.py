"""Slack-sized pieces of a report: code-block sections and messages.

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
The escapes live in :mod:`report.mrkdwn`, the sweep's summary lines and :func:`public_reason`
in :mod:`report.sweep_summary`; :data:`__all__` here names them too (bot/ imports them from here).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from report.mrkdwn import (
    BACKTICK_LOOKALIKE,
    FENCE,
    escape_code,
    escape_mrkdwn,
    inert,
    no_backticks,
    strong,
    unformatted,
    unformatted_beside_spans,
)
from report.sweep_summary import public_reason, summary_lines
from report.tables import RenderedTable

__all__ = [
    "BACKTICK_LOOKALIKE", "CONTINUED", "FALLBACK_MAX", "FENCE", "MESSAGE_BLOCKS",
    "MESSAGE_CHARS", "SECTION_CHARS", "TEXT_CHARS", "SlackMessage", "cut_messages", "cut_text",
    "escape_code", "escape_mrkdwn", "escaped_chunks", "inert", "kept_messages", "mrkdwn_object",
    "no_backticks", "plain_chunks", "public_reason", "slack_messages", "strong",
    "summary_lines", "table_sections", "text_blocks", "text_sections", "unformatted",
    "unformatted_beside_spans",
]

CONTINUED = " (cont.)"
FALLBACK_MAX = 150
SECTION_CHARS = 3000
MESSAGE_CHARS = 10_000
MESSAGE_BLOCKS = 50
TEXT_CHARS = 3900
"""Top-level ``text`` budget: Slack recommends at most 4,000."""


@dataclass(frozen=True)
class SlackMessage:
    """One ``chat.postMessage`` worth: notification ``text`` and Block Kit ``blocks``."""

    text: str
    blocks: list[dict[str, Any]] = field(default_factory=list)
    cut: bool = False
    """True on the note that ends a cut answer (the caller may send the whole as a file)."""


_TORN_TAIL = re.compile(r"(&[a-z]{0,4}|<[^>]*)\Z")


def cut_text(text: str, limit: int = TEXT_CHARS, *, note: str = "… (cut)") -> str:
    """``text`` within ``limit`` characters, saying it was cut; never ends in a torn
    ``&amp;`` entity or a half-written ``<@U…>`` (which would leave a bare ``<``)."""
    if len(text) <= limit:
        return text
    kept = _TORN_TAIL.sub("", text[: max(0, limit - len(note))])
    if kept.rpartition("\n")[2].count("`") % 2:  # a torn inline span (``unformatted``)
        kept = kept[:kept.rfind("`")]
    return kept + note


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


def _frame(table: RenderedTable) -> tuple[list[str], list[str], list[int], str]:
    """Split a table into its head (top rule, header rows, rule), its body lines, how many
    lines each row has, and its bottom rule."""
    # A literal ``` in a cell would close the code fence early; a look-alike keeps the width.
    # Escaped whole, then split: escaping never crosses a line break, and one call on the
    # text is a C loop where a call per line is 5,000 Python calls at 5,000 jobs.
    lines = escape_code(table.text).split("\n")
    head_end = 2 + table.header_lines
    head, body, bottom = lines[:head_end], lines[head_end:-1], lines[-1]
    heights = table.row_heights if sum(table.row_heights) == len(body) else (1,) * len(body)
    return head, body, list(heights), bottom


def _section_text(title: str, lines: Sequence[str], continued: bool) -> str:
    label = f"{strong(title)}{CONTINUED if continued else ''}\n" if title else ""
    return f"{label}{FENCE}\n" + "\n".join(lines) + f"\n{FENCE}"


@dataclass(frozen=True)
class _Section:
    """A section whose length is known before its text is joined: text is built only for a
    message that is sent (``kept_messages``), never for the ones cut."""

    size: int
    build: Callable[[], str]


def _ready(text: str) -> _Section:
    return _Section(len(text), lambda: text)


def table_sections(table: RenderedTable, *, max_chars: int = 3000) -> list[str]:
    """One table as mrkdwn section texts of at most ``max_chars``, each a complete box."""
    return [section.build() for section in _table_sections(table, max_chars)]


def _table_sections(table: RenderedTable, max_chars: int) -> list[_Section]:
    title = escape_code(table.title)  # outside the block: no backtick to pair
    head, body, heights, bottom = _frame(table)
    overhead = len(_section_text(title, [*head, bottom], continued=True)) + 1
    budget = max_chars - overhead
    if budget <= 0:
        # Not even the bare frame fits: give up on boxes rather than exceed the limit.
        return [_ready(f"{FENCE}\n{p}\n{FENCE}")
                for p in escaped_chunks(table.text, max_chars - 8, escape_code)]
    groups = _row_groups(body, heights, budget)
    # The text of lines ``head + group + bottom``: the bare frame's, less the "(cont.)" of a
    # first section, plus a line break and each line.
    first_less = len(CONTINUED) if title else 0

    def section(i: int, group: list[str], used: int) -> _Section:
        return _Section(overhead - 1 + used - (0 if i else first_less), lambda: _section_text(
            title, [*head, *group, bottom], continued=i > 0))

    return [section(i, group, used) for i, (group, used) in enumerate(groups)]


def _row_groups(body: list[str], heights: list[int], budget: int
                ) -> list[tuple[list[str], int]]:
    """The body's lines packed into groups within ``budget`` (each line counts its length and
    a line break), split between rows; a row taller than ``budget`` alone, between lines."""
    groups: list[tuple[list[str], int]] = []
    sizes = [len(line) + 1 for line in body]
    start = used = at = 0  # the group is body[start:at]
    for height in heights:
        size = sizes[at] if height == 1 else sum(sizes[at:at + height])
        if at > start and used + size > budget:
            groups.append((body[start:at], used))
            start, used = at, 0
        at += height
        if size > budget:
            groups.extend(_split_tall_row(body[at - height:at], budget))
            start = at
        else:
            used += size
    if at > start or not groups:
        groups.append((body[start:at], used))
    return groups


def _split_tall_row(row: Sequence[str], budget: int) -> list[tuple[list[str], int]]:
    groups: list[tuple[list[str], int]] = [([], 0)]
    for line in row:
        group, used = groups[-1]
        if group and used + len(line) + 1 > budget:
            groups.append(([], 0))
            group, used = groups[-1]
        group.append(line)
        groups[-1] = (group, used + len(line) + 1)
    return groups


def mrkdwn_object(text: str) -> dict[str, Any]:
    """A mrkdwn text object, ``verbatim``: Slack then makes no link, channel link or mention
    of its own in it (by default it turns a bare URL, ``#name`` and some ``@`` words in cluster
    text into them). The bot's own are written ``<@U…>`` / ``<url|text>``, which it renders."""
    return {"type": "mrkdwn", "verbatim": True, "text": text}


def _section(text: str) -> dict[str, Any]:
    return {"type": "section", "text": mrkdwn_object(text)}


def text_blocks(text: str, limit: int = SECTION_CHARS) -> list[dict[str, Any]]:
    """A message's mrkdwn ``text`` (already escaped) as verbatim sections of whole lines, a
    code block cut between two sections closed and reopened: the body Slack shows for a post
    built as text only, since a message's top-level text is always auto-linked."""
    groups: list[list[str]] = [[]]
    size, fenced = 0, False
    for raw in text.split("\n"):
        line = cut_text(raw, limit - 2 * len(FENCE) - 2)
        if groups[-1] and size + len(line) + 1 + (len(FENCE) + 1 if fenced else 0) > limit:
            if fenced:
                groups[-1].append(FENCE)
            groups.append([FENCE] if fenced else [])
            size = sum(len(part) + 1 for part in groups[-1])
        groups[-1].append(line)
        size += len(line) + 1
        fenced ^= line.count(FENCE) % 2 == 1
    return [_section("\n".join(group)) for group in groups if "".join(group).strip()]


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
    base, groups = _packed(pieces, header, max_block_chars, max_blocks, max_message_chars)
    return [_message(base, i, len(groups), group) for i, group in enumerate(groups)]


def kept_messages(
    pieces: Sequence[RenderedTable | str],
    keep: int,
    *,
    hint: str,
    header: str | None = None,
    max_block_chars: int = SECTION_CHARS,
    max_blocks: int = MESSAGE_BLOCKS,
    max_message_chars: int = MESSAGE_CHARS,
) -> list[SlackMessage]:
    """``cut_messages(slack_messages(...), keep, hint=hint)``, with only the messages kept
    built: every section is measured (the cut note counts the rest), the kept ones joined."""
    base, groups = _packed(pieces, header, max_block_chars, max_blocks, max_message_chars)
    if len(groups) <= keep:
        return [_message(base, i, len(groups), group) for i, group in enumerate(groups)]
    kept = [_message(base, i, len(groups), group) for i, group in enumerate(groups[:keep - 1])]
    return [*kept, _cut_note(len(groups) - (keep - 1), hint)]


def _packed(pieces: Sequence[RenderedTable | str], header: str | None, max_block_chars: int,
            max_blocks: int, max_message_chars: int) -> tuple[str, list[list[_Section]]]:
    """(every message's base ``text``, the sections of each message)."""
    block_limit = min(max_block_chars, max_message_chars)
    sections = [_ready(t) for t in escaped_chunks(header, block_limit)] if header else []
    for piece in pieces:
        if isinstance(piece, str):
            sections.extend(_ready(t) for t in text_sections(piece, max_chars=block_limit))
        else:
            sections.extend(_table_sections(piece, block_limit))
    groups: list[list[_Section]] = []
    used = 0
    for section in sections:
        if not groups or len(groups[-1]) >= max_blocks \
                or used + section.size > max_message_chars:
            groups.append([])
            used = 0
        groups[-1].append(section)
        used += section.size
    titles = [p.title for p in pieces if not isinstance(p, str) and p.title]
    base = (header or "").split("\n", 1)[0] or (
        "Job tables: " + ", ".join(dict.fromkeys(titles)))
    return cut_text(escape_mrkdwn(base), FALLBACK_MAX, note="…"), groups


def _message(base: str, i: int, count: int, group: Sequence[_Section]) -> SlackMessage:
    return SlackMessage(text=base + (f" ({i + 1}/{count})" if count > 1 else ""),
                        blocks=[_section(s.build()) for s in group])


def cut_messages(messages: Sequence[SlackMessage], keep: int, *, hint: str
                 ) -> list[SlackMessage]:
    """At most ``keep`` messages; when more, the last one kept says how many were cut and
    what to do (``hint``, bot-written mrkdwn)."""
    if len(messages) <= keep:
        return list(messages)
    return [*messages[: keep - 1], _cut_note(len(messages) - (keep - 1), hint)]


def _cut_note(left: int, hint: str) -> SlackMessage:
    note = f"…{left} more message(s) cut. {hint}"
    return SlackMessage(text=note, cut=True, blocks=[
        {"type": "context", "elements": [mrkdwn_object(note)]}])
