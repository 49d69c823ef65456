"""The carry of ``parse_increment`` stays bounded however long the log, and the cases where the
bound makes the fold differ from ``parse_log`` behave as ``probes.logs.incremental`` documents."""

from __future__ import annotations

import random
from datetime import UTC, datetime

from probes.logs.incremental import LogCarry, parse_increment
from probes.logs.metric_carry import MAX_UNANCHORED
from probes.logs.parse import _parse_reference, parse_log
from probes.logs.step_intervals import MAX_INTERVALS, StepIntervals
from tests.bench.bench_parse import NOISE, hf_block, skyrl_block, verl_line

BOUND = 64 * 1024


def fold_sizes(data: bytes, chunks: int) -> tuple[object, list[int]]:
    """Fold ``data`` in ``chunks`` reads; (last summary, carry JSON size after each read)."""
    size = -(-len(data) // chunks)
    carry, sizes, summary = None, [], None
    for start in range(0, len(data), size):
        summary, carry = parse_increment(carry, data[start : start + size])
        text = carry.model_dump_json()
        sizes.append(len(text))
        carry = LogCarry.model_validate_json(text)
    return summary, sizes


def test_carry_bounded_on_a_100k_line_training_log() -> None:
    """100k+ lines of SkyRL, verl and HF steps with bars and noise, read in 300 increments:
    the carry's JSON stays under 64 KiB and does not grow with the log; the fold is exact."""
    rng = random.Random(3)
    parts = ["  Total optimization steps = 100,000\n"]
    step = 0
    while len(parts) < 7000:
        step += 1
        parts.append(skyrl_block(step, rng) + verl_line(step, rng) + hf_block(step, rng)
                     + "".join(rng.choice(NOISE) for _ in range(3)))
    data = "".join(parts).encode()
    assert data.count(b"\n") > 100_000
    summary, sizes = fold_sizes(data, 300)
    assert repr(summary) == repr(parse_log(data))
    assert max(sizes) < BOUND
    assert max(sizes[-30:]) < 1.5 * max(sizes[30:60])  # no growth with the log's length


def test_carry_bounded_with_thousands_of_faults() -> None:
    """3000 rank tracebacks, OOMs, SIGTERMs and ChildFailedErrors: the hits kept are bounded
    and the newest 100 faults, details included, are ``parse_log``'s."""
    rng = random.Random(4)
    parts = []
    for n in range(3000):
        rank = rng.randrange(8)
        parts.append(
            f"[rank{rank}]: Traceback (most recent call last):\n"
            f'[rank{rank}]:   File "/app/train.py", line {n}, in <module>\n'
            f"[rank{rank}]: RuntimeError: shard {n} is corrupt\n")
        if n % 7 == 0:
            parts.append("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n")
        if n % 11 == 0:
            parts.append("torch.distributed.elastic.multiprocessing.errors.ChildFailedError: \n"
                         + "=" * 60 + "\nRoot Cause (first observed failure):\n"
                         "  traceback : Signal 9 (SIGKILL) received by PID 7\n" + "=" * 60 + "\n")
        parts.append(f"step:{n} - actor/entropy:0.5\n")
    data = "".join(parts).encode()
    summary, sizes = fold_sizes(data, 200)
    assert repr(summary) == repr(parse_log(data))
    assert len(summary.faults) == 100
    assert max(sizes) < BOUND


def test_bar_less_hf_dicts_past_the_cap_without_a_bar_are_exact() -> None:
    """HF with ``disable_tqdm``: every dict waits for a bar that never comes and is numbered
    1, 2, ... at the end. Past ``MAX_UNANCHORED`` only head and tail are kept, and the summary
    is still exact."""
    dicts = [f"{{'loss': {i / 7:.4f}, 'grad_norm': 0.5, 'learning_rate': 1e-05}}\n"
             for i in range(3 * MAX_UNANCHORED)]
    data = "".join(dicts).encode()
    summary, sizes = fold_sizes(data, 40)
    assert repr(summary) == repr(parse_log(data))
    assert [p.step for p in summary.points][-1] == 3 * MAX_UNANCHORED
    assert max(sizes) < BOUND


def test_bar_after_more_bar_less_dicts_than_the_cap_is_the_documented_difference() -> None:
    """Documented: a training bar after more than ``MAX_UNANCHORED`` bar-less dicts numbers
    the dropped middle ones from placeholders, which record nothing. Here the whole-tail pass
    shows steps 1..31 from the middle dicts; the fold shows the newest step and 31 older ones
    numbered from the kept tail instead. Everything else is the whole-tail pass's."""
    count = 2 * MAX_UNANCHORED
    dicts = "".join(f"{{'loss': {i / 7:.4f}, 'grad_norm': 0.5}}\n" for i in range(count))
    bar = f"\r  5%|▌         | {count // 2 + 1}/10000 [00:10<01:00,  8.10it/s]\n"
    data = (dicts + bar + "{'loss': 0.25, 'grad_norm': 0.5}\n").encode()
    summary, _ = fold_sizes(data, 20)
    whole = _parse_reference(data)
    assert [p.step for p in whole.points] == [*range(1, 32), count // 2 + 1]
    assert summary.points[-1] == whole.points[-1]
    shown = [p.step for p in summary.points][:-1]
    assert shown == list(range(shown[0], shown[0] + 31)) and shown[0] > 31  # from the tail
    assert summary.model_copy(update={"points": ()}) == whole.model_copy(update={"points": ()})


def test_step_intervals_forget_the_lowest_past_the_cap() -> None:
    """Documented: past ``MAX_INTERVALS`` gaps the lowest steps count as not logged."""
    steps = StepIntervals()
    for step in range(0, 4 * MAX_INTERVALS, 2):
        steps.add(step)
    assert len(steps.intervals()) == MAX_INTERVALS
    assert 0 not in steps and 4 * MAX_INTERVALS - 2 in steps and 3 not in steps
    steps.add(1, 4 * MAX_INTERVALS)
    assert steps.intervals()[-1][1] == 4 * MAX_INTERVALS and len(steps.intervals()) < 10


def test_yearless_stamps_take_the_mtime_of_the_read_that_reached_them() -> None:
    """Documented: vLLM's year-less stamps before any stamp are placed by the mtime passed with
    the read that reached them (the whole parse uses its own); later stamps follow the clock."""
    first = b"INFO 12-31 23:59:00 [engine.py:1] Running: 0 reqs, Waiting: 0 reqs\n"
    later = b"INFO 01-01 00:01:00 [engine.py:1] Running: 0 reqs, Waiting: 0 reqs\n"
    december = datetime(2025, 12, 31, 23, 59, 30, tzinfo=UTC)
    september = datetime(2026, 9, 1, tzinfo=UTC)
    _, carry = parse_increment(None, first, mtime=december)
    summary, _ = parse_increment(carry, later, mtime=september)
    assert summary.last_timestamp == datetime(2026, 1, 1, 0, 1, tzinfo=UTC)
    assert summary == parse_log(first + later, mtime=december)
    whole = parse_log(first + later, mtime=september)
    assert whole.last_timestamp == datetime(2027, 1, 1, 0, 1, tzinfo=UTC)
