"""Lines shaped to cost the parser most (a job printing ``{``, ``Step x`` or a nested dict a
million times) are read as cheaply as an ordinary log, and exactly as every line through every
rule reads them.

The cheap ways: a dict opener that the next line fed replaces is not fed
(``probes.logs.line_feed``), a line holding none of ``MARKER_GATES`` skips ``_markers``
(``history.MARKER_GATE``), and the fingerprint walks only lines that may start a dump, reads a
repeated nested dict once (``fingerprint_lines._may_start``, ``fingerprint._literal_dump``'s
memo) and steps over a YAML run's repeated lines. Each is held here to the way it replaced, on
these shapes mixed with real fixture lines, EasyR1's YAML step blocks and open-instruct's
``Metrics`` panels (the state a skipped opener must not be hidden from).
"""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from probes.logs import fingerprint, history
from probes.logs.fingerprint import _read
from probes.logs.history import MetricScan
from probes.logs.line_feed import feed_lines
from probes.logs.lines import split_lines
from probes.logs.parse import parse_log
from tests.probes.logs.test_easyr1_console import step_block
from tests.probes.logs.test_prefilter import assert_same, fixture_lines
from tests.probes.logs.test_rich_panel import panel, step_metrics

PROPERTY = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])

HOSTILE = [
    "{x", "{", "  {", "{ 'a'", "{'a': {", "{x]", "{x]:", "{x}", "{}", "  {x  ", "{x\x1c",
    "'a': 1,", "'a': 1}", "\"a\": 1,", "}", "Step x", "Step 5: x", "Step 5: ", "step: x",
    "===== Step x =====", "Global step x", "iteration x", "  \u2022 Loss: x",
    "{'loss': {'a': [1, {'b': 2}]}, 'grad_norm': [[[[1]]]]}",
    "{'a': " * 30 + "1" + "}" * 30,
    "{'loss': nan, 'grad_norm': inf, 'learning_rate': 1e999, 'epoch': -inf}",
    "step:1 - actor/entropy:nan - actor/grad_norm:inf - critic/score/mean:1e999",
    '{"level": "info", "msg": "hello", "ts": 1700000000}', "Traceback (most recent call last):",
    "x%|", "%|", "a=1 b=2 loss=3", "\x00\x00", "",
]
"""The shapes ``tests/bench/bench_parse.py --fragments`` measures, and near misses of the
opener test (a ``]``/``]:`` end, a closing ``}``, an end ``str.rstrip`` strips but bytes do not)."""


def real_blocks() -> list[str]:
    """Stateful real shapes a skipped line must not be hidden from: an EasyR1 YAML step
    block, an open-instruct panel, a SkyRL header with its dict opening on the next line."""
    return [*step_block(3).splitlines(), *panel(step_metrics(2)).splitlines(),
            "Step 7: ", "{'policy/policy_entropy': '0.5',", " 'trainer/global_step': 7}"]


def pool() -> list[str]:
    return HOSTILE + real_blocks()


@PROPERTY
@given(st.lists(st.tuples(st.integers(min_value=0), st.integers(0, 5)), max_size=150),
       st.sampled_from(["\n", "\r\n", "\r"]))
def test_hostile_mix_equals_reference(picks: list[tuple[int, int]], newline: str) -> None:
    """Hostile shapes in runs (repeated 1-6 times) among real fixture lines and stateful real
    blocks read as every line through every rule reads them (``_parse_reference``)."""
    hostile, real = pool(), fixture_lines()
    lines: list[str] = []
    for pick, repeat in picks:
        source = hostile if pick % 3 else real
        lines += [source[pick % len(source)]] * (repeat + 1)
    assert_same(newline.join(lines), [])


@PROPERTY
@given(st.lists(st.tuples(st.integers(min_value=0), st.integers(0, 5)), max_size=120))
def test_feed_lines_leaves_the_scan_as_feeding_every_line(picks: list[tuple[int, int]]) -> None:
    """``feed_lines`` (which skips superseded dict openers) leaves ``MetricScan`` in the state
    feeding each non-blank line does: the summary, and the open dict, YAML block and panel a
    fold carries to its next increment (``probes.logs.metric_carry``)."""
    source = pool()
    text = "\n".join(line for pick, n in picks for line in [source[pick % len(source)]] * (n + 1))
    raws, lines = split_lines(text, 65536)
    fast, every = MetricScan({}, None, None), MetricScan({}, None, None)
    feed_lines(fast, raws, lines, range(len(lines)), 1)
    for index, line in enumerate(lines):
        if line.strip():
            every.feed(line, raws[index], 1 + index)
    assert (fast.dict_lines, fast.dict_line_no) == (every.dict_lines, every.dict_line_no)
    assert _slots(fast.yaml_step) == _slots(every.yaml_step)
    assert _slots(fast.panel) == _slots(every.panel)
    assert repr(fast.summary(len(lines))) == repr(every.summary(len(lines)))


@pytest.mark.parametrize("after", ["{x}", "{'loss': 1.0}", "  7%|7         | 7/100 [00:01<00:13]"])
def test_a_line_after_a_panels_border_is_offered_to_the_panel(after: str) -> None:
    """A one-line dict or a bar line right after a ``Metrics`` panel's top border is fed as
    ``feed`` feeds it (the panel sees it first), not by ``feed_lines``' short ways: found by
    the property above (a border, then ``{x}``: the short way left the panel open)."""
    border = panel(step_metrics(2)).splitlines()[0]
    text = "\n".join([border, after, "", border, after])
    raws, lines = split_lines(text, 65536)
    fast, every = MetricScan({}, None, None), MetricScan({}, None, None)
    feed_lines(fast, raws, lines, range(len(lines)), 1)
    for index, line in enumerate(lines):
        if line.strip():
            every.feed(line, raws[index], 1 + index)
    assert _slots(fast.panel) == _slots(every.panel)
    assert repr(fast.summary(len(lines))) == repr(every.summary(len(lines)))


def _slots(state: object) -> object:
    """An open YAML block's or panel's fields (both have ``__slots__``), or None."""
    if state is None:
        return None
    return type(state).__name__, [repr(getattr(state, name)) for name in state.__slots__]


def test_a_run_of_openers_leaves_the_last_open() -> None:
    """Of a run of dict openers only the last is fed, and the quoted line after it continues
    that one: the dict read is the last opener's, at its line."""
    text = "{x\n{y\n{'loss': 1.5,\n 'grad_norm': 0.5}\n"
    scan = MetricScan({}, None, None)
    raws, lines = split_lines(text, 65536)
    feed_lines(scan, raws, lines, range(len(lines)), 1)
    assert scan.dict_lines is None
    summary = parse_log(text)
    assert [(p.values, p.line_no) for p in summary.points] == [
        ({"loss": 1.5, "grad_norm": 0.5}, 3)]


@pytest.mark.parametrize("shape", HOSTILE)
def test_marker_gate_changes_nothing(shape: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each shape, and every real fixture line after it, reads the same with ``_markers``
    offered every line (the gate matching everything) as through ``MARKER_GATE``."""
    text = "\n".join([shape] * 3 + fixture_lines()[:4000])
    gated = parse_log(text)
    monkeypatch.setattr(history, "MARKER_GATE", re.compile(""))
    assert repr(parse_log(text)) == repr(gated)


DUMP_A = "{'model': {'path': 'Qwen/Qwen3-8B'}, 'data': {'train_batch_size': 64}}"
DUMP_B = "{'model': {'path': 'meta/Llama-3'}, 'trainer': {'nnodes': 2}}"


@pytest.mark.parametrize("lines", [
    [DUMP_A] * 5,
    [DUMP_A, DUMP_B, DUMP_A],  # the last print of a key wins, remembered or not
    [DUMP_B, DUMP_A, "{'a': {", "'b': 1}}", DUMP_B],
    ["{'bad': {1: nan}"] * 3 + ["{'x': {'y': 1}}"],
    HOSTILE * 2,
])
def test_remembered_dumps_read_as_parsed_each_time(
    lines: list[str], monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The fingerprint read with ``_literal_dump``'s memo equals the one read parsing each
    dump again, gated or walking every line."""
    remembered = repr(_read(lines))
    assert remembered == repr(_read(lines, gated=False))
    monkeypatch.setattr(fingerprint, "_MEMO_CHARS", -1)
    assert repr(_read(lines)) == remembered


def _yaml_dump_each_line(bodies: list[str], start: int, config: dict[str, str]
                         ) -> tuple[int, int]:
    """``fingerprint._yaml_dump`` as it was, every line of the run read (the oracle)."""
    stack: list[tuple[int, str]] = []
    found: dict[str, str] = {}
    nested, index = False, start
    while index < min(len(bodies), start + fingerprint.MAX_DUMP_LINES):
        line = fingerprint._YAML_RE.match(bodies[index])
        if line is None:
            if fingerprint._YAML_ITEM_RE.match(bodies[index]) and index > start:
                index += 1
                continue
            break
        indent, key, value = len(line.group(1)), line.group(2), line.group(3)
        while stack and stack[-1][0] >= indent:
            stack.pop()
        nested = nested or bool(stack)
        dotted = ".".join([*(k for _, k in stack), key])
        if value is None or value.strip() == "":
            stack.append((indent, key))
        else:
            found[dotted] = fingerprint._unquote(value.strip())
        index += 1
    if nested and len(found) >= 4:
        for key, value in found.items():
            fingerprint._put(config, key, value)
        return index, index
    return start + 1, index


YAML_LINES = ["step: x", "trainer:", "  nnodes: 2", "  nnodes: 3", "  n_gpus_per_node: 8",
              "  total_epochs: 3", "    deeper: 1", "model:", "  path: Q", "  - item", "x", ""]


@PROPERTY
@given(st.lists(st.tuples(st.integers(0, len(YAML_LINES) - 1), st.integers(0, 4)), max_size=60))
def test_yaml_run_steps_over_repeats_as_reading_each(picks: list[tuple[int, int]]) -> None:
    """A YAML run's repeated lines (a MiB of ``step: x``) are stepped over, and the run reads
    to the same keys and ends as reading each line does."""
    bodies = [line for pick, n in picks for line in [YAML_LINES[pick]] * (n + 1)]
    for start in range(len(bodies)):
        fast: dict[str, str] = {}
        each: dict[str, str] = {}
        assert fingerprint._yaml_dump(bodies, start, fast) == _yaml_dump_each_line(
            bodies, start, each)
        assert fast == each
