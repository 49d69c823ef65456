"""Levanter's ``json_logger`` tracker reports each step as JSON records in the job's log.

Levanter (stanford-crfm/levanter at 9263f81, ``tracker/json_logger.py``) logs every
``levanter.tracker.log(metrics, step=N)`` as ``json.dumps({"tracker": "json_logger", "event":
"log", "step": N, "metrics": {...}})`` through its logger (``utils/logging.py``'s format); a
step is a record of ``optim/...`` hyperparameters (``tracker/helpers.py``) then one of
``train/loss``, ``global_step`` and ``run_progress`` = step / num_train_steps
(``callbacks/_metrics.py``), and every ``watch`` interval ``grad/norm/total``
(``analysis/tree_stats.py``, the gradient before the optimiser's clipping). Its progress bar
(tqdm_loggable) logs at INFO on a logger Levanter leaves at WARNING: under sbatch these records
are the only steps printed. Replayed on the real SLURM (``sft-levanter``, step 320 of 1000):
step null, no loss, verdict buffering, "Filling buffer".
"""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime, timedelta

import pytest

from probes.logs.parse import parse_log
from tests.probes.logs.pieces import fold_in_pieces

START = datetime(2026, 12, 5, 16, 0)
MTIME = datetime(2026, 12, 5, 17, 0, tzinfo=UTC)


def _line(at: datetime, record: dict[str, object]) -> str:
    return (f"{at:%Y-%m-%dT%H:%M:%S} - 0 - levanter.json_logger - json_logger.py:74 - INFO :: "
            f"{json.dumps(record)}")


def _log(last: int, total: int = 1000, nan_at: int | None = None) -> str:
    lines = [_line(START, {"tracker": "json_logger", "event": "hparams", "hparams": {
        "trainer": {"num_train_steps": total, "seed": 0}, "optimizer": {"learning_rate": 3e-4}}})]
    for step in range(1, last + 1):
        at = START + timedelta(seconds=6 * step)
        lines.append(_line(at, {"tracker": "json_logger", "event": "log", "step": step,
                                "metrics": {"optim/learning_rate": 3e-4 * min(1, step / 100),
                                            "optim/weight_decay": 0.1}}))
        loss = math.nan if step == nan_at else 2.5 - step / 400
        lines.append(_line(at, {"tracker": "json_logger", "event": "log", "step": step,
                                "metrics": {"train/loss": loss, "global_step": step,
                                            "run_progress": step / total}}))
        if step % 10 == 0:
            lines.append(_line(at, {"tracker": "json_logger", "event": "log", "step": step,
                                    "metrics": {"grad/norm/total": 0.84, "grad/hist/embed": {
                                        "min": -1.0, "max": 1.0, "num": 10}}}))
        if step % 100 == 0:
            lines.append(f"{at:%Y-%m-%dT%H:%M:%S} - 0 - levanter.checkpoint - checkpoint.py:288"
                         f" - INFO :: Saving checkpoint at step {step} to "
                         f"checkpoints/lev-run1/step-{step}")
    return "\n".join(lines) + "\n"


READS = [pytest.param(lambda t: parse_log(t, mtime=MTIME), id="cold"),
         pytest.param(lambda t: fold_in_pieces(t, 5, mtime=MTIME), id="folded")]


@pytest.mark.parametrize("read", READS)
def test_records_give_step_total_loss_lr_and_grad_norm(read) -> None:
    """A step's records are one point; the total is the step over its run_progress."""
    summary = read(_log(320))
    assert summary.total_steps == 1000
    last = summary.points[-1]
    assert last.step == 320
    assert last.values["loss"] == pytest.approx(2.5 - 320 / 400)
    assert last.values["learning_rate"] == pytest.approx(3e-4)
    assert last.values["grad_norm"] == pytest.approx(0.84)
    assert summary.points[-2].step == 319
    assert summary.sec_per_step == pytest.approx(6.0)


def test_a_nan_loss_is_read_as_nan() -> None:
    """json.dumps writes a NaN loss as NaN: the point holds it."""
    summary = parse_log(_log(205, nan_at=205), mtime=MTIME)
    assert math.isnan(summary.points[-1].values["loss"])


@pytest.mark.parametrize("record", [
    {"tracker": "json_logger", "event": "summary", "metrics": {"train/loss": 1.0}},
    {"tracker": "json_logger", "event": "finish", "summary": {"train/loss": 1.0}},
    {"tracker": "json_logger", "event": "log", "step": None, "metrics": {"train/loss": 1.0}},
    {"tracker": "json_logger", "event": "log", "step": 5, "metrics": {"note": "x"}},
])
def test_records_of_no_step_are_no_points(record: dict[str, object]) -> None:
    """Near misses: a summary, a finish, a record without a step or without a number."""
    summary = parse_log(_line(START, record) + "\n", mtime=MTIME)
    assert summary.points == ()
