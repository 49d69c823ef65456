"""The metric pass's batched reads give what its line-by-line reads give, formats included.

``probes.logs.recent`` reads the bars before the suffix a run at a time (``skim_bars``: counted
per printing, walked back from the end), and the suffix's own-body bars and one-line dicts the
short way (``feed_bar``, ``feed_dict``), the clock entering the suffix from stamp candidates.
The reference here is the pass as it was read before: every skimmed line through
``MetricScan.skim``, every suffix candidate through ``MetricScan.feed``, the clock walked back
over every candidate. ``parse_log`` with either must give the same summary, field for field
(``formats`` and its order too), on every fixture, on shuffled fixture lines and on drawn
bar-heavy logs (several tracks, refreshes, restarts, broken elapsed fields, foreign rates,
nested and Ray-prefixed bars, dicts and stamps between).
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from datetime import datetime
from itertools import islice
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from probes.logs import recent
from probes.logs.history import MetricScan
from probes.logs.lines import parse_iteration, strip_ray_prefix
from probes.logs.parse import parse_log
from probes.logs.progress import WIDE_WINDOW
from probes.models import LogSummary
from tests.probes.logs.test_recent import LOG_FIXTURES, fixture_pool

FIXTURES = Path(__file__).parents[2] / "fixtures"
PROPERTY = settings(max_examples=150, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


def line_by_line(
    raws: Sequence[str], lines: Sequence[str], candidates: Sequence[int], cut: int, *,
    start: int, aliases: Mapping[str, str], mtime: datetime | None, engine_line: int | None,
    first_line_no: int, seed: Sequence[str] | None = None,
) -> MetricScan:
    """``recent._scan_suffix`` read one line at a time (the reference)."""
    in_suffix = engine_line is not None and engine_line >= first_line_no + start
    scan = MetricScan(aliases, mtime, engine_line if in_suffix else None)
    if seed is not None:
        scan.seed_head(seed)
    if start:
        marked = recent.MARKER_LINES.lines(lines, 0, start)
        iterations = recent.ITERATION_LINES.lines(lines, 0, start) or []
        parsed = (i for i in reversed(iterations)
                  if parse_iteration(strip_ray_prefix(lines[i])))
        skimmed = (range(start) if marked is None
                   else sorted({*marked, *islice(parsed, WIDE_WINDOW + 1)}))
        for index in skimmed:
            line = lines[index]
            quoted = strip_ray_prefix(line).lstrip()[:1] in ("'", '"')
            scan.skim(line, raws[index], first_line_no + index,
                      in_dict=quoted and recent._inside_dict(lines, index))
        scan.enter_suffix(recent.clock_at(lines, start - 1, mtime, inclusive=True,
                                          among=candidates))
    for index in candidates[cut:]:
        if lines[index].strip():
            scan.feed(lines[index], raws[index], first_line_no + index)
    scan.close(at_log_start=start == 0)
    return scan


def both(text: str, monkeypatch: pytest.MonkeyPatch) -> tuple[LogSummary, LogSummary]:
    fast = parse_log(text, mtime=datetime(2025, 3, 1))
    with monkeypatch.context() as patch:
        patch.setattr(recent, "_scan_suffix", line_by_line)
        slow = parse_log(text, mtime=datetime(2025, 3, 1))
    return fast, slow


def assert_same(text: str, monkeypatch: pytest.MonkeyPatch) -> None:
    fast, slow = both(text, monkeypatch)
    assert repr(fast) == repr(slow)  # repr: NaN == NaN


@pytest.mark.parametrize("path", LOG_FIXTURES, ids=lambda p: str(p.relative_to(FIXTURES)))
def test_fixture_batched_as_line_by_line(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each fixture, and four times over (long enough that bars are skimmed)."""
    text = path.read_text(errors="replace")
    assert_same(text, monkeypatch)
    assert_same(text * 4, monkeypatch)


_TRACKS = [("", 200), ("", 50), ("Training Progress", 40), ("Map", 1000),
           ("Training Batches Processed", 100), ("Steps", 30)]
_HEADS = ["", "", "", " ", "(TaskRunner pid=12) "]
_ELAPSED = ["{m:02d}:{s:02d}", "{h}:{m:02d}:{s:02d}", "1:2:3:4", "{s}", "1d, {h}:{m:02d}:{s:02d}"]
_RATES = [", 8.10it/s", ", 2.5s/it", ", 12MB/s", "", ",  ", ", ?it/s", ", 3.1it/s "]


def bar_log(seed: int, steps: int) -> str:
    """A log of bars of a few tracks (refreshed, restarted, their elapsed field sometimes
    unreadable, rates of other units), with HF dicts, checkpoint saves and stamps between."""
    rng = random.Random(seed)
    tracks = rng.sample(_TRACKS, rng.randrange(1, 4))
    at = dict.fromkeys(tracks, 0)
    out = [f"  Total optimization steps = {tracks[0][1]}"] if rng.random() < 0.5 else []
    for n in range(steps):
        track = rng.choice(tracks)
        roll = rng.random()
        if roll < 0.04:
            at[track] = rng.randrange(5)  # a restart
        elif roll > 0.15:  # else a refresh of the same step
            at[track] += rng.randrange(1, 3)
        step, (desc, total) = at[track], track
        elapsed = rng.choice(_ELAPSED).format(h=step // 3600, m=step // 60 % 60, s=step % 60)
        out.append(f"{rng.choice(_HEADS)}{desc + ': ' if desc else ''}"
                   f"{100 * step // total:3d}%|##  | {step}/{total} [{elapsed}<00:10"
                   f"{rng.choice(_RATES)}]{rng.choice(['', '', '', chr(27) + '[A'])}")
        if rng.random() < 0.4:
            loss = rng.choice(["1.5", "'2.0'", "nan", "'x'"])
            out.append(f"{{'loss': {loss}, 'grad_norm': '0.3', 'epoch': {n / 100:.2f}}}")
        if rng.random() < 0.02:
            out.append(f"Saving model checkpoint to /ckpt/checkpoint-{step}")
        if rng.random() < 0.02:
            out.append(f"2025-03-01 10:{n // 60 % 60:02d}:{n % 60:02d} INFO step done")
    return rng.choice(["\n", "\r"]).join(out)


@PROPERTY
@given(st.integers(min_value=0, max_value=10**9), st.integers(min_value=20, max_value=1200))
def test_bar_heavy_logs_batched_as_line_by_line(seed: int, steps: int) -> None:
    with pytest.MonkeyPatch.context() as monkeypatch:
        assert_same(bar_log(seed, steps), monkeypatch)


@PROPERTY
@given(st.lists(st.integers(min_value=0), min_size=100, max_size=2000))
def test_shuffled_fixture_lines_batched_as_line_by_line(picks: list[int]) -> None:
    pool = fixture_pool()
    with pytest.MonkeyPatch.context() as monkeypatch:
        assert_same("\n".join(pool[i % len(pool)] for i in picks), monkeypatch)


def test_long_run_keeps_the_rate_of_its_last_window(monkeypatch: pytest.MonkeyPatch) -> None:
    """Thousands of redraws before the suffix: the walk back stops at the track's last
    ``WIDE_WINDOW`` events, and the rate, progress and count-chosen bar are the same."""
    lines = []
    for step in range(1, 3001):
        lines.append(f" {step * 100 // 3000:3d}%|#  | {step}/3000 [{step // 60:02d}:"
                     f"{step % 60:02d}<00:10, 1.00it/s]")
        if step % 500 == 0:  # a second, shorter-lived bar of the same kind
            lines.append(f"  5%|#  | {step // 500}/90 [00:0{step // 500}<00:10, 1.00it/s]")
        lines.append(f"{{'loss': {1 / step:.3f}, 'epoch': {step / 3000:.3f}}}")
    fast, slow = both("\n".join(lines), monkeypatch)
    assert repr(fast) == repr(slow)
    assert fast.progress is not None and fast.progress.total == 3000
    assert fast.sec_per_step == pytest.approx(1.0)


def test_rate_from_bars_before_the_suffix_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """The last steps are logged with no bar (dicts with their own step), so the rate is the
    skimmed bar's alone, and on its whole-second clock (10 steps a second, then 4) it widens
    to the last ``WIDE_WINDOW`` events: the walk back must keep all of those."""
    lines, elapsed = [], 0.0
    for step in range(1, 401):
        elapsed += 0.1 if step < 385 else 0.25  # slower over the last 16 steps
        lines.append(f" {step // 4:3d}%|#  | {step}/400 [{int(elapsed) // 60:02d}:"
                     f"{int(elapsed) % 60:02d}<00:10, 4.00it/s]")
        lines.append(f"{{'loss': {1 / step:.3f}, 'epoch': {step / 400:.3f}}}")
    lines += [f"{{'loss': 0.5, 'step': {step}}}" for step in range(401, 461)]
    fast, slow = both("\n".join(lines), monkeypatch)
    assert repr(fast) == repr(slow)
    assert fast.points[-1].step == 460
    assert fast.sec_per_step == pytest.approx(6 / 31)  # 31 steps over the widened window
