"""``kept_messages`` and the measured sections change nothing: the messages are those the
code before them built (the reference below, as it was: every section joined, every message
built, then cut), on rendered reports and on random tables built to hit the edges (entities
and backticks that grow or keep a line's length, rows taller than a section, tiny limits,
titles or none, text pieces and headers)."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from report import chunks
from report.chunks import (
    FALLBACK_MAX,
    FENCE,
    MESSAGE_BLOCKS,
    MESSAGE_CHARS,
    SECTION_CHARS,
    SlackMessage,
    _section,
    _section_text,
    cut_messages,
    cut_text,
    escape_code,
    escape_mrkdwn,
    escaped_chunks,
    kept_messages,
    slack_messages,
    table_sections,
    text_sections,
)
from report.tables import RenderedTable, render_tables
from tests.report.test_chunks import big_report

PROPERTY = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
HINT = "ask for one bucket"


# -- the reference: report/chunks.py before kept_messages -------------------------------------


def old_frame(table: RenderedTable) -> tuple[list[str], list[list[str]], str]:
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



def old_table_sections(table: RenderedTable, *, max_chars: int = 3000) -> list[str]:
    """One table as mrkdwn section texts of at most ``max_chars``, each a complete box."""
    title = escape_code(table.title)  # outside the block: no backtick to pair (as the product)
    head, rows, bottom = old_frame(table)
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
            groups.extend(old_split_tall_row(row, budget))
            continue
        current.extend(row)
        used += size
    if current or not groups:
        groups.append(current)
    return [_section_text(title, [*head, *g, bottom], continued=i > 0)
            for i, g in enumerate(groups)]



def old_split_tall_row(row: Sequence[str], budget: int) -> list[list[str]]:
    groups: list[list[str]] = [[]]
    used = 0
    for line in row:
        if groups[-1] and used + len(line) + 1 > budget:
            groups.append([])
            used = 0
        groups[-1].append(line)
        used += len(line) + 1
    return groups



def old_slack_messages(
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
            texts.extend(old_table_sections(piece, max_chars=block_limit))
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


# -- the tests ----------------------------------------------------------------------------------

CELL = st.text(st.sampled_from("ab &<>`│é日"), max_size=12)


@st.composite
def tables(draw: st.DrawFn) -> RenderedTable:
    """A box-like table: a head, rows of one or more lines (or heights that do not add up),
    cells with characters that escaping grows (``&<>``) or swaps (backticks, fences)."""
    header_lines = draw(st.integers(0, 3))
    rows = draw(st.lists(st.lists(CELL.map(lambda c: f"│{c}│"), min_size=1, max_size=4),
                         max_size=25))
    head = ["┌──┐", *(f"│{draw(CELL)}│" for _ in range(header_lines)), "├──┤"]
    lines = [*head, *(line for row in rows for line in row), "└──┘"]
    heights = tuple(len(row) for row in rows)
    if draw(st.booleans()):
        heights = draw(st.lists(st.integers(1, 3), max_size=6).map(tuple))
    return RenderedTable(bucket="rl", title=draw(st.sampled_from(["", "RL", "<b> & `x`"])),
                         text="\n".join(lines), header_lines=header_lines, row_heights=heights)


LIMITS = st.fixed_dictionaries({
    "max_block_chars": st.sampled_from([SECTION_CHARS, 40, 60, 120, 300]),
    "max_blocks": st.sampled_from([MESSAGE_BLOCKS, 1, 2, 3]),
    "max_message_chars": st.sampled_from([MESSAGE_CHARS, 50, 200, 700]),
})


@PROPERTY
@given(pieces=st.lists(tables() | st.text(st.sampled_from("ab &<`\n"), max_size=80),
                       max_size=4),
       header=st.none() | st.text(st.sampled_from("Jobs &<>\n"), max_size=60),
       limits=LIMITS, keep=st.integers(1, 6))
def test_messages_equal_the_reference(pieces: list[RenderedTable | str], header: str | None,
                                      limits: dict[str, int], keep: int) -> None:
    """Random tables, text pieces, headers and limits: every message and every cut equals the
    reference's."""
    whole = old_slack_messages(pieces, header=header, **limits)
    assert slack_messages(pieces, header=header, **limits) == whole
    assert kept_messages(pieces, keep, hint=HINT, header=header, **limits) == \
        cut_messages(whole, keep, hint=HINT)
    for piece in pieces:
        if isinstance(piece, RenderedTable):
            block = min(limits["max_block_chars"], limits["max_message_chars"])
            assert table_sections(piece, max_chars=block) == \
                old_table_sections(piece, max_chars=block)


@pytest.mark.parametrize("count,width", [(0, 100), (1, 100), (300, 100), (300, 60),
                                         (2000, 160)])
@pytest.mark.parametrize("keep", [1, 2, 5, 50])
def test_rendered_reports_equal_the_reference(count: int, width: int, keep: int) -> None:
    """Rendered reports (wrapped rows, escaped cells) of up to 2,000 jobs: the same messages,
    and the same first ``keep`` with the same cut note."""
    pieces = render_tables(big_report(count), {}, width=width)
    whole = old_slack_messages(pieces, header="Jobs at 16:00:05Z · cached 3 s ago")
    assert slack_messages(pieces, header="Jobs at 16:00:05Z · cached 3 s ago") == whole
    assert kept_messages(pieces, keep, hint=HINT, header="Jobs at 16:00:05Z · cached 3 s ago"
                         ) == cut_messages(whole, keep, hint=HINT)


def test_cut_messages_are_never_joined(monkeypatch: pytest.MonkeyPatch) -> None:
    """Past the ``keep``-th message no section text is joined: each is only measured."""
    pieces = render_tables(big_report(2000), {}, width=100)
    built: list[int] = []

    def counted(title: str, lines: Sequence[str], continued: bool) -> str:
        built.append(1)
        return _section_text(title, lines, continued)

    monkeypatch.setattr(chunks, "_section_text", counted)
    kept = kept_messages(pieces, 5, hint=HINT, header="Jobs")
    joined = len(built)
    built.clear()
    every = slack_messages(pieces, header="Jobs")
    assert len(every) > 20 and kept[-1].cut
    # Each table joins its bare frame once, to measure it; the header is no table section.
    assert joined == len(pieces) + sum(len(m.blocks) for m in kept[:4]) - 1
    assert len(built) == len(pieces) + sum(len(m.blocks) for m in every) - 1


@PROPERTY
@given(text=st.text(st.sampled_from("a&<>`\n日;amp")))
def test_escaping_equals_the_reference(text: str) -> None:
    """The escapes whose replaces are skipped when nothing is there to replace: as before."""
    escaped = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    escaped = escaped.replace(FENCE, "ˋˋˋ")
    assert escape_mrkdwn(text) == escaped
    assert escape_code(text) == escaped.replace("`", "ˋ")
