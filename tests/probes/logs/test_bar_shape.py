"""A line with ``%|`` that is no progress bar is skipped by the prefilters; every bar is read.

A job printing ``x%|`` or ``%|`` over and over (a tqdm-like fragment, no step) cost about 2.5 s
of CPU per 1 MiB tail, some 14 us a line, against 0.1 s for a tail of real tqdm redraws: the
``%|`` needle of ``METRIC_LINES`` and ``recent.MARKER_LINES`` made each such line a candidate,
so it was skimmed before the suffix and then fed to ``MetricScan.feed`` in the whole-tail pass,
through every gate of ``feed`` and ``_markers``. Every reader of a bar needs ``%|`` then
``|``, ``/``, ``[``, ``<``, ``]`` in order (``bar_lines.BAR_SHAPE``); the prefilters now keep
a ``%|`` line by that shape. The tests: no such line reaches ``feed`` or ``skim``; every line
any bar reader reads is kept; and tails mixing such lines with real bars and steps read as the
per-line reference reads them (``_parse_reference``), cold and folded.
"""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from probes.logs import bar_lines, history, recent
from probes.logs.bar_lines import lightning_status, parse_tqdm, postfix_loss
from probes.logs.lines import strip_ray_prefix
from probes.logs.parse import _parse_reference, parse_log
from probes.logs.scan_patterns import METRIC_LINES
from tests.probes.logs.test_incremental import assert_same as assert_folded
from tests.probes.logs.test_incremental import fold
from tests.probes.logs.test_recent import assert_same

PROPERTY = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
MIXES = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])

BARS = [
    " 45%|####      | 9/20 [00:01<00:02]",
    " 45%|####      | 9/20 [00:01<00:02,  3.20it/s]",
    "Epoch 0:  47%|####7     | 7/15 [06:19<07:13, reduced_train_loss=11.50, global_step=5.000, "
    "consumed_samples=12288.0, train_step_timing in s=49.50]",
    "Epoch 1:  30%|###       | 300/1000 [05:00<11:40, 1.00it/s, v_num=0, train_loss=1.230]",
    "Steps:  10%|#         | 100/1000 [01:40<15:00,  1.00s/it, step_loss=0.123, lr=1e-05]",
    "1|12|Loss: 2.5:  12%|#2        | 12/100 [00:30<03:40,  2.50s/it]",
    "(TaskRunner pid=1) Training Progress:  10%|#         | 10/100 [01:00<09:00,  6.00s/it]",
]
GARBAGE = ["%|", "x%|", "%|%|%|", "50%|", "a%|b|c", "x%| 9/20", "%| | 1/2 [", "|%|/[<]",
           "]<[/|%|", "%|x|y/z[w<v", "45%|#### | 9/20 00:01<00:02]", "%%||//[[<<]]"]
HF_STEPS = [
    "{'loss': 1.25, 'grad_norm': 0.5, 'learning_rate': 1e-05, 'epoch': 0.1}",
    "***** Running training *****", "  Total optimization steps = 20",
    "Saving model checkpoint to out/checkpoint-10",
]


def _read_by_a_bar_reader(line: str) -> bool:
    body = strip_ray_prefix(line)
    return (parse_tqdm(body) is not None or bar_lines._LIGHTNING_POSTFIX_RE.search(body) is not None
            or lightning_status(body) is not None or postfix_loss(body) is not None
            or any(groups[1] for groups in bar_lines.own_bars([line])))


def test_a_tail_of_bar_fragments_feeds_and_skims_no_line(monkeypatch: pytest.MonkeyPatch) -> None:
    """1 MiB of ``x%|`` and ``%|`` lines (about 300,000): before, each was skimmed and fed."""
    touched: list[int] = []
    real_feed, real_skim = history.MetricScan.feed, history.MetricScan.skim

    def feed(self: history.MetricScan, line: str, raw: str, line_no: int) -> None:
        touched.append(line_no)
        real_feed(self, line, raw, line_no)

    def skim(self: history.MetricScan, line: str, raw: str, line_no: int, **kw: Any) -> None:
        touched.append(line_no)
        real_skim(self, line, raw, line_no, **kw)

    monkeypatch.setattr(history.MetricScan, "feed", feed)
    monkeypatch.setattr(history.MetricScan, "skim", skim)
    text = "x%|\n%|\n" * (1 << 17)
    for log_start in (True, False):
        summary = parse_log(text, log_start=log_start, head="" if not log_start else None)
        assert not summary.points and summary.line_count == 1 << 18
    assert touched == []


TEMPLATE = [["", "(pid=1) ", "  "], ["", "Epoch 0", "Epoch 1", "1|12|Loss: 2.5", "Steps"],
            ["", ":", ": :"], [" ", ""], ["45", "7", "100"], ["%|"], ["####", "", "\u2588 |"],
            ["|"], [" ", ""], ["9/20", "300/1000", "12/"], [" ", ""], ["[", "("],
            ["00:01", "1d, 02:03", ""], ["<", ""], ["00:02", "?"],
            ["", ",  3.20it/s", ", 1.00s/it, step_loss=0.123", ", v_num=0, train_loss=1.2",
             ", reduced_train_loss=11.5, global_step=5.000", ",", ", loss=0.5"],
            ["]", "", "]]"], ["", "{'loss': 1.0}", " x%|", " | 3/4 [1<2]"]]
"""A bar's parts in order (``desc: pct%|fill| cur/tot [elapsed<remain, rate, post]``), each
with near misses: lines drawn from it are bars of every reader's, or nearly."""
SPARE = ["%|", "|", "/", "[", "<", "]", ",", " ", ":", "0", "#", "x", "loss="]


@st.composite
def bar_like(draw: st.DrawFn) -> str:
    """A bar drawn part by part, some parts dropped, swapped or doubled."""
    parts = []
    for choices in TEMPLATE:
        part = draw(st.sampled_from(choices))
        change = draw(st.integers(0, 11))
        if change == 0:
            part = ""
        elif change == 1:
            part = draw(st.sampled_from(SPARE))
        elif change == 2:
            part += draw(st.sampled_from(SPARE))
        parts.append(part)
    return "".join(parts)


@PROPERTY
@given(bar_like())
def test_every_line_a_bar_reader_reads_is_kept(line: str) -> None:
    """``BAR_SHAPE`` names more lines than are bars, never fewer."""
    if _read_by_a_bar_reader(line):
        assert METRIC_LINES.lines([line]) == [0], line
        assert recent.MARKER_LINES.lines([line]) == [0], line


@PROPERTY
@given(bar_like())
def test_a_line_the_prefilter_drops_reads_as_no_line(line: str) -> None:
    """A line ``METRIC_LINES`` drops changes nothing the per-line reference reads, between
    steps and bars of its own (its place taken by nothing)."""
    if METRIC_LINES.lines([line]) == []:
        around = "\n".join([BARS[1], HF_STEPS[0]])
        assert repr(_parse_reference(f"{around}\n{line}\n{around}\n")) == repr(
            _parse_reference(f"{around}\n\n{around}\n"))


@pytest.mark.parametrize("line", BARS)
def test_each_real_bar_is_kept(line: str) -> None:
    assert _read_by_a_bar_reader(line), line  # (the reader list above reads it)
    assert METRIC_LINES.lines(["x%|", line, "%|"]) == [1]


def _mixed(rng: random.Random, count: int) -> str:
    lines: list[str] = []
    step = 0
    for _ in range(count):
        pick = rng.random()
        if pick < 0.5:
            lines.append(rng.choice(GARBAGE) + rng.choice(["", "zz", " [x]", " 3/4"]))
        elif pick < 0.8:
            step += 1
            lines.append(rng.choice(BARS).replace("9/20", f"{step}/400"))
        else:
            lines.append(rng.choice(HF_STEPS))
    return "\n".join(lines) + "\n"


@MIXES
@given(st.integers(0, 10_000), st.integers(50, 600))
def test_tails_of_fragments_and_bars_read_as_the_reference(seed: int, count: int) -> None:
    text = _mixed(random.Random(seed), count)
    assert_same(text)
    cuts = sorted(random.Random(seed + 1).sample(range(1, len(text)), 3))
    chunks = [text[a:b].encode() for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]
    assert_folded(fold(chunks)[0], parse_log(text))


def test_a_long_tail_of_fragments_around_steps_reads_as_the_reference() -> None:
    """Steps and bars far apart, 40,000 fragment lines between: the suffix passes that skip
    the fragments find the same steps, bars and markers as every line read."""
    rng = random.Random(5)
    text = (_mixed(rng, 300) + "x%|\n%|\n" * 20_000 + _mixed(rng, 300)
            + "".join(rng.choice(GARBAGE) + "\n" for _ in range(20_000)))
    summary = parse_log(text)
    assert summary.points  # (the HF dicts, numbered by the bars' counts)
    assert_same(text)
