"""The cold parse's shortcuts give what the code they replaced gave.

Kept here as the oracle, as it was: ``own_bars`` (one regex pass over every bar line, now
once per digit shape), ``NeedleFilter.lines``/``groups`` (each skeleton looked up in the hit
set, now by skeleton number), the dict path (every dict through ``parse_pairs``, its plan
looked up again by ``_record``; now HF's one-line dicts by ``quoted_pairs``), ``metric_point``
(``object.__setattr__``) and ``clock_at`` walking every candidate (now not walked when no
skeleton may hold a time). ``parse_log`` with all of them swapped back must give the same
summary, field for field, on every fixture, on fixtures repeated and shuffled, and on drawn
logs: HF dicts of varying keys and values (NaN, infinities, strings, calls, long numbers),
bars, stamps (non-ASCII digits too), tracebacks, binary junk and huge lines.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from itertools import compress, islice, repeat
from math import isfinite
from operator import contains
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from probes.logs import bar_lines, lines, prefilter, recent, scan_dicts, scan_patterns
from probes.logs.bar_lines import _NO_BAR, _OWN_BAR_LINES_RE, own_bars
from probes.logs.hf_banner import hf_epoch_step
from probes.logs.history import MetricScan
from probes.logs.lines import _NUMBER_CAP, parse_pairs, quoted_pairs, split_lines
from probes.logs.parse import parse_log
from probes.logs.precision import precise_merge
from probes.logs.prefilter import NeedleFilter, shared_skeletons, skeletons_of
from probes.logs.scan_core import metric_point
from probes.models import MetricPoint
from tests.probes.logs.test_recent import LOG_FIXTURES, fixture_pool

FIXTURES = Path(__file__).parents[2] / "fixtures"
PROPERTY = settings(max_examples=150, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


# --- the replaced code, as it was -------------------------------------------------------

def own_bars_before(lines: Sequence[str]) -> list[tuple[str, str, str, str, str]]:
    found = [_NO_BAR] * len(lines)
    marked = list(compress(range(len(lines)), map(contains, lines, repeat("%|"))))
    if not marked:
        return found
    joined = "\n".join([lines[at] for at in marked])
    groups = _OWN_BAR_LINES_RE.findall(joined)
    if len(groups) != len(marked):
        return found
    for at, bar in zip(marked, groups, strict=True):
        if bar[1]:
            line = lines[at]
            if not (line[-1:] == "]" and "repeated" in line):
                found[at] = bar
    return found


def lines_before(self: NeedleFilter, lines: Sequence[str], start: int = 0,
                 stop: int | None = None) -> list[int] | None:
    whole = start == 0 and stop is None
    if not whole and not range(len(lines))[start:stop]:
        return lines_before(self, ())
    found = self._hits(lines)
    if found is None:
        return None
    copy, hits = found
    skeletons = copy.skeletons
    if not hits:
        return []
    if whole:
        return list(compress(range(len(skeletons)), map(hits.__contains__, skeletons)))
    span = range(len(skeletons))[start:stop]
    return list(compress(range(len(span)),
                         map(hits.__contains__, islice(skeletons, span.start, span.stop))))


def groups_before(self: NeedleFilter, lines: Sequence[str]) -> dict[bytes, list[int]] | None:
    found = self._hits(lines)
    if found is None:
        return None
    copy, hits = found
    skeletons = copy.skeletons
    grouped: dict[bytes, list[int]] = {skeleton: [] for skeleton in hits}
    if hits:
        for index in compress(range(len(skeletons)), map(hits.__contains__, skeletons)):
            grouped[skeletons[index]].append(index)
    return grouped


def metric_point_before(step: int, values: dict[str, float], line_no: int,
                        at: datetime | None) -> MetricPoint:
    point = MetricPoint.__new__(MetricPoint)
    object.__setattr__(point, "__dict__", {"step": step, "values": values, "line_no": line_no,
                                           "wall_time": at})
    object.__setattr__(point, "__pydantic_fields_set__", set(MetricPoint.model_fields))
    object.__setattr__(point, "__pydantic_extra__", None)
    object.__setattr__(point, "__pydantic_private__", None)
    return point


def read_dict_before(self: MetricScan, text: str) -> None:
    if text.count("{") > 1:
        return
    pairs = parse_pairs(text)
    if pairs:
        self._on_dict(pairs, self.dict_line_no)


def on_dict_before(self: MetricScan, pairs: dict[str, float], line_no: int) -> None:
    if "train_runtime" in pairs:
        self.finished = True
        if self.finish_seq is None:  # the bar order the end came at (not a shortcut)
            self.finish_seq = self.bar_seq
        self._mark("hf")
        return
    if self.header is not None:
        step, stamp = self.header
        self.header = None
        merged = precise_merge({**(self.pending_status or {}), **(self.pending_reward or {})},
                               pairs)  # the status line's full precision kept (SkyRL v0.3)
        self.pending_reward, self.pending_status = None, None
        self._mark("skyrl")
        self._record(step, merged, line_no, stamp)
        return
    is_eval, step_keys, plan = self._kind(tuple(pairs))
    if is_eval:
        return
    for key in step_keys:
        explicit = pairs[key]
        if isfinite(explicit) and 0 <= explicit < 1e15:
            self._record(int(explicit), pairs, line_no, None)
            return
    if plan:
        self._mark("hf")
        self._on_hf_dict(pairs, line_no)  # type: ignore[call-arg]


def on_hf_dict_before(self: MetricScan, pairs: dict[str, float], line_no: int) -> None:
    anchor, prev = self.hf_anchor, self.hf_prev
    if anchor is None and prev is None:
        # A bar-less dict's step by its epoch (``HfBanner``, not a shortcut: the same rule).
        by_epoch = hf_epoch_step(self.hf_banner, self.banner_total, pairs.get("epoch"))
        if by_epoch is not None:
            self._record(by_epoch, pairs, line_no, None)
            return
        self.hf_unanchored.append((pairs, line_no))
        return
    if prev is None:
        step = max(1, anchor or 0)
    else:
        step = max(1, prev + 1) if anchor is None else max(1, anchor, prev + 1)
    if anchor is not None:  # a bar lagging its dicts (the rule, not a shortcut: the same one)
        step = self._epoch_ahead(pairs, step) or step
    # Which bar the dict followed (the training bar's choice, not a shortcut: the same rule).
    anchored = self.bars.get(self.hf_anchor_key) if self.hf_anchor_key else None
    if anchor is not None and anchored is not None:
        anchored.anchored += 1
    for back, (early, early_line) in enumerate(reversed(self.hf_unanchored), start=1):
        if step - back >= 1:
            self._record(step - back, early, early_line, None, numbered=False)
    self.hf_unanchored.clear()
    self.hf_prev = step
    self._record(step, pairs, line_no, None)


def record_before(self: MetricScan, step: int, raw: dict[str, float], line_no: int,
                  at: datetime | None, *_plan: object, numbered: bool = True) -> bool:
    if self._skimming:
        return False
    values = {canonical: raw[name] for canonical, name in self._plan(raw)}
    if not values:
        return False
    if numbered:  # a restarted run's new segment (the rule, not a shortcut: the same one)
        self._rewind(step)
    self.points.pop(step, None)
    self.points[step] = metric_point_before(step, values, line_no, at)
    self.top = step if self.top is None else max(self.top, step)
    return True  # whether a point was recorded, as MetricScan._record says it


@contextmanager
def code_before() -> Iterator[None]:
    """Every replaced function swapped back in (the whole-parse oracle)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(recent, "own_bars", own_bars_before)
        patch.setattr(recent, "held_skeletons", lambda lines: None)  # clock_at walks
        patch.setattr(NeedleFilter, "lines", lines_before)
        patch.setattr(NeedleFilter, "groups", groups_before)
        patch.setattr(MetricScan, "_read_dict", read_dict_before)
        patch.setattr(MetricScan, "_on_dict", on_dict_before)
        patch.setattr(MetricScan, "_on_hf_dict", on_hf_dict_before)
        patch.setattr(MetricScan, "_record", record_before)
        yield


def assert_same(text: str | bytes, aliases: Mapping[str, str] | None = None) -> None:
    fast = parse_log(text, aliases=aliases, mtime=datetime(2025, 3, 1))
    with code_before():
        slow = parse_log(text, aliases=aliases, mtime=datetime(2025, 3, 1))
    assert repr(fast.model_dump()) == repr(slow.model_dump())  # repr: NaN == NaN


# --- whole parses ------------------------------------------------------------------------

@pytest.mark.parametrize("path", LOG_FIXTURES, ids=lambda p: str(p.relative_to(FIXTURES)))
def test_fixture_parses_as_before(path: Path) -> None:
    """Each fixture as bytes, and four times over (long enough that bars are skimmed)."""
    data = path.read_bytes()
    assert_same(data)
    assert_same(data * 4)


@PROPERTY
@given(st.lists(st.integers(min_value=0), min_size=50, max_size=1500))
def test_shuffled_fixture_lines_parse_as_before(picks: list[int]) -> None:
    pool = fixture_pool()
    assert_same("\n".join(pool[i % len(pool)] for i in picks))


def test_the_bar_a_dict_followed_is_chosen_as_before() -> None:
    """Two desc-less bars, a dict after the less redrawn: the oracle anchors it the same way
    (a draw of the property test above failed while the oracle's HF dict did not anchor)."""
    bars = ("\n 26%|██▋       | 25/95 [00:01<00:05, 13.59it/s]" * 3
            + "\n  5%|▌         | 1/20 [00:00<00:02,  9.40it/s]")
    assert_same("DeepSpeedEngine configuration:" + bars
                + "\n{'loss': '4.318', 'grad_norm': '1.211', 'epoch': '0.1158'}")
    end = "\n{'train_runtime': 20.0, 'train_loss': 1.0}"
    assert_same(bars + end + "\n  4%|▌         | 2/50 [00:01<00:02,  2.00it/s]")


_KEYS = ["loss", "grad_norm", "learning_rate", "epoch", "eval_loss", "train_runtime", "step",
         "global_step", "rewards/r/mean", "completions/mean_length", "lr", "a b", "k{", 'k"',
         "", "x" * 257, "num_tokens", "reward"]
_VALUES = ["1.5", "'1.5'", "'-0.09564'", "5e-05", "'5e-05'", "nan", "'nan'", "inf", "'-inf'",
           "'x'", "np.float64(0.3)", "'1_000'", "1" * (_NUMBER_CAP + 1), "'" + "2" * _NUMBER_CAP
           + "'", "'٣'", "' 1.5 '", "True", "'12'", "7", "None", "'1.2.3'"]
_JUNK = ["\x00\x01\xff", "\x1b[31mred\x1b[0m", "(TaskRunner pid=12) ", "\u2028", "\x85",
         "Traceback (most recent call last):\n  File \"x.py\", line 1\nValueError: boom",
         "CUDA out of memory", "2025-03-01 10:00:01 INFO step", "INFO ١١-٣٠ ١٥:٤٥:١٠ x",
         "  Total optimization steps = 300", "Saving model checkpoint to /c/checkpoint-5",
         "x" * 70000, "{'loss': 1.5, 'nested': {'a': 1}}", "Step 5: {'reward': 0.5}"]


def drawn_log(seed: int, steps: int) -> str:
    """HF steps (a bar redraw, a one-line dict of a few layouts, quoted values or not), with
    junk, stamps, tracebacks and huge lines between."""
    rng = random.Random(seed)
    layouts = [rng.sample(_KEYS, rng.randrange(1, 6)) for _ in range(rng.randrange(1, 4))]
    quoted = rng.random() < 0.6
    total = rng.choice([steps, steps + 50, 1000])
    out = [f"  Total optimization steps = {total}"] if rng.random() < 0.5 else []
    for step in range(1, steps + 1):
        if rng.random() < 0.9:
            out.append(f"\r {100 * step // total:3d}%|#  | {step}/{total} "
                       f"[00:{step % 60:02d}<00:10, {rng.choice(['8.1it/s', '2s/it', ''])}]")
        keys = rng.choice(layouts)
        values = [f"'{rng.random():.4g}'" if quoted else f"{rng.random():.4g}" for _ in keys]
        if rng.random() < 0.15:
            values[rng.randrange(len(values))] = rng.choice(_VALUES)
        out.append("{" + ", ".join(f"'{k}': {v}" for k, v in zip(keys, values, strict=True))
                   + "}")
        if rng.random() < 0.05:
            out.append(rng.choice(_JUNK))
    return rng.choice(["\n", "\r\n"]).join(out)


@PROPERTY
@given(st.integers(min_value=0, max_value=10**9), st.integers(min_value=1, max_value=400))
def test_drawn_hf_logs_parse_as_before(seed: int, steps: int) -> None:
    assert_same(drawn_log(seed, steps))
    assert_same(drawn_log(seed, steps).encode("utf-8", "surrogatepass"),
                aliases={"num_tokens": "tokens"})


# --- the pieces --------------------------------------------------------------------------

_PIECES = ["0", "1", "9", "12", "-", "+", ".", "e", "E", "-5", "_", "nan", "inf", "NaN",
           "Infinity", " ", "\t", "٣", "x", "True", "F", "(", ")", "np.float64(", "'", '"',
           "\\", "{", "}", "1" * (_NUMBER_CAP - 2), "2" * _NUMBER_CAP, "3" * (_NUMBER_CAP + 1),
           ",", ": ", ", ", "\n", "\x85", "\u3000"]
_PIECE_VALUES = st.lists(st.sampled_from(_PIECES), max_size=5).map("".join)
_PIECE_KEYS = st.one_of(st.sampled_from(
    ["loss", "epoch", "a b", "k{", 'k"', "", "x" * 256, "x" * 257, "a\\b", "a:b", "\n", "}"]),
    st.text(max_size=5))


def parse_pairs_as_read(text: str) -> dict[str, float] | None:
    """What ``MetricScan._read_dict`` read of ``text`` before: None for a nested dict."""
    return None if text.count("{") > 1 else parse_pairs(text)


@settings(max_examples=3000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(_PIECE_KEYS, _PIECE_VALUES, st.sampled_from(["'", "", '"'])),
                max_size=5),
       st.sampled_from([(", ", ": "), (",", ":"), (", ", ":  ")]),
       st.sampled_from(["{", " {", "{ "]), st.sampled_from(["}", " }", "} "]))
def test_quoted_pairs_reads_what_parse_pairs_reads(
    pairs: list[tuple[str, str, str]], seps: tuple[str, str], opening: str, closing: str,
) -> None:
    """Dicts near both shapes (keys the regex stops at, values on every edge of ``float``
    and the cap, other quotes and separators): where ``quoted_pairs`` reads one, it reads
    what ``parse_pairs`` reads."""
    text = opening + seps[0].join(f"'{k}'{seps[1]}{q}{v}{q}" for k, v, q in pairs) + closing
    got = quoted_pairs(text)
    if got is not None:
        assert repr(got) == repr(parse_pairs_as_read(text))


@pytest.mark.parametrize("value", ["1" * (_NUMBER_CAP - 1), "1" * _NUMBER_CAP,
                                   "1" * (_NUMBER_CAP + 1), " " + "1" * (_NUMBER_CAP - 1)])
@pytest.mark.parametrize("shape", ["{{'a': '{}'}}", "{{'a': {}}}", "{{'ab': '1', 'a': '{}'}}",
                                   "{{'ab': 1, 'a': {}}}", "{{'a': 1, 'b': '{}'}}"])
def test_quoted_pairs_at_the_cap(shape: str, value: str) -> None:
    """A value of the cap's length or one more, alone or after another pair, either shape."""
    text = shape.format(value)
    got = quoted_pairs(text)
    assert got is None or repr(got) == repr(parse_pairs_as_read(text))


def test_quoted_pairs_reads_the_hf_fixtures() -> None:
    """Every one-line HF/TRL dict of the fixtures but the ones holding no number (the
    shortcut is taken where it should be)."""
    dicts = [line for line in fixture_pool() if line.startswith("{'") and line.endswith("}")]
    read = [line for line in dicts if quoted_pairs(line) is not None]
    assert len(read) > 100
    assert all(repr(quoted_pairs(line)) == repr(parse_pairs(line)) for line in read)


def digit_variants(line: str, rng: random.Random, count: int) -> list[str]:
    """``line`` with its ASCII digits redrawn: lines of one digit shape."""
    return ["".join(rng.choice("0123456789") if c.isascii() and c.isdigit() else c
                    for c in line) for _ in range(count)]


_BAR_PIECES = st.sampled_from([
    "", " ", "\t", "\u2028", "Map", "Training", ":", "%|", "|", "#", "██", " 10", "100", "5",
    "/", "20", "[", "]", "<", ",", "00:01", "1:02:03", "2d, 1:00:00", "?", "8.1it/s", "2s/it",
    "x" * 230, "(pid=1) ", "{", "'", "١٢", " [repeated 3x across cluster]", "\n",
])


@PROPERTY
@given(st.lists(st.lists(_BAR_PIECES, max_size=20).map("".join), max_size=12),
       st.integers(min_value=0, max_value=10**6))
def test_own_bars_as_before(drawn: list[str], seed: int) -> None:
    """Drawn lines, each with digit variants of it mixed in (one shape, other digits)."""
    rng = random.Random(seed)
    mixed = [v for line in drawn for v in [line, *digit_variants(line, rng, 3)]]
    rng.shuffle(mixed)
    assert own_bars(mixed) == own_bars_before(mixed)


def perturbed(line: str, rng: random.Random) -> str:
    """``line`` with a few characters redrawn among digits and the bar's own punctuation
    (so that lines of near shapes meet in one call)."""
    chars = list(line)
    for _ in range(rng.randrange(1, 4)):
        if chars:
            chars[rng.randrange(len(chars))] = rng.choice("0123456789:%|/[<,]. d?")
    return "".join(chars)


@PROPERTY
@given(st.integers(min_value=0, max_value=10**9))
def test_own_bars_on_near_shapes_as_before(seed: int) -> None:
    """Bar lines with a character or three redrawn, each with digit variants."""
    rng = random.Random(seed)
    bars = ["  5%|#  | 1/20 [00:01<00:19, 1.00it/s]", "Map: 10%|##| 100/1000 [1:02:03<?]",
            "Training:  50%|█████     | 50/100 [2d, 1:00:00<00:10, 2.35s/it]"]
    mixed = [v for _ in range(30) for line in [perturbed(rng.choice(bars), rng)]
             for v in [line, *digit_variants(line, rng, 2)]]
    assert own_bars(mixed) == own_bars_before(mixed)


def test_own_bars_on_fixture_lines_as_before() -> None:
    rng = random.Random(7)
    pool = [v for line in fixture_pool() if "%|" in line for v in digit_variants(line, rng, 2)]
    assert own_bars(pool) == own_bars_before(pool)
    assert sum(bool(bar[1]) for bar in own_bars(pool)) > 100


@PROPERTY
@given(st.lists(st.integers(min_value=0), min_size=1, max_size=600),
       st.integers(min_value=0, max_value=700), st.integers(min_value=0, max_value=700))
def test_needle_filters_as_before(picks: list[int], start: int, stop: int) -> None:
    """Every filter a parse runs, over fixture lines (with more than 256 distinct skeletons
    or not), whole and in windows, its lines and groups."""
    pool = fixture_pool()
    text_lines = [pool[i % len(pool)] for i in picks]
    filters = [recent.MARKER_LINES, recent.ITERATION_LINES, scan_patterns.METRIC_LINES,
               *_parse_filters()]
    with shared_skeletons(text_lines):
        for needle in filters:
            assert needle.lines(text_lines) == lines_before(needle, text_lines)
            assert (needle.lines(text_lines, start, stop)
                    == lines_before(needle, text_lines, start, stop))
            assert needle.groups(text_lines) == groups_before(needle, text_lines)


def _parse_filters() -> list[NeedleFilter]:
    from probes.logs import faults, fingerprint_lines, outcome

    found = [value for module in (faults, fingerprint_lines, outcome, prefilter)
             for value in vars(module).values() if isinstance(value, NeedleFilter)]
    assert found
    return found


def test_needle_filters_past_256_skeletons() -> None:
    """Over 256 distinct skeletons the numbers are a list, not bytes: the same lines."""
    text_lines = [f"{'ab' * n} {{'loss': 1}}" if n % 3 else f"Total {'c' * n}"
                  for n in range(600)]
    with shared_skeletons(text_lines):
        copy = skeletons_of(text_lines)
        assert copy is not None and isinstance(copy.ids()[1], list)
        for needle in (scan_patterns.METRIC_LINES, recent.MARKER_LINES):
            assert needle.lines(text_lines) == lines_before(needle, text_lines)
            assert needle.lines(text_lines, 100, 400) == lines_before(needle, text_lines,
                                                                      100, 400)
            assert needle.groups(text_lines) == groups_before(needle, text_lines)


_STAMPS = ["2025-03-01 10:00:01 INFO", "[2025-03-01 10:00:02] x", "INFO 11-30 15:45:10 x",
           "I1130 15:45:11 x", "INFO ١١-٣٠ ١٥:٤٥:١٠ x", "INFO 11-30 1٥:45:10 x",
           "(pid=3) 2025-03-01 10:00:03 y", "  3%|#  | 1/30 [00:01<00:10]", "{'loss': 1}",
           "W0101 00:00:0 short", "x 10:00:00", "E" + "١" * 4 + " ١٥:٤٥:١٠"]


@PROPERTY
@given(st.lists(st.sampled_from(_STAMPS), min_size=1, max_size=40),
       st.integers(min_value=0, max_value=39))
def test_clock_at_as_walked(drawn: list[str], index: int) -> None:
    """The clock read within a parse (skeletons at hand) is the one walked back line by line,
    with stamps of non-ASCII digits, too."""
    _, text_lines = split_lines("\n".join(drawn), 65536)
    index %= len(text_lines)
    candidates = scan_patterns.METRIC_LINES.lines(text_lines)
    walked = recent.clock_at(text_lines, index, datetime(2025, 3, 1), inclusive=True,
                             among=candidates)
    with shared_skeletons(text_lines):
        held = recent.clock_at(text_lines, index, datetime(2025, 3, 1), inclusive=True,
                               among=candidates)
    assert held == walked


def test_a_stampless_tail_is_not_walked(monkeypatch: pytest.MonkeyPatch) -> None:
    """No skeleton may hold a time (the bench's HF log): no line is looked at."""
    _, text_lines = split_lines("\n".join(["  1%|#  | 1/9 [00:01<00:09]", "{'loss': 1}"] * 50),
                                65536)
    def looked_at(line: str) -> None:
        pytest.fail(f"looked at {line!r}")

    monkeypatch.setattr(recent, "read_stamp", looked_at)
    monkeypatch.setattr(recent, "strip_ray_prefix", looked_at)
    with shared_skeletons(text_lines):
        assert recent.clock_at(text_lines, 99, None, inclusive=True) is None


def test_metric_point_as_before() -> None:
    """The same model, field for field, and the same as a validated one."""
    at = datetime(2025, 3, 1, tzinfo=UTC)
    fast, slow = metric_point(3, {"loss": 1.0}, 7, at), metric_point_before(3, {"loss": 1.0},
                                                                           7, at)
    assert fast == slow == MetricPoint(step=3, values={"loss": 1.0}, line_no=7, wall_time=at)
    assert fast.model_fields_set == slow.model_fields_set
    assert fast.__pydantic_extra__ is None and fast.__pydantic_private__ is None
    assert fast.model_copy(update={"step": 4}).step == 4


def test_lines_module_names_used() -> None:
    """The oracle patches the names the fast path reads through."""
    assert vars(recent)["own_bars"] is bar_lines.own_bars
    assert vars(scan_dicts)["quoted_pairs"] is lines.quoted_pairs
