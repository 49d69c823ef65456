"""The per-line readers' shortcuts read what their plain versions read.

``parse_pairs`` reads a plain number without ``parse_number``; the reference below is every
pair through ``parse_number``, as before. Values are drawn to sit on the shortcut's edges:
signs, points, exponents, underscores, NaN and infinities, quotes of either kind or mismatched,
whitespace, calls (``np.float64(x)``), non-ASCII digits, lengths about the cap."""

from __future__ import annotations

from bisect import bisect_right

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from probes.logs import fault_patterns, recent
from probes.logs.lines import _NUMBER_CAP, _PAIR_RE, parse_number, parse_pairs, strip_ray_prefix
from probes.logs.step_intervals import MAX_INTERVALS, StepIntervals

PROPERTY = settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])

PIECES = ["0", "1", "9", "12", "-", "+", ".", "e", "E", "-5", "_", "nan", "inf", "NaN",
          "Infinity", " ", "\t", "٣", "x", "True", "F", "(", ")", "np.float64(", "'", '"',
          "1" * (_NUMBER_CAP - 2), "2" * _NUMBER_CAP, "3" * (_NUMBER_CAP + 1), ","]


def reference_pairs(text: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for key, raw in _PAIR_RE.findall(text):
        number = parse_number(raw)
        if number is not None:
            out[key] = number
    return out


values = st.lists(st.sampled_from(PIECES), min_size=1, max_size=6).map("".join)
quoted = st.tuples(st.sampled_from(["", "'", '"']), values, st.sampled_from(["", "'", '"'])
                   ).map("".join)


@PROPERTY
@given(st.lists(st.tuples(st.sampled_from(["loss", "grad_norm", "epoch", "a b", "k1"]), quoted),
                max_size=6))
def test_parse_pairs_as_through_parse_number(pairs: list[tuple[str, str]]) -> None:
    text = "{" + ", ".join(f"'{key}': {value}" for key, value in pairs) + "}"
    assert repr(parse_pairs(text)) == repr(reference_pairs(text))


@PROPERTY
@given(st.text(alphabet="'\":{}, 0123456789.-+e_nafiTF()x\n\t٣", max_size=120))
def test_parse_pairs_on_any_text(text: str) -> None:
    assert repr(parse_pairs(text)) == repr(reference_pairs(text))


def reference_add(starts: list[int], ends: list[int], lo: int, hi: int | None = None) -> None:
    """``StepIntervals.add`` as it was (no shortcut for a run going on)."""
    hi = lo if hi is None else hi
    at = bisect_right(starts, lo) - 1
    if at >= 0 and ends[at] >= lo - 1:
        lo = starts[at]
    else:
        at += 1
    end = at
    while end < len(starts) and starts[end] <= hi + 1:
        hi = max(hi, ends[end])
        end += 1
    starts[at:end], ends[at:end] = [lo], [hi]
    if len(starts) > MAX_INTERVALS:
        del starts[0], ends[0]


@PROPERTY
@given(st.lists(st.tuples(st.integers(0, 600), st.one_of(st.none(), st.integers(0, 40))),
                max_size=700),
       st.booleans())
def test_step_intervals_as_before(adds: list[tuple[int, int | None]], runs: bool) -> None:
    """Random adds, or runs of consecutive steps with gaps (past ``MAX_INTERVALS``): the
    intervals are those of the former ``add``."""
    got, starts, ends = StepIntervals(), [], []
    step = 0
    for drawn, width in adds:
        step += 1 if drawn % 3 else 2
        lo = step if runs else drawn
        hi = None if width is None else lo + width - 20
        got.add(lo, hi)
        reference_add(starts, ends, lo, hi)
        assert got.intervals() == tuple(zip(starts, ends, strict=True))


SIGNALS = [*(signal for _, signal in fault_patterns._BENIGN),
           *(signal for _, signal in fault_patterns._RULES), fault_patterns._PROB_DIFF,
           fault_patterns._ASYNC_TIMEOUT, fault_patterns.SIGABRT, fault_patterns.CHATTER,
           fault_patterns.BRING_UP]


@pytest.mark.parametrize("index", range(len(SIGNALS)))
@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(data=st.data())
def test_every_signal_match_holds_a_needle(index: int, data: st.DataObject) -> None:
    """A signal's needles gate its regex (``Signal.search``): any text its regex matches
    holds one of them, lower-cased, so the gate never hides a match (tightened needles
    such as SIGTERM's `` terminated`` included)."""
    signal = SIGNALS[index]
    text = data.draw(st.from_regex(signal.pattern, fullmatch=True))
    assert any(needle in text.lower() for needle in signal.needles)
    assert fault_patterns.may_signal(text.lower())


DICT_LINES = ["{'a': 1,", " 'b': 2,", " 'c': 3}", "{'x': 1}", "'k': 'v'", "'k': '}'",
              "2026-02-12 | INFO | Step 3: {'a': 1,", "Step 4: {'a': 1}", "noise",
              "(TaskRunner pid=1) {'q': 1,", "(TaskRunner pid=1)  'r': 2}", "  'Total': 5,",
              "", "{", "}", "\"k\": 1,"]


@PROPERTY
@given(st.lists(st.sampled_from(DICT_LINES), max_size=80), st.integers(1, 12), st.data())
def test_dict_memo_answers_as_the_walk_back(lines: list[str], run: int,
                                            data: st.DataObject) -> None:
    """``_DictMemo.inside`` for quoted lines asked in ascending order (the skimmed ones) is
    ``_inside_dict`` of each, a short ``_MAX_DICT_RUN`` included (the bound on the walk)."""
    quoted = [i for i, line in enumerate(lines)
              if strip_ray_prefix(line).lstrip()[:1] in ("'", '"')]
    asked = sorted(data.draw(st.sets(st.sampled_from(quoted))) if quoted else [])
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(recent, "_MAX_DICT_RUN", run)
        memo = recent._DictMemo()
        assert [memo.inside(lines, i) for i in asked] == [
            recent._inside_dict(lines, i) for i in asked]
