"""A DeepSpeed run without the HF Trainer reports its steps in DeepSpeed's own lines.

DeepSpeed's engine logs every ``steps_per_print`` optimizer steps, from rank 0 only
(deepspeed/runtime/engine.py ``_report_progress``: ``log_dist(f"step={step},
skipped={self.skipped_steps}, lr={lr}, mom={mom}", ranks=[0])``; ``log_dist`` prefixes
``[Rank {rank}] ``, the logger's format ``[%(asctime)s] [%(levelname)s]
[%(filename)s:%(lineno)d:%(funcName)s] %(message)s``)::

    [2026-12-04 12:00:10,123] [INFO] [logging.py:128:log_dist] [Rank 0] step=10, skipped=0, \
lr=[9.9e-05], mom=[(0.9, 0.95)]

``step`` is the engine's ``global_steps`` (optimizer steps). No loss is in it: a plain
DeepSpeed script prints its own, DeepSpeed-Chat's step-1 SFT (``--print_loss``) one line a
micro-batch on every rank, the loss a tensor
(applications/DeepSpeed-Chat/training/step1_supervised_finetuning/main.py)::

    Epoch: 0, Step: 39, Rank: 0, loss = tensor(2.1875, device='cuda:0', grad_fn=<NllLossBackward0>)

Replayed on the real SLURM: no step, no loss, verdict buffering for the whole run. Now the
engine line is a point at its step (its ``lr``), the loss the mean of rank 0's micro-batch
losses printed since the engine's last line (the window it reports, as HF's logged loss is
the mean over ``logging_steps``), and the rate from the lines' stamps.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from probes.logs.parse import parse_log
from probes.models import LogSummary
from tests.probes.logs.pieces import fold_in_pieces

MTIME = datetime(2026, 12, 4, 13, 0, tzinfo=UTC)
START = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)
GA, EVERY, SECONDS_A_STEP = 4, 10, 3.0


def _stamp(at: datetime) -> str:
    return f"[{at:%Y-%m-%d %H:%M:%S},{at.microsecond // 1000:03d}]"


def _micro_loss(micro: int, rank: int) -> float:
    return round(2.5 - micro / 1000 + rank / 10, 4)


def _run(steps: int, ranks: int = 2, print_loss: bool = True) -> str:
    head = f"{_stamp(START)} [INFO] [config.py:1000:print]   "
    out = [f"{head}gradient_accumulation_steps .. {GA}",
           f"{head}steps_per_print .............. {EVERY}",
           "***** Running training *****",
           "Beginning of Epoch 1/1, Total Micro Batches 4000"]
    for step in range(1, steps + 1):
        for k in range(GA):
            micro = (step - 1) * GA + k
            for rank in range(ranks) if print_loss else ():
                out.append(f"Epoch: 0, Step: {micro}, Rank: {rank}, loss = tensor("
                           f"{_micro_loss(micro, rank)}, device='cuda:{rank}', "
                           "grad_fn=<NllLossBackward0>)")
        if step % EVERY == 0:
            at = START + timedelta(seconds=step * SECONDS_A_STEP)
            out.append(f"{_stamp(at)} [INFO] [logging.py:128:log_dist] [Rank 0] step={step}, "
                       f"skipped=0, lr=[{1e-4 * (1 - step / 1000):.6g}], mom=[(0.9, 0.95)]")
    return "\n".join(out) + "\n"


def _window_loss(step: int) -> float:
    micro = range((step - EVERY) * GA, step * GA)
    return sum(_micro_loss(m, 0) for m in micro) / len(micro)


def _folded(text: str, pieces: int = 5) -> LogSummary:
    return fold_in_pieces(text, pieces, mtime=MTIME)


READS = [pytest.param(lambda t: parse_log(t, mtime=MTIME), id="cold"),
         pytest.param(_folded, id="folded")]


@pytest.mark.parametrize("read", READS)
def test_the_engine_line_gives_the_step_loss_and_rate(read) -> None:
    summary = read(_run(120))
    last = summary.points[-1]
    assert [p.step for p in summary.points][-3:] == [100, 110, 120]
    assert last.values["loss"] == pytest.approx(_window_loss(120), abs=1e-6)
    assert last.values["learning_rate"] == pytest.approx(1e-4 * (1 - 120 / 1000))
    assert summary.sec_per_step == pytest.approx(SECONDS_A_STEP)


def test_the_engine_line_alone_gives_the_step() -> None:
    """A script that prints no loss of its own: the step and learning rate still."""
    summary = parse_log(_run(50, print_loss=False), mtime=MTIME)
    assert [p.step for p in summary.points] == [10, 20, 30, 40, 50]
    assert "loss" not in summary.points[-1].values


def test_another_ranks_engine_line_or_loss_is_not_rank_0s() -> None:
    text = _run(20).replace("Rank: 0,", "Rank: 7,").replace("[Rank 0]", "[Rank 3]")
    assert parse_log(text, mtime=MTIME).points == ()


@settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))
@given(steps=st.integers(1, 90), data=st.data())
def test_deepspeed_steps_fold_as_the_cold_parse_reads_them(steps: int,
                                                           data: st.DataObject) -> None:
    """Any cut of such a log, folded with the carry through JSON, is ``parse_log`` of it (a
    window's losses cut in two are one mean still), and ``parse_log`` is the per-line pass."""
    from probes.logs.parse import _parse_reference
    from tests.probes.logs.test_incremental import assert_same, cut, cut_points, fold

    text = _run(steps).encode()
    cold = parse_log(text, mtime=MTIME)
    assert_same(fold(cut(text, data.draw(cut_points(text))), mtime=MTIME)[0], cold)
    assert_same(cold, _parse_reference(text, mtime=MTIME))


@pytest.mark.parametrize("read", READS)
def test_deepspeed_chat_total_is_epochs_of_micro_batches_over_accumulation(read) -> None:
    """DeepSpeed-Chat prints ``Beginning of Epoch 1/E, Total Micro Batches N`` (a rank's
    dataloader length), DeepSpeed's engine config dump ``gradient_accumulation_steps .. G``;
    the engine steps the optimizer at every G-th micro-batch of the run (``micro_steps``
    counts across epochs): ``E x N // G`` optimizer steps, never the micro-batches."""
    text = _run(30).replace("Epoch 1/1, Total Micro Batches 4000",
                            "Epoch 1/3, Total Micro Batches 4002")
    assert read(text).total_steps == 3 * 4002 // GA


def test_no_total_without_the_accumulation_steps() -> None:
    """Micro-batches alone are no count of optimizer steps: no total is claimed."""
    text = "\n".join(line for line in _run(30).splitlines()
                     if "gradient_accumulation_steps" not in line)
    assert parse_log(text, mtime=MTIME).total_steps is None


@pytest.mark.parametrize("ds_first", [True, False])
def test_megatron_deepspeed_s_iteration_line_keeps_its_loss(ds_first: bool) -> None:
    """Megatron-DeepSpeed prints both: the engine's line (``steps_per_print``) and its own
    ``iteration N/ T | ... | lm loss: ... |`` at the same step. The engine line adds nothing
    over it, in either order, and never drops its loss."""
    out = []
    for step in range(1, 21):
        at = START + timedelta(seconds=step * SECONDS_A_STEP)
        engine = (f"{_stamp(at)} [INFO] [logging.py:128:log_dist] [Rank 0] step={step}, "
                  "skipped=0, lr=[9e-05], mom=[(0.9, 0.95)]")
        iteration = (f" iteration {step:8d}/{1000:8d} | consumed samples: {step * 32:12d} | "
                     "elapsed time per iteration (ms): 3000.0 | learning rate: 9.000E-05 | "
                     f"global batch size:    32 | lm loss: {3 - step / 100:.6E} | "
                     "loss scale: 1.0 | grad norm: 0.812 |")
        out += [engine, iteration] if ds_first else [iteration, engine]
    summary = parse_log("\n".join(out) + "\n", mtime=MTIME)
    assert summary.points[-1].step == 20
    assert summary.points[-1].values["loss"] == pytest.approx(2.8)
    assert summary.total_steps == 1000
