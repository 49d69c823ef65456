"""A generic step line (``name: number`` pairs with a step, a logger-prefixed dict) read where
it is not the run's own step: another rank's line, a line in a log whose steps another trainer
format already reads, an eval dict behind its label.

The readers of d2b6f1a (``probes.logs.pair_lines``) and e90e436 (``DictScan._prefixed_dict``)
are general by design; these are the lines they must leave alone. Found by the review of those
commits: a verl or HF log with one ``[rank1]: step: 5, loss: ..., lr: ...`` line from a worker
read step 5 as its newest step (the step counter going back read as a restart: the run's
newest 90 steps dropped), and ``INFO - eval: {'loss': 0.9, 'step': 30}`` overwrote step 30's
training loss with the eval loss.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from probes.logs.parse import parse_log
from tests.probes.logs.pieces import fold_in_pieces

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
READS = [pytest.param(parse_log, id="cold"),
         pytest.param(lambda text: fold_in_pieces(text, 4), id="folded")]
STRAY = [
    "[rank1]: step: 5, loss: 0.52, lr: 1e-05, grad_norm: 0.9",
    "(WorkerDict pid=3456, ip=10.0.0.2) [rank1]: step: 5, loss: 0.52, lr: 1e-05",
    "1: step: 5, loss: 0.52, lr: 1e-05",
    "2026-01-01 00:00:00,000 - INFO - rollout worker step: 5, loss: 0.52, lr: 1e-05",
    "INFO: step: 5, loss: 0.52, grad_norm: 0.9",
]


def _steps(summary) -> list[tuple[int, float | None]]:
    return [(p.step, p.values.get("loss", p.values.get("reward"))) for p in summary.points]


@pytest.mark.parametrize("read", READS)
@pytest.mark.parametrize("fixture", ["verl-0.9.1/console.log",
                                     "hf-transformers-5.24.0/sft_healthy.out"])
@pytest.mark.parametrize("stray", STRAY)
def test_a_stray_step_line_joins_no_other_formats_steps(read, fixture: str, stray: str) -> None:
    log = (FIXTURES / fixture).read_text(encoding="utf-8")
    alone = read(log)
    assert alone.points
    for text in (log + stray + "\n", _sprinkled(log, stray)):
        assert _steps(read(text)) == _steps(alone)


@pytest.mark.parametrize("read", READS)
@pytest.mark.parametrize("fixture", ["verl-0.9.1/console.log", "megatron-rebuilt/args.log"])
def test_a_logged_dict_joins_no_other_formats_steps(read, fixture: str) -> None:
    """A component's logger-prefixed dict in a log whose steps another trainer's lines give
    is none of its steps (it was numbered on after the last one)."""
    log = (FIXTURES / fixture).read_text(encoding="utf-8")
    stray = ('2026-01-01 00:00:00,000 INFO reward_server - batch stats: {"reward": 0.55, '
             '"loss": 0.1, "n": 512}')
    for text in (log + stray + "\n", _sprinkled(log, stray)):
        assert _steps(read(text)) == _steps(read(log))


def _sprinkled(log: str, stray: str) -> str:
    lines = log.splitlines(keepends=True)
    middle = len(lines) // 2
    return "".join(lines[:middle]) + stray + "\n" + "".join(lines[middle:])


@pytest.mark.parametrize("read", READS)
def test_another_ranks_step_pairs_are_not_the_runs(read) -> None:
    """``srun -l`` / torchrun label every rank's line; rank 0's are the run's steps (as a
    logged dict's: ``test_prefixed_dicts``), another rank's loss is not the step's."""
    text = "".join(
        f"{rank}step: {s}, loss: {(9.0 if rank not in ('0: ', '[rank0]:') else 2.0 - s / 100):.4f}"
        f", lr: 1e-05, grad_norm: 0.5\n"
        for s in range(1, 21) for rank in ("0: ", "1: ", "[rank0]:", "[rank3]:", "[default2]:"))
    summary = read(text)
    assert [p.step for p in summary.points] == list(range(1, 21))
    assert all(p.values["loss"] < 3 for p in summary.points)


@pytest.mark.parametrize("read", READS)
@pytest.mark.parametrize("label", ["eval: ", "val: ", "Validation results: ", "test metrics: ",
                                   "eval metrics at step 30: "])
def test_a_labelled_eval_dict_behind_a_logger_prefix_is_no_training_point(read,
                                                                            label: str) -> None:
    train = "".join(
        f"2026-12-05 03:{10 + s // 6:02d}:{s % 6 * 10:02d},120 - INFO - train - "
        f"{{'loss': {2.0 - s / 100:.4f}, 'grad_norm': 0.8, 'learning_rate': 2e-05, "
        f"'step': {s}}}\n" for s in range(1, 31))
    evaluated = (f"2026-12-05 03:15:05,120 - INFO - train - {label}{{'loss': 0.9, "
                 f"'accuracy': 0.7, 'step': 30}}\n")
    summary = read(train + evaluated)
    assert summary.points[-1].step == 30
    assert summary.points[-1].values["loss"] == pytest.approx(1.7)
    alone = read(f"2026-12-05 03:15:05,120 INFO {label}{{\"loss\": 0.9, \"reward\": 0.7}}\n")
    assert not alone.points
