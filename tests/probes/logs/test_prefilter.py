"""The whole-text prefilters change no result: fast paths equal the per-line reference."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from probes.logs.faults import _split_prefix, scan_faults
from probes.logs.lines import split_lines, strip_ansi
from probes.logs.parse import _SPLIT_RE, _parse_reference, parse_log
from probes.logs.prefilter import NeedleFilter, is_context_free, pattern_lines, shared_skeletons

FIXTURES = Path(__file__).parents[2] / "fixtures"
FIXTURE_FILES = sorted(
    p for p in FIXTURES.rglob("*") if p.is_file() and p.suffix in {".out", ".log", ".txt", ".json"}
)
PROPERTY = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Lines no fixture holds: context the stateful rules track, and characters the prefilter's
# byte skeleton treats specially (non-ASCII case folds and digits, digits inside words).
CRAFTED = [
    "Traceback (most recent call last):",
    '  File "/app/train.py", line 12, in <module>',
    "    main()",
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
    "(RayWorker pid=17, ip=10.0.0.2) Traceback (most recent call last):",
    '(RayWorker pid=17, ip=10.0.0.2)   File "/w.py", line 3, in f',
    "(RayWorker pid=17, ip=10.0.0.2) asyncio.TimeoutError: sampling engine timed out",
    "(RayWorker pid=17, ip=10.0.0.2) ray.exceptions.RayTaskError(ValueError): x",
    "  + Exception Group Traceback (most recent call last):",
    "  | ValueError: inner",
    "During handling of the above exception, another exception occurred:",
    "[rank0]: Traceback (most recent call last):",
    "[rank0]: RuntimeError: boom",
    "Failures:",
    "Root Cause (first observed failure):",
    "=" * 40,
    "  exitcode  : -9 (pid: 1234)",
    "srun: error: node1: task 0: Killed",
    "Received SIGTERM, shutting down",
    "SİGKİLL received",
    "KILLED",
    "SIG9TERM caught",
    "INFO ١٢-٢٩ ١٣:١٢:٥٠ [shm_broadcast.py:542] No available shared memory broadcast block found",
    "I0212 14:31:07.000 glog line",
    "2026-02-12 14:31:07.412 | INFO | Step 7: {'policy/policy_loss': 0.5, 'trainer/global_step': 7",
    "(skyrl_entrypoint pid=1) Step 8: ",
    "(skyrl_entrypoint pid=1) {'policy/policy_entropy': '0.5',",
    "(skyrl_entrypoint pid=1)  'trainer/global_step': 8} [repeated 2x across cluster]",
    "Training Batches Processed:  12%|█▏        | 8/100 [31:02<3:47:35, 155.18s/it]",
    "\x1b[A  3%|▎   | 3/100 [00:03<01:40,  1.0s/it]",
    "2026-01-01T10:00:00Z cloudflared Registered tunnel connection connIndex=0",
    "ERR failed to serve edge",
    "api_base='http://10.0.0.5:8000/v1'",
    '127.0.0.1 - "POST /v1/chat/completions HTTP/1.1" 200 OK',
    "Running: 12 reqs, Waiting: 0 reqs",
    "openai.AuthenticationError: 401 Unauthorized",
    "Gloo connectFullMesh failed with timeout",
    "NCCL INFO comm 0x1 rank 0 opCount 5",
    "Killed",
    "",
    "   ",
]
PATTERNS = [
    "Gloo connectFullMesh failed",
    "NCCL INFO .* opCount",
    r"^Killed$",
    r"(?i)sigterm",
    r"\bexitcode\b",
    r"KeyError: 'labels'",
    "Killed ([",
    r"[^x]y\s+z",
]


@cache
def fixture_lines() -> list[str]:
    """Every distinct line of every text fixture, plus the crafted ones."""
    seen: dict[str, None] = dict.fromkeys(CRAFTED)
    for path in FIXTURE_FILES:
        seen.update(dict.fromkeys(re.split(r"\r\n?|\n", path.read_text(errors="replace"))))
    return list(seen)


def assert_same(text: str, patterns: list[str], first: int = 1) -> None:
    """parse_log and scan_faults equal their per-line references on ``text`` (repr: NaN == NaN)."""
    fast = parse_log(text, benign_patterns=patterns, first_line_no=first)
    slow = _parse_reference(text, benign_patterns=patterns, first_line_no=first)
    assert repr(fast) == repr(slow)
    lines = [strip_ansi(line) for line in _SPLIT_RE.split(text)]
    expected = scan_faults(lines, benign_patterns=patterns, first_line_no=first, prefilter=False)
    assert scan_faults(lines, benign_patterns=patterns, first_line_no=first) == expected


def test_fixture_pool_is_real() -> None:
    """The property tests draw from the real fixtures (logs, SLURM and Harbor output)."""
    assert len(FIXTURE_FILES) > 100
    assert len(fixture_lines()) > 1000


@pytest.mark.parametrize("path", FIXTURE_FILES, ids=lambda p: str(p.relative_to(FIXTURES)))
def test_fixture_fast_path_equals_reference(path: Path) -> None:
    """Every fixture parses to the same summary with and without the prefilters."""
    text = path.read_text(errors="replace")
    assert_same(text, [])
    assert_same(text, PATTERNS, first=40)


@PROPERTY
@given(
    st.lists(st.integers(min_value=0), max_size=120),
    st.lists(st.sampled_from(["\n", "\r", "\r\n"]), min_size=1, max_size=4),
    st.lists(st.sampled_from(PATTERNS), max_size=3),
    st.integers(min_value=1, max_value=10**6),
)
def test_random_mix_of_real_lines_equals_reference(
    picks: list[int], seps: list[str], patterns: list[str], first: int
) -> None:
    """Any mix of real fixture lines, joined by any line ends, gives the reference result."""
    pool = fixture_lines()
    pieces = [pool[i % len(pool)] for i in picks]
    text = "".join(piece + seps[i % len(seps)] for i, piece in enumerate(pieces))
    assert_same(text, patterns, first)


@PROPERTY
@given(st.lists(st.integers(min_value=0, max_value=len(CRAFTED) - 1), max_size=60))
def test_random_mix_of_crafted_lines_equals_reference(picks: list[int]) -> None:
    """Tracebacks, summaries and case/digit oddities in any order give the reference result."""
    assert_same("\n".join(CRAFTED[i] for i in picks), PATTERNS[:2])


@PROPERTY
@given(st.text(alphabet="ab\r\n\x1b[A;1m", max_size=60), st.integers(-2, 8))
def test_split_equals_regex_split(text: str, cap: int) -> None:
    """The C-speed split gives the regex split's raw and ANSI-stripped lines."""
    raws = [p[:cap] if len(p) > cap else p for p in _SPLIT_RE.split(text)]
    assert split_lines(text, cap) == (raws, [strip_ansi(r) for r in raws])


NEEDLES = NeedleFilter(["sigterm", "killed", "::", "a b"], unicode_digits=True)


@PROPERTY
@example(["1:1", "1:1:1", "1::", "1:١:1"])  # a clock, and digit:digit that is not one
@given(st.lists(st.text(alphabet="SIGTERMKILDsigtermkild \u0130\u212a:1١ ab\x00é", max_size=12)))
def test_needle_filter_is_a_superset(lines: list[str]) -> None:
    """Every line holding a needle (after str.lower()) or a clock (``1:2:3``: its digits
    deleted leave the needle ``::``; a non-ASCII digit keeps the line itself) is kept."""
    kept = set(NEEDLES.lines(lines) or ())
    for index, line in enumerate(lines):
        low = line.lower()
        if any(needle in low for needle in NEEDLES.needles) or re.search(r"\d:\d*:", line):
            assert index in kept, line


SHAPED = NeedleFilter(["killed"], shape=rb"^ *[a-z_]\w*:(?: |$)")


@PROPERTY
@given(st.lists(st.text(alphabet="Killed aK_:1\u212a\xe9", max_size=10)))
def test_shape_and_groups_are_supersets(lines: list[str]) -> None:
    """A ``shape`` keeps the lines whose skeleton it meets (an indented ``key:`` here), and
    ``groups`` holds exactly ``lines()``'s indices, each under its own line's skeleton."""
    kept = SHAPED.lines(lines) or []
    for index, line in enumerate(lines):
        if "killed" in line.lower() or re.match(r" *[A-Za-z_][A-Za-z0-9_]*:(?: |$)", line):
            assert index in kept, line
    groups = SHAPED.groups(lines) or {}
    assert sorted(i for indices in groups.values() for i in indices) == kept
    assert len({i for indices in groups.values() for i in indices}) == len(kept)


def test_needle_filter_keeps_case_folds() -> None:
    """The non-ASCII letters that lower to ASCII (dotted I, Kelvin sign) keep their line."""
    lines = ["\u212a", "x", "\u0130", "KILLED", "K"]
    assert NeedleFilter(["killed"]).lines(lines) == [0, 2, 3]


def test_needle_filter_rejects_digits_and_hands_back_newlines() -> None:
    """Needles with digits are refused; a line holding a newline cannot be mapped."""
    with pytest.raises(ValueError, match="digit-free"):
        NeedleFilter(["401"])
    assert NeedleFilter(["x"]).lines(["a\nx"]) is None


@pytest.mark.parametrize(
    ("pattern", "free"),
    [
        ("Gloo connectFullMesh failed", True),
        ("NCCL INFO .* opCount", True),
        ("(?i)sigterm", True),
        ("(?s-i:a.b)", True),
        (re.escape("Killed (["), True),
        ("^Killed$", False),
        (r"\bexitcode", False),
        ("(?=a)b", False),
        ("(?P<x>a)(?P=x)", False),
        (r"(a)\1", False),
        ("a++", False),
        ("x*", False),
        ("[^x]y", False),
    ],
)
def test_context_free_patterns(pattern: str, free: bool) -> None:
    """Only patterns whose match depends on the matched text alone run over the whole tail."""
    assert is_context_free(re.compile(pattern)) is free


@PROPERTY
@given(
    st.lists(st.text(alphabet="ab \n(x)pid=1", max_size=10), max_size=10),
    st.sampled_from(["a b", r"a\sb", "b+", "(?s)a.b", "^a", "x?b", r"\bb"]),
)
def test_pattern_lines_is_a_superset(lines: list[str], pattern: str) -> None:
    """Every line whose text a cluster pattern matches is kept, even when lines hold newlines."""
    compiled = re.compile(pattern)
    kept = pattern_lines(lines, [compiled], lambda line: _split_prefix(line)[1])
    for index, line in enumerate(lines):
        if compiled.search(_split_prefix(line)[1]):
            assert index in kept


SHARED_FILTERS = [
    NeedleFilter(("%|", "step:", "{", "'", " ::")), NeedleFilter(("traceback", "killed")),
    NeedleFilter(("=", "push"), unicode_digits=True),
    NeedleFilter(("{",), shape=rb"^ *[a-z_][\w\-\x80-\xff]*:(?: |$)"),
]


@PROPERTY
@given(st.lists(st.integers(min_value=0), max_size=120), st.integers(0, 130),
       st.integers(0, 130), st.data())
def test_windows_and_shared_skeletons_find_what_a_slice_finds(
    picks: list[int], start: int, stop: int, data: st.DataObject
) -> None:
    """``lines(lines, start, stop)`` is ``lines(lines[start:stop])``; ``groups`` and ``lines``
    inside ``shared_skeletons`` (the skeletons built once) are what they are outside; a list
    changed in length inside is read afresh."""
    pool = ["a\nb", "\ud800x", "", *CRAFTED, *fixture_lines()]
    lines = [pool[i % len(pool)] for i in picks]
    top = data.draw(st.sampled_from([None, stop]))
    alone = [(f.lines(lines), f.groups(lines), f.lines(lines[start:top]),
              f.lines(lines[start:])) for f in SHARED_FILTERS]
    with shared_skeletons(lines):
        shared = [(f.lines(lines), f.groups(lines), f.lines(lines, start, top),
                   f.lines(lines, start)) for f in SHARED_FILTERS]
        lines.append("Traceback (most recent call last):")
        grown = [f.lines(lines) for f in SHARED_FILTERS]
    if any("\n" in line for line in lines):  # no skeleton per line: every line, always
        assert all(window is None for *_, cut, tail in shared for window in (cut, tail))
        shared = [(whole, grouped, alone[n][2], alone[n][3])
                  for n, (whole, grouped, _, _) in enumerate(shared)]
    assert shared == alone
    assert grown == [f.lines(lines) for f in SHARED_FILTERS]



@PROPERTY
@given(st.lists(st.sampled_from([b"x", b"{'a': ''}", b"'k': ,", b"trace", b"  key: v", b"",
                                 b"killed", b"zz zz", b"(w pid=) {"]), min_size=64,
                max_size=300))
def test_matching_dense_or_sparse_meets_every_line_a_search_meets(lines: list[bytes]) -> None:
    """``_matching`` over distinct lines (its search loop, and the line-by-line search it
    turns to once hits are dense) finds exactly the lines a search of each line alone
    meets, for needles and a shape with ``^``/``$``."""
    tags = ["".join(chr(97 + int(d)) for d in str(n)).encode() for n in range(len(lines))]
    joined = b"\n".join(line + b" " + tag for line, tag in zip(lines, tags, strict=True))
    for needles in SHARED_FILTERS:
        for pattern in (needles._pattern, needles._shape):
            if pattern is None:
                continue
            want = {line for line in joined.split(b"\n") if pattern.search(line)}
            assert NeedleFilter._matching(joined, pattern) == want
