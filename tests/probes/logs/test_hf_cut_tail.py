"""HF Trainer with ``disable_tqdm=True`` read through a cut tail (the sweep reads the last
1 MiB): the dicts' steps come from the log's head (its training banner and printed
``TrainingArguments``), a ``Saving model checkpoint to .../checkpoint-N`` line, or are not
claimed at all; never counted from the tail's first line as if it were the log's."""

from __future__ import annotations

import random
from typing import Any

import pytest

from probes.logs.incremental import LogCarry, parse_increment
from probes.logs.parse import _parse_reference, parse_log
from probes.models import LogSummary

_INFO = "[INFO|trainer.py:1618] 2026-12-03 17:07:18,185 >> "
BANNER = "".join(f"{_INFO}{line}\n" for line in (
    "***** Running training *****", "  Num examples = 80,000", "  Num Epochs = 20",
    "  Num update steps per epoch = 5,000", "  Instantaneous batch size per device = 16",
    "  Total train batch size (w. parallel, distributed & accumulation) = 16",
    "  Gradient Accumulation steps = 1", "  Total optimization steps = 100,000",
    "  Number of trainable parameters = 101,440"))
ARGS = ("TrainingArguments(\ndisable_tqdm=True,\nlogging_first_step=False,\n"
        "logging_steps={every},\nlogging_strategy=IntervalStrategy.STEPS,\nsave_steps=500,\n)\n")
TAIL_BYTES = 1 << 20


def _dict(step: int, *, epoch: bool = True) -> str:
    """transformers 4.x ``PrinterCallback``'s dict at ``step`` (5,000 steps an epoch)."""
    tail = f", 'epoch': {step / 5000:.4f}" if epoch else ""
    return (f"{{'loss': {2.0 - step / 200_000:.6f}, 'grad_norm': 0.5, "
            f"'learning_rate': 1e-05{tail}}}\n")


def _log(last: int, *, every: int = 1, banner: bool = True, epoch: bool = True,
         saves: int = 0) -> str:
    """A run's whole log: args, banner, a dict every ``every`` steps up to ``last``, and a
    checkpoint save every ``saves`` steps (after that step's dict, as the Trainer logs)."""
    parts = [ARGS.format(every=every), BANNER if banner else ""]
    for step in range(every, last + 1, every):
        parts.append(_dict(step, epoch=epoch))
        if saves and step % saves == 0:
            parts.append(f"{_INFO}Saving model checkpoint to /out/run/checkpoint-{step}\n")
            parts.append(f"{_INFO}Configuration saved in /out/run/checkpoint-{step}/config.json\n")
    return "".join(parts)


def _tail(text: str) -> str:
    """The collector's tail: the last ``TAIL_BYTES``, from the first whole line."""
    tail = text[-TAIL_BYTES:]
    return tail[tail.index("\n") + 1:]


def _fold(pieces: list[str], *, head: str | None, log_start: bool) -> LogSummary:
    """The bot's fold: a first read of ``pieces[0]`` (with the head), then increments."""
    carry: LogCarry | None = None
    summary = LogSummary(line_count=0)
    for at, piece in enumerate(pieces):
        if at == 0:
            summary, carry = parse_increment(None, piece.encode(), head=head,
                                             log_start=log_start)
        else:
            summary, carry = parse_increment(carry, piece.encode())
        carry = LogCarry.model_validate_json(carry.model_dump_json())
    return summary


def _steps(summary: LogSummary) -> list[int]:
    return [p.step for p in summary.points]


def test_cut_tail_takes_the_heads_banner() -> None:
    """A 20,000-step run logged every step is over 1 MiB of dicts: its tail read step
    ~14,034 of no total (the dicts counted from the tail's first line), the same on every
    sweep. The head's banner gives each dict its epoch's step, and the total."""
    text = _log(20_000)
    head, tail = text[:256 << 10], _tail(text)
    assert len(text) > TAIL_BYTES and "Running training" not in tail
    cold = parse_log(tail, head=head, log_start=False)
    assert _steps(cold)[-1] == 20_000 and cold.total_steps == 100_000
    assert not cold.steps_unanchored
    assert _steps(cold) == list(range(19_969, 20_001))
    ref = _parse_reference(tail, head=head, log_start=False)
    assert _steps(ref)[-32:] == _steps(cold) and ref.total_steps == 100_000
    cut = len(tail) // 2
    cut = tail.index("\n", cut) + 1
    folded = _fold([tail[:cut], tail[cut:]], head=head, log_start=False)
    assert _steps(folded) == _steps(cold) and folded.total_steps == 100_000


def test_cut_tail_anchors_at_a_checkpoint_save() -> None:
    """No banner (nor epoch) to read: the k-th dict after ``Saving model checkpoint to
    .../checkpoint-N`` is step ``N + k x logging_steps`` (the head's ``logging_steps``), the
    dicts before it counted back from it; a save off the logging grid (N = 500, every 30)
    anchors on the grid (480 logged before it, 510 after)."""
    for every, saves in ((10, 500), (30, 500)):
        last = 20_000 * every
        text = _log(last, every=every, banner=False, epoch=False, saves=saves)
        head, tail = text[:256 << 10], _tail(text)
        assert len(text) > TAIL_BYTES
        want = list(range(last - 31 * every, last + 1, every))
        cold = parse_log(tail, head=head, log_start=False)
        assert _steps(cold) == want and not cold.steps_unanchored
        cut = tail.index("\n", len(tail) // 3) + 1
        assert _steps(_fold([tail[:cut], tail[cut:]], head=head, log_start=False)) == want
        # The whole log, read from its start, agrees.
        assert _steps(parse_log(text)) == want


def test_cut_tail_without_anchor_claims_no_step() -> None:
    """Nothing anchors the dicts of a cut tail (no head, no save): they keep their metrics
    but claim no step (their count from the tail's first line is no step of the run)."""
    text = _log(20_000, banner=False, epoch=False)
    tail = _tail(text)
    cold = parse_log(tail, log_start=False)
    assert cold.points and cold.points[-1].values["loss"] == pytest.approx(1.9)
    assert cold.steps_unanchored
    cut = tail.index("\n", len(tail) // 2) + 1
    assert _fold([tail[:cut], tail[cut:]], head=None, log_start=False).steps_unanchored
    # From the log's first byte the count is the step, as before.
    whole = parse_log(text)
    assert not whole.steps_unanchored and _steps(whole)[-1] == 20_000


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("kind", ["banner", "saves", "saves_off_grid", "bare"])
def test_fold_of_a_cut_tail_equals_its_cold_parse(kind: str, seed: int) -> None:
    """The bot's fold of a cut tail (a first read with the head, then increments cut at
    random bytes, the carry through JSON) equals the cold parse of the same tail."""
    rng = random.Random(seed)
    every = 30 if kind == "saves_off_grid" else 10
    text = _log(3_000 * every, every=every, banner=kind == "banner", epoch=kind == "banner",
                saves=500 if kind.startswith("saves") else 0)
    head = text[:4096] if kind != "bare" else None
    start = text.index("\n", rng.randrange(len(text) // 4, len(text) // 2)) + 1
    tail = text[start:].encode()
    cuts = sorted(rng.sample(range(1, len(tail)), rng.randrange(1, 6)))
    pieces = [tail[a:b] for a, b in zip([0, *cuts], [*cuts, len(tail)], strict=True)]
    carry: LogCarry | None = None
    folded = LogSummary(line_count=0)
    for at, piece in enumerate(pieces):
        folded, carry = parse_increment(carry, piece, head=head if at == 0 else None,
                                        log_start=False)
        carry = LogCarry.model_validate_json(carry.model_dump_json())
    cold = parse_log(tail, head=head, log_start=False)
    assert (folded.total_steps, folded.steps_unanchored) == (
        cold.total_steps, cold.steps_unanchored)
    assert cold.steps_unanchored == (kind == "bare")
    if cold.steps_unanchored:  # their order only: the same dicts, numbered from any start
        assert cold.points and _ordered(folded) == _ordered(cold)
    else:
        assert cold.points and repr(folded.points) == repr(cold.points)


def _ordered(summary: LogSummary) -> list[tuple[object, ...]]:
    """The points of a summary whose steps are their order only, without the steps (asserted
    increasing)."""
    assert _steps(summary) == sorted(set(_steps(summary)))
    return [(repr(p.values), p.line_no, p.wall_time) for p in summary.points]


def test_the_head_seed_is_every_head_line_that_can_hold_a_banner_field() -> None:
    """``head_seed`` finds its lines without splitting the 256 KiB head (a 200-step cut tail
    with a head parsed in 21 ms, not 2 ms): the lines are still exactly the head's lines, as
    ``parse``'s line split cuts them, that hold a needle, ANSI stripped."""
    import re

    from probes.logs.lines import strip_ansi
    from probes.logs.parse import _SPLIT_RE, head_seed

    head = ("\x1b[32m  Num examples = 5\x1b[0m\r\nno\rTotal optimization steps = 9 Total\n"
            "logging_steps=10, Num x\r\r\n{'loss': 1.0}\nTotal" )
    reference = [strip_ansi(line) for line in _SPLIT_RE.split(head)
                 if re.search("Num|Total|logging_", line)]
    assert head_seed(False, head) == reference
    assert len(reference) == 4
    assert head_seed(False, None) == [] and head_seed(False, "") == []
    assert head_seed(True, head) is None


def test_cut_tail_without_anchor_reads_only_its_end(monkeypatch: pytest.MonkeyPatch) -> None:
    """A cut tail with nothing before its last steps that could number its bar-less dicts (no
    training bar, no checkpoint save, no banner epoch) is not read deeper for a count that
    would be no step of the run anyway: its 1 MiB of dicts cost a 20,000-step log 260 ms,
    against 7 ms with the banner. The kept points are the same dicts, in the same order, and
    claim no step; the dicts fed to the metric pass are a few hundred at most, not every one."""
    from probes.logs import history

    text = _log(20_000, banner=False, epoch=False)
    tail = _tail(text)
    fed: list[int] = []
    real = history.MetricScan.feed_dict

    def counting(self: history.MetricScan, line: str, line_no: int) -> None:
        fed.append(line_no)
        real(self, line, line_no)

    monkeypatch.setattr(history.MetricScan, "feed_dict", counting)
    cold = parse_log(tail, log_start=False)
    monkeypatch.undo()
    full = _parse_reference(tail, log_start=False)
    assert cold.steps_unanchored and full.steps_unanchored
    assert _ordered(cold) == _ordered(full)
    assert 0 < len(fed) < 400 < tail.count("\n")


def test_cut_tail_with_an_anchor_far_back_still_reads_to_it() -> None:
    """A save line before the last steps still numbers them, however far back it is (the
    read deepens to it): the early stop is only for a tail with nothing to anchor on."""
    every = 10
    text = _log(20_000 * every, every=every, banner=False, epoch=False, saves=15_000 * every)
    tail = _tail(text)
    assert text.rfind("Saving model checkpoint") < len(text) - 400 * 60
    cold = parse_log(tail, head=text[:4096], log_start=False)
    assert not cold.steps_unanchored
    assert _steps(cold) == list(range(20_000 * every - 31 * every, 20_000 * every + 1, every))


def test_warm_fold_of_an_unanchored_tail_is_the_cost_of_its_increment(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The carry keeps a cut tail's first and last bar-less dicts and the count between them
    (``MetricScan``'s gap); an increment of three more dicts, with no bar to number them,
    records those, not the 12,000 placeholders of the gap (8 ms a warm sweep, not 0.5 ms)."""
    from probes.logs import history

    text = _log(20_000, banner=False, epoch=False)
    tail = _tail(text).encode()
    cut = tail.rindex(b"\n", 0, len(tail) - 200) + 1
    first, carry = parse_increment(None, tail[:cut], log_start=False)
    carry = LogCarry.model_validate_json(carry.model_dump_json())
    recorded: list[int] = []
    real = history.MetricScan._record

    def counting(self: history.MetricScan, step: int, *args: Any, **kw: Any) -> bool:
        recorded.append(step)
        return real(self, step, *args, **kw)

    monkeypatch.setattr(history.MetricScan, "_record", counting)
    warm, _ = parse_increment(carry, tail[cut:])
    monkeypatch.undo()
    assert warm.steps_unanchored and first.steps_unanchored
    assert _ordered(warm) == _ordered(parse_log(tail, log_start=False))
    assert 0 < len(recorded) < 600
