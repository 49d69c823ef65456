"""The metric pass read back from the end equals the whole-tail pass, and stays bounded.

``parse_log`` reads metrics from a deepening suffix of the tail (``probes.logs.recent``);
``_parse_reference`` feeds every line of the whole tail, in order, to every rule and keeps the
same last ``HISTORY_DEPTH`` steps. Their summaries (everything the report reads: history,
totals, progress, rate, checkpoints, completion, faults, clock) must be equal on every fixture,
on long logs built from the fixtures' own lines, and on hypothesis-drawn line sequences.
"""

from __future__ import annotations

import pickle
import random
import re
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from probes.logs import areal_lines, history, recent, scan_patterns, skyrl_batches
from probes.logs.lines import strip_ray_prefix
from probes.logs.parse import _parse_reference, parse_log
from probes.logs.recent import HISTORY_DEPTH
from probes.models import LogSummary
from tests.bench.bench_parse import hf_block, skyrl_block, skyrl_wandb_block, verl_line

FIXTURES = Path(__file__).parents[2] / "fixtures"
LOG_FIXTURES = sorted(
    p for p in FIXTURES.rglob("*") if p.is_file() and p.suffix in {".out", ".log", ".txt"}
)
PROPERTY = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def assert_same(text: str, *, history: bool = True) -> None:
    """Equal in every field the report reads; ``formats`` (which no rule reads) names the
    formats of the lines read, so back from the end it may name fewer. ``history=False``
    leaves the metric history out (see the shuffled-lines test)."""
    fast, full = parse_log(text), _parse_reference(text)
    assert set(fast.formats) <= set(full.formats)
    same: dict[str, object] = {"formats": ()} if history else {"formats": (), "points": ()}
    if not history and _stamped(fast) != _stamped(full):
        # With no bar or iteration clock, the rate is read off the kept steps' own stamps
        # (``MetricScan.summary``): where the histories differ, it is history too.
        same["sec_per_step"] = None
    assert repr(fast.model_copy(update=same)) == repr(full.model_copy(update=same))  # NaN == NaN


def _stamped(summary: LogSummary) -> list[tuple[int, object]]:
    """The kept steps that carry a time, with it."""
    return [(p.step, p.wall_time) for p in summary.points if p.wall_time is not None]


@pytest.mark.parametrize("path", LOG_FIXTURES, ids=lambda p: str(p.relative_to(FIXTURES)))
def test_fixture_repeated_equals_whole_tail(path: Path) -> None:
    """Each fixture, and the fixture four times over (a restarted run logging again, long
    enough that the suffix is shorter than the tail), read back equals the whole-tail pass."""
    text = path.read_text(errors="replace")
    assert_same(text)
    assert_same(text * 4)


def long_log(steps: int, seed: int = 3) -> str:
    """A long mixed log: an HF banner once at the top, then SkyRL, verl and HF steps."""
    rng = random.Random(seed)
    head = ("***** Running training *****\n  Num examples = 51,200\n"
            f"  Total optimization steps = {steps:,}\n  train_batch_size = 64\n"
            "  n_samples_per_prompt = 8\n")
    return head + "".join(skyrl_block(s, rng) + verl_line(s, rng) + hf_block(s, rng)
                          for s in range(1, steps + 1))


def test_long_log_banner_at_top_is_still_read() -> None:
    """A 2000-step log: the banner's total and rollout geometry printed only at the top are
    found, the history is the last HISTORY_DEPTH steps, and it equals the whole-tail pass."""
    text = long_log(2000)
    summary = parse_log(text)
    assert summary.total_steps == 2000
    assert summary.rollouts_per_step == 64 * 8
    assert [p.step for p in summary.points] == list(range(2001 - HISTORY_DEPTH, 2001))
    assert_same(text)


def test_long_log_feeds_only_its_end(monkeypatch: pytest.MonkeyPatch) -> None:
    """Reading 20,000 steps feeds the metric pass a few hundred lines, not every line."""
    text = long_log(20000)
    fed: list[int] = []
    real = history.MetricScan.feed

    def counting(self: history.MetricScan, line: str, raw: str, line_no: int) -> None:
        fed.append(line_no)
        real(self, line, raw, line_no)

    monkeypatch.setattr(history.MetricScan, "feed", counting)
    summary = parse_log(text)
    assert summary.points[-1].step == 20000 and summary.total_steps == 20000
    assert 0 < len(fed) < text.count("\n") / 50


def test_hf_bar_redraws_are_read_in_one_suffix(monkeypatch: pytest.MonkeyPatch) -> None:
    """HF's ``\r`` bar redraw before each step's dict leaves a blank piece on every line; a
    blank is a candidate only for EasyR1's YAML shape. The first suffix counts the lines that
    hold text, so it holds the steps it aims at: one pass, not a second twice as deep."""
    steps = 200
    text = "***** Running training *****\n  Total optimization steps = 200\n" + "".join(
        f"\r  {s // 2:3d}%|#    | {s}/{steps} [00:{s % 60:02d}<00:11,  8.10it/s]"
        f"\r{{'loss': {2 - s / 400:.4g}, 'grad_norm': 0.3, 'epoch': {s / steps:.4g}}}\n"
        for s in range(1, steps + 1))
    passes: list[int] = []
    real = recent._scan_suffix

    def counting(*args: Any, **kwargs: Any) -> history.MetricScan:
        passes.append(kwargs["start"])
        return real(*args, **kwargs)

    monkeypatch.setattr(recent, "_scan_suffix", counting)
    summary = parse_log(text)
    assert [p.step for p in summary.points] == list(range(steps + 1 - HISTORY_DEPTH, steps + 1))
    assert len(passes) == 1 and passes[0] > 0
    monkeypatch.undo()
    assert_same(text)


def test_summary_retained_is_small() -> None:
    """What a summary keeps of a 1 MiB tail is bounded (~100 KB or less), whatever its length."""
    text = long_log(700)
    assert len(text) > 1 << 20
    summary = parse_log(text)
    assert len(summary.points) == HISTORY_DEPTH
    assert len(pickle.dumps(summary)) < 100_000


@cache
def fixture_pool() -> list[str]:
    """Every distinct line of the log fixtures."""
    seen: dict[str, None] = {}
    for path in LOG_FIXTURES:
        seen.update(dict.fromkeys(re.split(r"\r\n?|\n", path.read_text(errors="replace"))))
    return list(seen)


@cache
def quiet_noise() -> list[str]:
    """The fixture lines that log no step on their own (see the long-runs property)."""
    def body(line: str) -> str:
        return strip_ray_prefix(re.sub(r"\x1b\[[0-9;]*m", "", line)).lstrip()

    return [line for line in fixture_pool()
            if "reward/" not in line and not body(line).startswith("{")
            and not ("_loss" in line and "{" in line)
            and not scan_patterns.SKYRL_HEADER_RE.search(body(line))
            and not scan_patterns.NEMO_HEADER_RE.match(body(line))  # opens a step, as a header
            and not areal_lines.parse_step(body(line))  # AReaL's: its table rows' step
            # SkyRL's save and resample lines measure its batches bar's lead (skyrl_batches)
            and skyrl_batches.saved_step(body(line)) is None
            and not skyrl_batches.is_resample(line)
            # OpenRLHF's resume line places the steps of the next Episode bar's postfix
            # (scan_episodes.EpisodeResume): another run's bar far before the suffix would
            # then log a step the suffix never sees
            and "consumed_samples: " not in line
            and not _parse_reference(line + "\n").points]


@PROPERTY
@given(st.lists(st.integers(min_value=0), min_size=200, max_size=2500),
       st.sampled_from(["\n", "\r\n"]))
def test_random_fixture_lines_equal_whole_tail(picks: list[int], newline: str) -> None:
    """Long sequences of real fixture lines, in any order, read back equal the whole tail in
    totals, progress, rate, checkpoints, completion, faults and clock. Not in history: lines
    of many logs shuffled together number some steps by state before the suffix (a SkyRL
    reward line's step is skipped if that step was logged anywhere before; an HF dict follows
    the previous dict's step), which a real log's order does not do across 34 steps; the
    realistic runs below and every fixture compare the history too."""
    pool = fixture_pool()
    assert_same(newline.join(pool[i % len(pool)] for i in picks), history=False)


@PROPERTY
@given(st.integers(min_value=40, max_value=400), st.integers(min_value=0, max_value=10**6),
       st.integers(min_value=0, max_value=50))
# Drawn once (2026-12-05): a verl val-only line at a step another format logged before the
# suffix made the whole pass, not the suffix, take an Epoch bar's total (history._verl_line).
@example(steps=65, seed=524288, noise=11)
# And (2026-12-05, with the fixtures of 9c009dc): an OpenRLHF 'Loaded the checkpoint: ...,
# consumed_samples: 576' line, then another run's lone 'Episode [1/3]: 0/6' bar with a postfix,
# both before the suffix: the whole pass counted that postfix as a resumed episode's unanchored
# step. The noise now holds no resume line (quiet_noise).
@example(steps=189, seed=69076, noise=16)
def test_long_fixture_runs_equal_whole_tail(steps: int, seed: int, noise: int) -> None:
    """Whole steps of each trainer format with real fixture lines between read back equal.
    The noise (``quiet_noise``) holds no SkyRL reward line, status dict, ``Step N:`` header,
    OpenRLHF resume line,
    checkpoint save or resample line (the last three measure how far its batches bar leads the
    step: another run's would misplace the next bar's step),
    no NeMo-RL ``===== Step N/M =====`` banner (its bullets' step), no dict opener, and no
    line that logs a step by itself. A stray reward line or status dict
    gives a step of its own to the next SkyRL bar; a stray header gives the next dict its step;
    a stray dict numbers itself after the previous dict, not the bar; and a SkyRL step without
    a ``Step N:`` dict (``trainer.logger=wandb``) is taken at its bar only if no line logged
    that step before, so another run's stray ``step:23`` line would hide it from the whole
    pass but not from a suffix after it (see the shuffled-lines test). One trainer's real log
    does not interleave another run's step lines."""
    rng = random.Random(seed)
    pool = quiet_noise()
    parts = []
    for step in range(1, steps + 1):
        parts.append(rng.choice((skyrl_block, skyrl_wandb_block, hf_block))(step, rng))
        parts.extend(pool[rng.randrange(len(pool))] + "\n" for _ in range(rng.randrange(noise + 1)))
    assert_same("".join(parts))


@pytest.mark.parametrize("opener", [
    "(skyrl_entrypoint pid=48213) {'generate/avg_num_tokens': '900.5590',",
    "Step 7: {'generate/avg_num_tokens': '900.5590',",
])
def test_dict_left_open_past_noise_hides_a_quoted_marker(opener: str) -> None:
    """A multi-line dict still open when noise lines come (the whole pass keeps continuing it
    past them) swallows a later quoted ``'train_batch_size': 32,`` line: skimmed before the
    suffix it must not set the rollout geometry either (seed 2 of the long-runs property)."""
    head = ("  train_batch_size: 64\n  n_samples_per_prompt: 5\n" + opener + "\n"
            "2026-02-12 14:50:38.684 | INFO | skyrl.train.trainer:train:1 - noise\n"
            "    'train_batch_size': 32,\n")
    text = head + "".join(hf_block(s, random.Random(s)) for s in range(1, 300))
    assert _parse_reference(text).rollouts_per_step == 5 * 64
    assert_same(text)


def test_yearless_stamps_after_a_dated_one_without_mtime() -> None:
    """With no file mtime (a Kubernetes log), a year-less stamp (vLLM's, OpenRLHF's ``INFO
    MM-DD HH:MM:SS``) takes its year from the dated stamp before it, as the whole-tail pass
    places it. Read back from the end, the clock at the suffix's start had no time: the steps
    after it had none, nor the rate their stamps give."""
    head = "2026-11-29 23:50:00,123 - INFO - __main__ - launching PPO\n"
    steps = "".join(
        f"(PPOTrainer pid=9) INFO 11-30 {10 + s // 60:02d}:{s % 60:02d}:00 ppo_trainer.py:547] "
        f"✨ Global step {s}: {{'policy_loss': 0.01, 'reward': {s / 200}}}\n"
        f"(PPOTrainer pid=9) INFO 11-30 {10 + s // 60:02d}:{s % 60:02d}:30 ppo_trainer.py:224] "
        f"Sample: ['a', 0.0]\n" for s in range(1, 121))
    fast, full = parse_log(head + steps), _parse_reference(head + steps)
    assert fast.points[-1].wall_time is not None and fast.sec_per_step == 60.0
    assert repr(fast.model_copy(update={"formats": ()})) == repr(
        full.model_copy(update={"formats": ()}))
    assert parse_log(steps).sec_per_step is None  # no dated stamp: no time, both ways
    assert _parse_reference(steps).sec_per_step is None
