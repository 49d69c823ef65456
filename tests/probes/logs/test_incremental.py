"""Folding ``parse_increment`` over any cut of a log equals ``parse_log`` of the whole log.

Every log fixture (all trainer formats, SLURM and Harbor output) is cut at random points (mid-
line, between ``\\r`` and ``\\n``, inside a UTF-8 character, a traceback or a multi-line dict,
into many small chunks), and the chunks are folded with the carry round-tripped through JSON
between each, as the bot stores it in Redis. The summary must equal ``parse_log``'s of the
whole text (repr, so NaN equals NaN). Random mixes of real fixture lines are folded too, against
the whole-tail per-line reference (``parse_log`` reads its history back from the end, which
those shuffles can tell apart: ``tests/probes/logs/test_recent.py``).
"""

from __future__ import annotations

import random
import textwrap
from datetime import UTC, datetime
from itertools import pairwise
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from probes.logs.incremental import LogCarry, parse_increment
from probes.logs.parse import _parse_reference, parse_log
from probes.models import LogSummary
from tests.probes.logs.test_faults import ELASTIC
from tests.probes.logs.test_prefilter import CRAFTED, PATTERNS, fixture_lines

FIXTURES = Path(__file__).parents[2] / "fixtures"
FIXTURE_FILES = sorted(
    p for p in FIXTURES.rglob("*") if p.is_file() and p.suffix in {".out", ".log", ".txt", ".json"}
)
CUTS = settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
MIX = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
MTIME = datetime(2026, 2, 12, 15, 0, tzinfo=UTC)
ALIASES = {"my_reward": "reward"}


def fold(chunks: list[bytes] | list[str], **options: object) -> tuple[LogSummary, LogCarry]:
    """Fold ``parse_increment`` over ``chunks``, the carry through JSON between each. A
    carry that asks for the log to be read afresh (``LogCarry.afresh``) is dropped and the
    whole log so far read, as ``probes.slurm.cursors.fold_job``'s next sweep does."""
    carry = None
    summary = LogSummary(line_count=0)
    read: list[bytes] | list[str] = []
    for chunk in chunks:
        read.append(chunk)  # type: ignore[arg-type]
        summary, carry = parse_increment(carry, chunk, **options)  # type: ignore[arg-type]
        if carry.afresh:
            whole = read[0][:0].join(read)  # type: ignore[arg-type]
            summary, carry = parse_increment(None, whole, **options)  # type: ignore[arg-type]
        assert_as_validated(carry)
        carry = LogCarry.model_validate_json(carry.model_dump_json())
    assert carry is not None
    return summary, carry


def assert_as_validated(carry: LogCarry) -> None:
    """A carry built from live state without validation (``carried.built``) is the
    carry validation makes of the same fields: same types (tuples, floats, zone-aware log
    times), same JSON."""
    again = LogCarry.model_validate(carry.model_dump())
    assert repr(again) == repr(carry)
    assert again.model_dump_json() == carry.model_dump_json()


def cut(data: bytes, points: list[int]) -> list[bytes]:
    """``data`` cut at ``points`` (any order, repeats allowed: empty chunks too)."""
    edges = [0, *sorted(min(p, len(data)) for p in points), len(data)]
    return [data[a:b] for a, b in pairwise(edges)]


def interesting(data: bytes) -> list[int]:
    """Offsets where a cut is hardest: around line ends and inside multi-byte characters,
    and at the starts of tracebacks and dicts."""
    out: list[int] = []
    for needle in (b"\r", b"\n", b"Traceback", b"{", b"Step ", b"\xe2"):
        at = data.find(needle)
        while at >= 0 and len(out) < 4000:
            out += [at, at + 1]
            at = data.find(needle, at + 1)
    return out or [0]


@st.composite
def cut_points(draw: st.DrawFn, data: bytes) -> list[int]:
    """Uniform offsets, offsets at hard places, or many small chunks."""
    size = len(data)
    hard = interesting(data)
    kind = draw(st.sampled_from(["uniform", "hard", "small"]))
    if kind == "small":
        step = draw(st.integers(1, 64))
        start = draw(st.integers(0, max(0, size - 64 * step)))
        return list(range(start, min(size, start + 64 * step), step))
    pick = st.integers(0, size) if kind == "uniform" else st.sampled_from(hard)
    return draw(st.lists(pick, min_size=1, max_size=40))


def assert_same(got: LogSummary, want: LogSummary) -> None:
    assert repr(got) == repr(want)


@pytest.mark.parametrize("path", FIXTURE_FILES, ids=lambda p: str(p.relative_to(FIXTURES)))
def test_whole_log_at_once_equals_parse_log(path: Path) -> None:
    """A first read (no carry) of the whole fixture is ``parse_log`` of it."""
    data = path.read_bytes()
    options = {"mtime": MTIME, "aliases": ALIASES, "benign_patterns": PATTERNS[:3]}
    assert_same(parse_increment(None, data, **options)[0],  # type: ignore[arg-type]
                parse_log(data, **options))  # type: ignore[arg-type]


@pytest.mark.parametrize("path", FIXTURE_FILES, ids=lambda p: str(p.relative_to(FIXTURES)))
@CUTS
@given(data=st.data())
def test_fixture_cut_anywhere_folds_to_parse_log(path: Path, data: st.DataObject) -> None:
    """Any cut of a fixture, folded with the carry through JSON, equals ``parse_log``."""
    text = path.read_bytes()
    points = data.draw(cut_points(text))
    options = {"mtime": MTIME, "aliases": ALIASES, "benign_patterns": PATTERNS[:3]}
    assert_same(fold(cut(text, points), **options)[0], parse_log(text, **options))  # type: ignore[arg-type]


@pytest.mark.parametrize("path", FIXTURE_FILES[::7], ids=lambda p: str(p.relative_to(FIXTURES)))
def test_fixture_line_by_line_with_crlf(path: Path) -> None:
    """One line per read, ``\\r\\n`` line ends cut between ``\\r`` and ``\\n``, a short
    ``max_line_chars`` and a first line number: still ``parse_log``."""
    text = path.read_bytes().replace(b"\n", b"\r\n")
    chunks = [piece + b"\r" for piece in text.split(b"\r")]
    chunks[-1] = chunks[-1][:-1]
    options = {"max_line_chars": 50}
    summary = fold(chunks, **options, first_line_no=40)[0]  # type: ignore[arg-type]
    assert_same(summary, parse_log(text, first_line_no=40, **options))  # type: ignore[arg-type]


@MIX
@given(
    st.lists(st.integers(min_value=0), max_size=150),
    st.lists(st.sampled_from(["\n", "\r", "\r\n"]), min_size=1, max_size=4),
    st.lists(st.integers(min_value=0), max_size=12),
    st.lists(st.sampled_from(PATTERNS), max_size=3),
)
def test_random_real_lines_fold_to_the_whole_tail_pass(
    picks: list[int], seps: list[str], points: list[int], patterns: list[str]
) -> None:
    """Random mixes of real fixture lines and crafted tracebacks (the prefilter tests' pool),
    cut anywhere, fold to the whole-tail per-line pass; and to ``parse_log`` in everything but
    the history and formats, which it reads back from the end (``test_recent``)."""
    pool = fixture_lines()
    text = "".join(pool[i % len(pool)] + seps[i % len(seps)] for i in picks).encode()
    got = fold(cut(text, [p % (len(text) + 1) for p in points]), benign_patterns=patterns)[0]
    assert_same(got, _parse_reference(text, benign_patterns=patterns))
    fast = parse_log(text, benign_patterns=patterns)
    same = {"formats": (), "points": ()}
    assert_same(got.model_copy(update=same), fast.model_copy(update=same))


@MIX
@given(st.lists(st.integers(0, len(CRAFTED) - 1), max_size=80),
       st.lists(st.integers(0), max_size=8))
def test_crafted_tracebacks_cut_anywhere(picks: list[int], points: list[int]) -> None:
    """Interleaved Ray/rank tracebacks, chains, torchelastic summaries, cut anywhere."""
    text = "\n".join(CRAFTED[i] for i in picks).encode()
    got = fold(cut(text, [p % (len(text) + 1) for p in points]), benign_patterns=PATTERNS[:2])[0]
    assert_same(got, parse_log(text, benign_patterns=PATTERNS[:2]))


@MIX
@given(st.binary(max_size=600), st.lists(st.integers(0, 600), max_size=10))
def test_random_bytes_fold_exactly(data: bytes, points: list[int]) -> None:
    """Invalid UTF-8, cut sequences, stray ``\\r``: bytes fold exactly."""
    assert_same(fold(cut(data, points))[0], parse_log(data))


@MIX
@given(st.text(alphabet="aé€😀\r\n\x1b[m{}'", max_size=200), st.lists(st.integers(0), max_size=8))
def test_multibyte_characters_cut_between_bytes(text: str, points: list[int]) -> None:
    """A character cut between its bytes by a read is carried, not replaced."""
    data = text.encode()
    assert_same(fold(cut(data, [p % (len(data) + 1) for p in points]))[0], parse_log(data))


def test_str_increments_fold_when_cut_between_characters() -> None:
    """Decoded increments fold exactly too (a cut inside a character is what bytes avoid)."""
    text = (FIXTURES / "skyrl-rebuilt" / "console_v04.log").read_text()
    rng = random.Random(5)
    points = sorted(rng.sample(range(len(text)), 50))
    chunks = [text[a:b] for a, b in zip([0, *points], [*points, len(text)], strict=True)]
    assert_same(fold(chunks)[0], parse_log(text))


def test_nan_values_and_tqdm_redraws_without_newline() -> None:
    """NaN metrics survive the JSON carry, and a bar redrawn with ``\\r`` and no newline is
    the last line until the next redraw ends it."""
    lines = [f"step:{s} - actor/grad_norm:nan - actor/entropy:{s / 10}\n" for s in range(1, 40)]
    bars = [f"\r 30%|███       | {s}/100 [00:{s:02d}<01:00,  1.00s/it]" for s in range(1, 40)]
    chunks = [piece.encode() for pair in zip(lines, bars, strict=True) for piece in pair]
    summary = fold(chunks)[0]
    assert_same(summary, parse_log(b"".join(chunks)))
    assert summary.progress is not None and summary.progress.current == 39
    assert str(summary.points[-1].values["grad_norm"]) == "nan"


def test_huge_line_cut_into_pieces_carries_only_its_head() -> None:
    """A 1 MB line arriving in pieces is read as ``max_line_chars`` characters, and the carry
    holds no more than those."""
    line = "step:7 - actor/entropy:0.5 - " + "x" * 1_000_000
    data = ("start\n" + line + "\nstep:8 - actor/entropy:0.25\n").encode()
    carry = None
    for start in range(0, len(data), 50_000):
        _, carry = parse_increment(carry, data[start : start + 50_000], max_line_chars=1000)
        assert len(carry.text.partial) <= 1000
    summary, _ = parse_increment(carry, b"", max_line_chars=1000)
    assert_same(summary, parse_log(data, max_line_chars=1000))
    assert [p.step for p in summary.points] == [7, 8]


def summary_only_child_failure() -> str:
    """A torchrun failure with no child traceback above it: the detail is read from the
    summary's lines after the ``ChildFailedError`` (``faults._summary_detail``)."""
    text = ELASTIC[ELASTIC.index('    Traceback (most recent call last):\n      File "/usr/bin') :]
    return textwrap.dedent(text).replace(
        "traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html",
        "traceback : Signal 9 (SIGKILL) received by PID 1246012")


@pytest.mark.parametrize("every", [1, 2, 7])
@pytest.mark.parametrize("noise", [0, 30, 200])
def test_child_failed_summary_read_across_reads(every: int, noise: int) -> None:
    """The summary detail of a ``ChildFailedError`` whose summary arrives over many reads,
    with noise lines after it (past the 120 lines the detail reads, or not)."""
    text = summary_only_child_failure() + "".join(f"noise {i}\n" for i in range(noise))
    lines = text.splitlines(keepends=True)
    chunks = ["".join(lines[i : i + every]).encode() for i in range(0, len(lines), every)]
    summary = fold(chunks)[0]
    assert_same(summary, parse_log(text))
    child = next(f for f in summary.faults if f.kind == "child-failed")
    assert child.detail == "Signal 9 (SIGKILL) received by PID 1246012"
