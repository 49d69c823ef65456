"""verl's SFT trainers: the run's total steps and step time from what a real log shows.

``verl-sft-rebuilt/`` (generators/verl_sft_rebuilt.py, real tqdm 4.70.1, print code of
volcengine/verl b178a3cd): ``fsdp_sft_resumed.out`` is the FSDP SFT trainer under torchrun,
resumed at step 60 of 120 (3 epochs of 40) and running at step 95; it prints ``Number of
steps/epoch 40, number of epochs 3, total number of steps 120`` on rank 0 (only its ``Total
training steps`` goes through the logger at WARN) and ``train/time(s)`` each step.
``engine_sft.out`` is the engine-based ``sft_trainer.py``, which prints no total at all: only
its ``Epoch E/M`` bar (40 steps an epoch, 3 epochs), the step lines glued to its redraws.
Both read total null and no step time: no progress, no ETA.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from probes.logs.parse import parse_log
from probes.models import LogSummary
from tests.probes.logs.pieces import fold_in_pieces

MTIME = datetime(2026, 12, 5, 4, 0, tzinfo=UTC)
FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "verl-sft-rebuilt"


def _folded(text: str) -> LogSummary:
    return fold_in_pieces(text, 4, mtime=MTIME)


READS = [pytest.param(lambda t: parse_log(t, mtime=MTIME), id="cold"),
         pytest.param(_folded, id="folded")]


@pytest.mark.parametrize("read", READS)
def test_the_fsdp_trainers_steps_line_is_the_total(read) -> None:
    """The rank-0 print names the total; the resumed run's steps go on from 61 (a
    ``WARN: grad_norm is not finite`` line between them costs none) with their step time."""
    summary = read((FIXTURES / "fsdp_sft_resumed.out").read_bytes().decode())
    assert summary.total_steps == 120
    steps = [point.step for point in summary.points]
    assert steps == list(range(steps[0], 96)) and 67 in steps
    assert summary.points[-1].values["sec_per_step"] == pytest.approx(2.5017)
    assert summary.sec_per_step == pytest.approx(2.5)


def _head_and_tail(text: str) -> tuple[str, str]:
    """The log cut as the collector reads a long one: its first bytes (config, steps line) and
    a tail that holds only step lines and redraws."""
    at = text.index("Epoch 2/3")
    return text[:at], text[at:]


@pytest.mark.parametrize(("limit", "total"), [("None", 120), ("100", 100)])
def test_the_totals_in_a_cut_tails_head(limit: str, total: int) -> None:
    """The config and the steps line are printed once, at start: a tail cut from a long log
    takes them from the log's head; the config's ``total_training_steps`` caps the total."""
    text = (FIXTURES / "fsdp_sft_resumed.out").read_bytes().decode()
    head, tail = _head_and_tail(text.replace("'total_training_steps': None",
                                             f"'total_training_steps': {limit}"))
    summary = parse_log(tail, mtime=MTIME, log_start=False, head=head)
    assert summary.total_steps == total


@pytest.mark.parametrize("read", READS)
def test_the_engine_trainers_epoch_bar_gives_the_total(read) -> None:
    """``Epoch 2/3`` over 40 steps, its step line the bar's next step: 3 x 40 in all, at the
    bar's 2.5 s a step."""
    summary = read((FIXTURES / "engine_sft.out").read_bytes().decode())
    assert summary.total_steps == 120
    assert summary.points[-1].step == 52
    assert summary.points[-1].values["loss"] == pytest.approx(1.4661735404302303)
    assert summary.sec_per_step == pytest.approx(2.5)


def test_a_bar_the_step_lines_do_not_follow_gives_no_total() -> None:
    """An ``Epoch E/M`` bar whose count is not the step printed after it (another loop's
    bar, a step line of another count) names no total."""
    text = (FIXTURES / "engine_sft.out").read_bytes().decode()
    shifted = text.replace("step:", "step:1")  # step 51 read as 151, ...
    summary = parse_log(shifted, mtime=MTIME)
    assert summary.total_steps is None


@pytest.mark.parametrize("read", READS)
def test_the_configs_total_training_steps_caps_the_steps_line(read) -> None:
    """``trainer.total_training_steps=100`` stops the FSDP trainer at step 100 (``fit``'s
    ``is_last_step``), while its steps line still counts epochs x steps an epoch (120): the
    printed config's limit is the total."""
    text = (FIXTURES / "fsdp_sft_resumed.out").read_bytes().decode()
    assert text.count("'total_training_steps': None") == 1
    summary = read(text.replace("'total_training_steps': None", "'total_training_steps': 100"))
    assert summary.total_steps == 100



SRUN_LABEL = FIXTURES.parent / "slurm-22.05.8" / "srun_label_verl_engine_sft.out"


@pytest.mark.parametrize("read", READS)
def test_the_epoch_bar_under_srun_label_gives_the_total(read) -> None:
    """A real capture of the engine trainer's run under ``srun --label`` on the test SLURM:
    srun writes the stdout step lines and the stderr bar apart (the bar held in ~1 KB pieces,
    each led by ``0: ``), so no step line is on a redraw's line: the latest ``Epoch 2/3`` redraw
    the step lines have reached still gives 3 x 40 and the bar's 2.5 s a step."""
    summary = read(SRUN_LABEL.read_bytes().decode())
    assert summary.points[-1].step == 52
    assert summary.total_steps == 120
    assert summary.sec_per_step == pytest.approx(2.5)


def test_a_bar_ahead_of_the_steps_gives_no_total() -> None:
    """``Epoch E/M`` bars whose counts are past the steps logged (an epoch ahead: another
    loop's bars) are no verl SFT bars of theirs."""
    text = SRUN_LABEL.read_bytes().decode()
    text = text.replace("Epoch 2/3", "Epoch 3/3").replace("Epoch 1/3", "Epoch 2/3")
    summary = parse_log(text, mtime=MTIME)
    assert summary.total_steps is None
