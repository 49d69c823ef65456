"""NeMo 2's finetune console is read: loss, step and total in optimizer steps, and the rate.

NeMo 2 (``llm.finetune``) prints one line per ``log_every_n_steps`` from
nemo/lightning/pytorch/callbacks/progress_printer.py: ``Training epoch {epoch}, iteration
{n-1}/{max_steps-1} | lr: ... | global_step: ... | reduced_train_loss: ... | train_step_timing
in s: ... | consumed_samples: ...``. The iteration and its total are zero-based (``n`` is the
number of steps done), the loss is ``reduced_train_loss`` and the step time ``train_step_timing
in s``. Replayed on the real SLURM (tests/fixtures/sft-dryrun/nemo2_finetune.log, 60 of 1000
steps), jobtables sweep read step 59/999, no loss, no rate: 'First steps logged' for a run
60 steps in.
"""

from __future__ import annotations

from pathlib import Path

from probes.logs.parse import parse_log
from tests.report.factories import judge
from tests.report.test_judge_rl_rulebook import _from_log

LOG = Path(__file__).resolve().parents[1] / "fixtures" / "sft-dryrun" / "nemo2_finetune.log"


def test_nemo2_progress_is_steps_done_of_max_steps() -> None:
    summary = parse_log(LOG.read_bytes())
    assert summary.total_steps == 1000  # trainer.max_steps, not max_steps - 1
    assert summary.points[-1].step == 60  # 'iteration 59/999' is the 60th step done
    assert summary.points[-1].values["loss"] == 1.385  # reduced_train_loss
    assert summary.sec_per_step is not None and 4.0 < summary.sec_per_step < 4.2


def test_nemo2_run_reads_healthy_with_loss_and_eta() -> None:
    report = judge(_from_log(LOG.read_bytes(), name="sft-nemo2-llama8b")).report
    assert (report.step, report.total_steps) == (60, 1000)
    assert report.metrics["loss"] == 1.385
    assert report.verdict == "healthy"
    assert report.trend.startswith("Loss ") and "healthy" in report.trend
    assert "ETA 1h" in report.trend  # 940 steps x ~4.1 s


def test_nemo2_last_line_is_the_last_step() -> None:
    text = "\n".join(
        f"Training epoch 0, iteration {n}/99 | lr: 1e-05 | global_step: {n} | "
        f"reduced_train_loss: {1.5 - 0.001 * n:.4} | train_step_timing in s: 2.0"
        for n in range(90, 100))
    summary = parse_log(text)
    assert summary.total_steps == 100 and summary.points[-1].step == 100


def test_megatron_lm_iterations_stay_one_based() -> None:
    text = ("[2024-05-01 10:00:00] iteration       10/     500 | consumed samples: 1280 | "
            "elapsed time per iteration (ms): 2100.5 | learning rate: 1.0E-05 | "
            "global batch size: 128 | lm loss: 1.234E+00 | grad norm: 0.834 |")
    summary = parse_log(text)
    assert summary.total_steps == 500 and summary.points[-1].step == 10
