"""Slack-sized chunks: limits per block and message, complete boxes, row integrity, summary."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from probes.models import JobState
from report.chunks import (
    SlackMessage,
    escape_mrkdwn,
    plain_chunks,
    slack_messages,
    table_sections,
)
from report.models import ClusterReport, JobReport, Recommendation, Report
from report.sweep_summary import PUBLIC_REASON_CHARS, public_reason, summary_lines
from report.tables import RenderedTable, render_tables
from tests.report.factories import report_job

NOW = datetime(2026, 11, 30, 16, 0, tzinfo=UTC)
BUCKETS = ("rl", "sft", "datagen", "eval", "other")


def make_job(name: str, bucket: str, **fields: Any) -> JobReport:
    """A JobReport (:func:`report_job`) with a step, two metrics and a short trend per row."""
    return report_job(name, bucket, **{
        "job_id": name, "elapsed_s": 600, "step": 5, "total_steps": 80,
        "metrics": {"reward": 0.5, "loss": 1.2}, "trend": "steady", **fields})


def big_report(count: int = 300) -> Report:
    """``count`` jobs over every bucket; every seventh has a long trend that wraps."""
    jobs = [
        make_job(f"{BUCKETS[i % 5]}-run-{i:03d}", BUCKETS[i % 5],
                 trend=("pushing rows → <dataset> & more; " * 6) if i % 7 == 0 else "steady")
        for i in range(count)
    ]
    clusters = [ClusterReport(name="alpha", kind="slurm", status="ok", detail=None)]
    return Report(generated_at=NOW, clusters=clusters, jobs=jobs)


def section_texts(message: SlackMessage) -> list[str]:
    """The mrkdwn text of every section block of a message."""
    assert all(block["type"] == "section" for block in message.blocks)
    return [block["text"]["text"] for block in message.blocks]


def code_lines(section: str) -> tuple[str, list[str]]:
    """Split a table section into its title line and the lines inside the code fence."""
    title, fence, *body, closing = section.split("\n")
    assert (fence, closing) == ("```", "```")
    return title, body


def assert_within_limits(messages: list[SlackMessage], block: int = 3000, count: int = 50,
                         total: int = 12000) -> None:
    """No section, message block count or message text total exceeds the limits."""
    for message in messages:
        texts = section_texts(message)
        assert 0 < len(texts) <= count
        assert all(len(text) <= block for text in texts)
        assert sum(len(text) for text in texts) <= total


def assert_complete_box(lines: list[str], header: list[str]) -> None:
    """A chunk is a closed box that starts with the table's own header rows."""
    assert lines[0].startswith("┌") and lines[0].endswith("┐")
    assert lines[1:1 + len(header)] == header
    assert lines[1 + len(header)].startswith("├")
    assert lines[-1].startswith("└") and lines[-1].endswith("┘")
    assert all(line.startswith("│") for line in lines[2 + len(header):-1])


def test_300_jobs_split_into_messages_within_limits() -> None:
    """A 300-job report becomes several messages, each within Slack's limits."""
    tables = render_tables(big_report(), {})
    messages = slack_messages(tables, header="Sweep at 16:00Z")
    assert len(messages) > 1
    assert_within_limits(messages)
    assert [m.text for m in messages] == [
        f"Sweep at 16:00Z ({i}/{len(messages)})" for i in range(1, len(messages) + 1)]
    assert section_texts(messages[0])[0] == "Sweep at 16:00Z"


def test_every_chunk_is_a_complete_box_and_rows_stay_whole() -> None:
    """Chunks repeat the header, close the box, and split only between rows."""
    tables = render_tables(big_report(), {})
    for table in tables:
        escaped = [escape_mrkdwn(line) for line in table.text.split("\n")]
        header = escaped[1:1 + table.header_lines]
        body = escaped[2 + table.header_lines:-1]
        boundaries = {sum(table.row_heights[:i]) for i in range(len(table.row_heights) + 1)}
        sections = table_sections(table)
        assert len(sections) > 1
        seen: list[str] = []
        for index, section in enumerate(sections):
            title, lines = code_lines(section)
            assert title == f"*{table.title}*" + (" (cont.)" if index else "")
            assert_complete_box(lines, header)
            assert len(seen) in boundaries
            seen.extend(lines[2 + len(header):-1])
        assert seen == body


def test_all_jobs_appear_once() -> None:
    """Across all messages each job's name appears exactly once."""
    report = big_report()
    text = "\n".join(
        t for m in slack_messages(render_tables(report, {})) for t in section_texts(m))
    for job in report.jobs:
        assert text.count(job.name + " ") == 1


def test_mrkdwn_is_escaped_inside_code_blocks() -> None:
    """``&``, ``<`` and ``>`` are escaped, code blocks included."""
    text = "\n".join(t for m in slack_messages(render_tables(big_report(20), {}),
                                               header="a <b> & c") for t in section_texts(m))
    assert "&lt;dataset&gt; &amp; more" in text
    assert "a &lt;b&gt; &amp; c" in text
    assert "<" not in text.replace("&lt;", "")


@pytest.mark.parametrize(
    ("block", "count", "total"), [(3000, 50, 12000), (1000, 5, 2500), (600, 3, 1200)])
def test_smaller_limits_are_respected(block: int, count: int, total: int) -> None:
    """Tighter limits still produce closed boxes within every limit."""
    messages = slack_messages(render_tables(big_report(60), {}, width=60),
                              max_block_chars=block, max_blocks=count, max_message_chars=total)
    assert_within_limits(messages, block, count, total)
    for message in messages:
        for section in section_texts(message):
            _, lines = code_lines(section)
            assert lines[0].startswith("┌") and lines[-1].startswith("└")


def test_row_taller_than_a_block_is_split_inside_closed_boxes() -> None:
    """A single row taller than a block is split between its lines, each part still boxed."""
    job = make_job("rl-tall", "rl", trend="word " * 400)
    (table,) = render_tables(Report(generated_at=NOW, clusters=[], jobs=[job]), {}, width=60)
    sections = table_sections(table, max_chars=800)
    assert len(sections) > 1
    for section in sections:
        assert len(section) <= 800
        _, lines = code_lines(section)
        assert lines[0].startswith("┌") and lines[-1].startswith("└")


def test_hand_made_table_without_row_heights() -> None:
    """A table without row heights is split one line per row."""
    text = "┌───┐\n│ h │\n├───┤\n" + "│ x │\n" * 50 + "└───┘"
    sections = table_sections(RenderedTable(bucket="rl", title="T", text=text), max_chars=120)
    assert all(len(s) <= 120 for s in sections)
    assert sum(code_lines(s)[1].count("│ x │") for s in sections) == 50


def test_no_header_and_no_tables() -> None:
    """Nothing to send yields no messages; a header alone is one message."""
    assert slack_messages([]) == []
    (only,) = slack_messages([], header="No active or recent jobs.")
    assert only.text == "No active or recent jobs."
    assert section_texts(only) == ["No active or recent jobs."]


@pytest.mark.parametrize(
    ("text", "limit", "expected"),
    [
        ("", 10, [""]),
        ("short", 10, ["short"]),
        ("aaa\nbbb\nccc", 7, ["aaa\nbbb", "ccc"]),
        ("aaaa bbbb cccc", 9, ["aaaa bbbb", "cccc"]),
        ("abcdefghij", 4, ["abcd", "efgh", "ij"]),
        ("ab\nabcdefghij\ncd", 4, ["ab", "abcd", "efgh", "ij", "cd"]),
    ],
)
def test_plain_chunks(text: str, limit: int, expected: list[str]) -> None:
    """Text splits at line breaks, then spaces, then anywhere, never over the limit."""
    assert plain_chunks(text, limit) == expected


def test_plain_chunks_rejects_nonpositive_limit() -> None:
    """A limit below one is a programming error."""
    with pytest.raises(ValueError, match="positive"):
        plain_chunks("x", 0)


def test_summary_lines_count_verdicts_and_name_what_needs_a_human() -> None:
    """One line per bucket: counts by verdict, the jobs needing a human named."""
    jobs = [
        make_job("rl-a", "rl"), make_job("rl-b", "rl"), make_job("rl-c", "rl"),
        make_job("rl-grpo-7b", "rl", verdict="collapse"),
        make_job("rl-d", "rl", verdict="restarting"),
        make_job("rl-new", "rl", verdict="buffering", flags=["buffer-filling"]),
        make_job("sft-x", "sft", verdict="done", state=JobState.COMPLETED,
                 recommendation=Recommendation(action="cleanup", why="sft-job-cleanup")),
        make_job("eval-1", "eval", verdict="stalled"), make_job("eval-2", "eval",
                                                              verdict="stalled"),
        make_job("eval-3", "eval", verdict="stalled"), make_job("eval-4", "eval",
                                                              verdict="stalled"),
    ]
    clusters = [ClusterReport(name="alpha", kind="slurm", status="ok", detail=None),
                ClusterReport(name="beta", kind="slurm", status="unreachable", detail="timeout")]
    lines = summary_lines(Report(generated_at=NOW, clusters=clusters, jobs=jobs))
    assert lines == [
        "RL: 6 jobs · 1 COLLAPSE (rl-grpo-7b) · 1 restart · 1 filling buffer · 3 healthy",
        "SFT: 1 job · 1 done · 1 to clean up (sft-x)",
        "Eval: 4 jobs · 4 STALLED (eval-1, eval-2, eval-3 +1 more)",
        "Unreachable: beta (timeout)",
    ]


def test_summary_lines_without_jobs() -> None:
    """An empty sweep says so in one line."""
    assert summary_lines(Report(generated_at=NOW, clusters=[], jobs=[])) == [
        "No active or recent jobs."]


def test_backtick_fence_in_a_cell_cannot_close_the_code_block() -> None:
    """A literal triple backtick in a trend is replaced by a same-width look-alike."""
    job = make_job("rl-md", "rl", trend="see ```code```")
    (table,) = render_tables(Report(generated_at=NOW, clusters=[], jobs=[job]), {})
    (section,) = table_sections(table)
    _, lines = code_lines(section)
    assert "```" not in "\n".join(lines)
    assert "ˋˋˋcodeˋˋˋ" in "\n".join(lines)


@pytest.mark.timeout(20)
@pytest.mark.parametrize("unit", ["a-", "a.", "1.", "ab-cd."])
def test_public_reason_of_a_huge_hostile_line_is_cut_first(unit: str) -> None:
    """An error's text from a cluster can be one huge line of host-name-like pieces, on which
    the address patterns backtrack (16 KB of ``a-`` took 7.8 s, growing with the square of the
    length: 200 KB would hold the bot's event loop for about 20 minutes). The line is cut to a
    bounded prefix of whole words before any pattern runs; a hang fails on the timeout."""
    line = "ssh: " + unit * 100_000 + " 10.0.0.1:22 refused"
    shown = public_reason(line)
    assert len(shown) <= PUBLIC_REASON_CHARS and shown.endswith("…")
    assert shown.startswith("ssh:")


def test_public_reason_cuts_before_a_partial_address() -> None:
    """The bounded prefix ends on a word boundary: an address split by the cut is dropped
    whole, never shown in part."""
    line = "/" + "p" * 790 + " 10.20.30.40:22 " + "y" * 900  # the cut falls after 10.20.30
    shown = public_reason(line)
    assert shown.startswith("[path]") and "10.20" not in shown and "30" not in shown


def test_text_blocks_keep_lines_whole_and_code_blocks_closed() -> None:
    """A text-only message as verbatim sections: each within 3,000 characters, lines whole,
    a code block cut between two sections closed in the first and reopened in the next."""
    from report.chunks import FENCE, text_blocks

    lines = ["❌ *rl-x* `alpha:1` ended FAILED.", "First real fault:", FENCE,
             *[f"line {i} " + "x" * 90 for i in range(60)], FENCE, "_Turn these off._"]
    blocks = text_blocks("\n".join(lines))
    texts = [b["text"]["text"] for b in blocks]
    assert len(texts) > 1 and all(len(t) <= 3000 for t in texts)
    assert all(b["text"]["verbatim"] is True for b in blocks)
    assert all(t.count(FENCE) % 2 == 0 for t in texts)
    shown = [line for t in texts for line in t.split("\n") if line != FENCE]
    assert shown == [line for line in lines if line != FENCE]
    assert text_blocks("") == [] and text_blocks("ok")[0]["text"]["text"] == "ok"
