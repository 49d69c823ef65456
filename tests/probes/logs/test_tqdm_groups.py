"""``tqdm_groups`` (one regex pass over joined lines) reads each line as ``parse_tqdm`` does."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from probes.logs.bar_lines import TqdmBar, own_bars, parse_tqdm, tqdm_groups
from probes.logs.lines import interval_seconds
from tests.probes.logs.test_recent import fixture_pool

_PIECES = st.sampled_from([
    "", " ", "\t", "\x0b", "\u2028", "\x85", "Map", "Training Progress", ":", " : ", "%|", "|",
    "#", "██", " 10", "100", "5", "/", "20", "[", "]", "<", ",", "00:01", "1:02:03", "2d, 1:00:00",
    "?", "8.1it/s", "2.35s/it", "?it/s", "x" * 230, "(pid=1)", "{", "'", "١٢",
])
_LINE = st.lists(_PIECES, max_size=24).map("".join)
_WS = st.sampled_from(["", " ", "  ", "\t", "\u2028", "\x0b"])
_BAR = st.tuples(
    st.sampled_from(["", "Map", " Training Progress", "a|b", "x" * 210]),
    st.sampled_from(["", ":"]),
    _WS, st.sampled_from(["10", "100", "1000", ""]), st.sampled_from(["", "##", "█" * 5, "|"]),
    _WS, st.sampled_from(["5", "12", "x"]), st.sampled_from(["20", "9" * 13]), _WS,
    st.sampled_from(["00:01", "1:02:03", "2d, 1:00:00", "", "?"]),
    st.sampled_from(["00:09", "?", ","]), st.sampled_from(["", ", 8.1it/s", ",2.35s/it", ", ]"]),
    st.sampled_from(["]", "", "] tail", "]]"]),
).map(lambda p: f"{p[0]}{p[1]}{p[2]}{p[3]}%|{p[4]}|{p[5]}{p[6]}/{p[7]}{p[8]}[{p[9]}<{p[10]}"
                f"{p[11]}{p[12]}")


def check(lines: list[str]) -> None:
    found = tqdm_groups(lines)
    assert found is not None and len(found) == len(lines)
    for line, groups in zip(lines, found, strict=True):
        bar = parse_tqdm(line)
        desc, current, total, elapsed, rate = groups
        assert (bar is None) == (not current)
        if bar is not None:
            assert bar == TqdmBar(desc.strip(), int(current), int(total),
                                  interval_seconds(elapsed), rate.strip())


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(_LINE, _BAR), max_size=30))
def test_crafted_lines_read_as_parse_tqdm(lines: list[str]) -> None:
    """Lines built from bar pieces, odd whitespace and digits included, and bars with a
    field broken or not, line for line."""
    check(lines)


def test_fixture_lines_read_as_parse_tqdm() -> None:
    """Every distinct line of the log fixtures, in one pass (hundreds of them bars)."""
    lines = [line for line in fixture_pool() if "\n" not in line]
    assert sum(parse_tqdm(line) is not None for line in lines) > 100
    check(lines)


def test_a_line_holding_a_newline_is_refused() -> None:
    assert tqdm_groups([" 1%|| 1/9 [00:01<00:09]", "a\nb"]) is None


_HEADS = st.sampled_from(["", "", " ", "(TaskRunner pid=7) ", "(pid=1)", "{", " {", "'", ' "',
                          "(", "\t'"])
_TAILS = st.sampled_from(["", "", " [repeated 3x across cluster]", "]", " repeated]", "x"])


def own_reference(line: str) -> tuple[str, str, str, str, str]:
    """``own_bars``' answer for one line as the per-line checks it replaced gave it."""
    own = ("%|" in line and line[:1] != "(" and line.lstrip()[:1] not in ("{", "'", '"')
           and not (line.endswith("]") and "repeated" in line))
    found = tqdm_groups([line])
    return found[0] if own and found is not None and found[0][1] else ("", "", "", "", "")


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(_HEADS, st.one_of(_LINE, _BAR), _TAILS).map("".join), max_size=30))
def test_own_bars_as_line_by_line(lines: list[str]) -> None:
    """``own_bars`` (one regex pass over the lines holding ``%|``) reads a line as a bar
    exactly when it is its own body, led by neither a brace nor a quote, and a bar."""
    assert own_bars(lines) == [own_reference(line) for line in lines]


def test_own_bars_on_fixture_lines() -> None:
    lines = [line for line in fixture_pool() if "\n" not in line]
    found = own_bars(lines)
    assert sum(bool(g[1]) for g in found) > 100
    assert found == [own_reference(line) for line in lines]
