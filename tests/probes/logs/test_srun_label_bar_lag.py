"""HF dicts read ahead of a training bar that srun holds back take the step their epoch gives.

Replayed on the real SLURM 22.05 (``srun --label`` over an HF-shaped run: the bar redrawn on
stderr, a dict every 5 steps on stdout; ``tests/fixtures/slurm-22.05.8/srun_label_hf_bar.out``):
srun holds the task's unfinished line (the bar never ends its line) and writes it in ~1 KB
pieces, each led by ``0: ``, after dicts printed later, so a dict is read while the bar still
shows a count 10-20 steps old. Each dict took ``max(bar, previous + 1)``: the dicts logged at
steps 50, 55, 60 (epochs 0.25, 0.275, 0.3 of a 200-step, one-epoch run) were numbered 40, 41,
42, and 'jobtables job''s history and a NaN onset's step read those. A dict whose epoch puts it
past that count by more than the epoch's printed precision takes the epoch's step; in step
with its bar (no lag) the bar's count stands.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from probes.logs.parse import _parse_reference, parse_log
from probes.models import LogSummary
from tests.probes.logs.pieces import fold_in_pieces

FIXTURE = (Path(__file__).resolve().parents[2] / "fixtures" / "slurm-22.05.8"
           / "srun_label_hf_bar.out").read_bytes()


def _folded(data: bytes, pieces: int = 4) -> LogSummary:
    return fold_in_pieces(data, pieces)


READS = [pytest.param(parse_log, id="cold"), pytest.param(_parse_reference, id="reference"),
         pytest.param(_folded, id="folded")]


@pytest.mark.parametrize("read", READS)
def test_dicts_ahead_of_a_held_bar_take_their_epoch_step(read) -> None:
    summary = read(FIXTURE)
    steps = {round(p.values["epoch"] * 200): p.step for p in summary.points}
    assert steps == {s: s for s in range(5, 61, 5)}
    assert summary.progress is not None and summary.progress.total == 200


@pytest.mark.parametrize("read", READS)
def test_a_bar_in_step_with_its_dicts_keeps_numbering_them(read) -> None:
    """No lag: each dict follows its step's redraw; the bar's count is the step."""
    text = "  Total optimization steps = 200\n  0%|          | 0/200 [00:00<?, ?it/s]"
    for s in range(1, 41):
        text += f"\r{s // 2:3d}%|█         | {s}/200 [00:{s:02d}<03:00,  1.00s/it]"
        if s % 5 == 0:
            text += f"\n{{'loss': '1.5', 'grad_norm': '0.5', 'epoch': '{s / 200:.4g}'}}\n"
    assert [p.step for p in read(text.encode()).points] == list(range(5, 41, 5))


FIXTURE_200 = (Path(__file__).resolve().parents[2] / "fixtures" / "slurm-22.05.8"
               / "srun_label_hf_bar_200.out").read_bytes()


@pytest.mark.parametrize("read", READS)
def test_a_dict_a_step_or_two_ahead_of_its_held_bar_takes_its_epoch_step(read) -> None:
    """The same run to its end on the real SLURM (``srun_label_hf_bar_200.out``): where srun
    wrote the held bar up to a step or two before a dict, the dicts logged at steps 120 and
    140 (epochs '0.6', '0.7') were numbered 119 and 138, the bar's count, as an epoch printed
    to 0.01 left room for the bar's. transformers' 4-significant-digit epochs (this run's
    '0.025' has 3 decimals: the Trainer does not round it to 2) put them on a step exactly."""
    summary = read(FIXTURE_200)
    steps = [(round(p.values["epoch"] * 200), p.step) for p in summary.points]
    assert steps and all(by_epoch == step for by_epoch, step in steps)
    assert summary.progress is not None and summary.progress.current == 200


def _lagged(lag: int, epoch_of) -> bytes:
    """An HF-shaped console whose bar srun writes ``lag`` steps behind each dict."""
    text = ("  Num examples = 1,600\n  Num Epochs = 1\n  Num update steps per epoch = 200\n"
            "  Total optimization steps = 200\n  0%|          | 0/200 [00:00<?, ?it/s]")
    for s in range(1, 61):
        if s > lag:
            b = s - lag
            text += f"\r{b // 2:3d}%|█         | {b}/200 [00:{b:02d}<03:00,  1.00s/it]"
        if s % 5 == 0:
            text += (f"\n0: {{'loss': '1.5', 'grad_norm': '0.5', "
                     f"'epoch': '{epoch_of(s)}'}}\n")
    return text.encode()


@pytest.mark.parametrize("read", READS)
@pytest.mark.parametrize("lag", [1, 2])
def test_a_bar_a_step_or_two_behind_fine_epochs_takes_their_step(read, lag: int) -> None:
    assert [p.step for p in read(_lagged(lag, lambda s: f"{s / 200:.4g}")).points] == list(
        range(5, 61, 5))


@pytest.mark.parametrize("read", READS)
def test_epochs_rounded_to_two_decimals_leave_the_bar_its_count(read) -> None:
    """An older Trainer's ``round(epoch, 2)``: '0.05' may be any step of 9 to 11 of 200, so a
    bar in step with its dicts (no lag) keeps numbering them, as before."""
    text = _lagged(0, lambda s: f"{round(s / 200 + 0.004, 2)}")
    assert [p.step for p in read(text).points] == list(range(5, 61, 5))
