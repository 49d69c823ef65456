"""``retain``'s shortcuts change nothing: it keeps what the plain per-line version kept.

The reference below is ``retain`` as it was before its shortcuts (the kept lines found by a
loop over the last lines, every needle scanned for over the whole tail): on every fixture and on
random text built to hit the shortcuts' edges (needles joined by deleting a digit, upper case,
``\\r`` and ``\\r\\n``, lines over the caps, non-ASCII, invalid surrogates), the two agree."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from probes.logs import excerpt
from probes.logs.excerpt import (
    _AGENT_NEEDLES,
    _TALLY_NEEDLES,
    AGENT_MARKERS,
    CONTEXT_LINES,
    TAIL_CHARS,
    TAIL_LINES,
    TALLY,
    _any_matching,
    _last_matching,
    _store_line,
    fault_contexts,
    last_context,
    last_lines,
    retain,
)
from probes.logs.parse import parse_log
from probes.models import LogFetch, LogSummary

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
LOGS = sorted(p for p in FIXTURES.rglob("*") if p.suffix in {".out", ".log"}
              and "generators" not in p.parts)
PROPERTY = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def reference_last_lines(text: str, parts: Sequence[str]) -> tuple[str, int]:
    size = 0
    start = len(parts)
    while start > 0 and len(parts) - start < TAIL_LINES:
        if size + len(parts[start - 1]) > TAIL_CHARS:
            break
        size, start = size + len(parts[start - 1]), start - 1
    if start == len(parts) and parts:
        return text[-TAIL_CHARS:], len(parts)
    return text[len(text) - size:], start + 1


def reference_retain(log: LogFetch, summary: LogSummary | None) -> LogFetch:
    text = log.text
    if not text:
        return log
    parts = text.splitlines(keepends=True)
    kept, first = reference_last_lines(text, parts)
    raw = text.encode("utf-8", "replace")
    low = raw.lower()
    above = len(raw) - len(kept.encode("utf-8", "replace"))
    tally = _last_matching(raw, low, _TALLY_NEEDLES, TALLY.search)
    return log.model_copy(update={
        "text": kept,
        "text_line": first,
        "contexts": fault_contexts(parts, summary.faults if summary else ()),
        "last_context": last_context(parts) if len(parts) - first + 1 < CONTEXT_LINES else None,
        "tally_line": tally[1] if tally is not None and tally[0] < above else None,
        "agent_marked": _any_matching(raw, low, _AGENT_NEEDLES, AGENT_MARKERS.search),
        "trials_in_object_store": _any_matching(raw, low, (b"://",), _store_line),
    })


def assert_same(text: str) -> None:
    log = LogFetch(status="ok", text=text)
    summary = parse_log(text)
    assert retain(log, summary) == reference_retain(log, summary)


@pytest.mark.parametrize("path", LOGS, ids=lambda p: str(p.relative_to(FIXTURES)))
def test_fixture_retained_as_before(path: Path) -> None:
    assert_same(path.read_text(errors="replace"))


LINES = [
    "===== 2 passed, 1 warning in 3.21s =====", "6,977 rows uploaded", "12 FILES written",
    "ro5ws 12", "pass3ed 7 passed", "1 error", "agent_config=terminus-2", "trials_dir: s3://b/x",
    "Harbor run", "HARBOR", "generate/avg_num_turns: 3", "failed: Exception info",
    "upload to gs://bucket/jobs/1", "{'loss': '1.9', 'epoch': '0.1'}", "x" * 600,
    "é€😀 3 shards", "AgentTimeoutError", "\ud800 surrogate 4 records", "",
]


@PROPERTY
@given(st.lists(st.sampled_from(LINES) | st.text(max_size=40), max_size=60),
       st.lists(st.sampled_from(["\n", "\r", "\r\n", "\x0b", "\u2028"]), min_size=1,
                max_size=3),
       st.integers(0, 3))
def test_random_lines_retained_as_before(parts: list[str], seps: list[str], scale: int) -> None:
    """Any mix, repeated up to past the line and character caps, keeps the same."""
    body = "".join(p + seps[i % len(seps)] for i, p in enumerate(parts))
    assert_same(body * (1 + scale * 40))


@PROPERTY
@given(st.lists(st.integers(0, 2 * TAIL_CHARS), max_size=TAIL_LINES + 40))
def test_last_lines_as_before(sizes: list[int]) -> None:
    """Lines of any lengths (one over the cap, many short ones): the same suffix and number."""
    parts = [("y" * size) + "\n" for size in sizes]
    text = "".join(parts)
    assert last_lines(text, parts) == reference_last_lines(text, parts)


def test_held_needles_never_hides_one() -> None:
    """A needle split by digits is held (a superset), one absent is not (the shortcut)."""
    held = excerpt._held_needles(b"ro5ws\nHARBOR 3\n")
    assert held((b"rows", b"harbor", b"passed")) == (b"rows", b"harbor")
