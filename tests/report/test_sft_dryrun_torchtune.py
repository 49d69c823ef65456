"""torchtune's finetune console is read: the global step and loss from its bar's label.

torchtune's full and LoRA finetune recipes (recipes/full_finetune_distributed.py and the
others) draw one tqdm bar per epoch, ``tqdm(total=self._steps_per_epoch)``, and after each
optimizer step ``pbar.set_description(f"{curr_epoch + 1}|{self.global_step}|Loss:
{loss_to_log}")``; with the default ``DiskLogger`` nothing else reaches stdout. The bar's
count and total are per epoch (they restart each epoch), so the run's total optimization
steps is ``epochs`` x the bar's total (capped by ``max_steps_per_epoch``), both printed in the
resolved config at start-up (``config.log_config``). Replayed on the real SLURM as an sbatch
job (tests/fixtures/sft-dryrun/torchtune_full_epoch2.log: 3 epochs of 120 steps, at global
step 160 in epoch 2), jobtables showed the run in "Filling buffer" for its whole run: the bar
line pattern allowed no ``|`` in a bar's label, so no line was read.
"""

from __future__ import annotations

from pathlib import Path

from probes.logs.incremental import LogCarry, parse_increment
from probes.logs.parse import _parse_reference, parse_log
from tests.report.factories import judge
from tests.report.test_judge_rl_rulebook import _from_log

LOG = Path(__file__).resolve().parents[1] / "fixtures" / "sft-dryrun" / "torchtune_full_epoch2.log"
LAST_LOSS = 1.0575662649676865

_CONFIG = ("INFO:torchtune.utils._logging:Running LoRAFinetuneRecipeSingleDevice with resolved "
           "config:\n\nbatch_size: 4\nepochs: {epochs}\ngradient_accumulation_steps: 8\n"
           "max_steps_per_epoch: {cap}\n\n")


def _bars(epoch_steps: int, done: int, *, start_loss: float = 2.0) -> str:
    """torchtune's bar redraws for ``done`` optimizer steps of ``epoch_steps`` per epoch."""
    lines, step = [], 0
    while step < done:
        epoch = step // epoch_steps
        lines.append(f"{epoch}|{step}:   0%|          | 0/{epoch_steps} [00:00<?, ?it/s]")
        for inner in range(1, epoch_steps + 1):
            step += 1
            pct = round(100 * inner / epoch_steps)
            clock = f"{inner * 2 // 60:02d}:{inner * 2 % 60:02d}"
            lines.append(f"{epoch + 1}|{step}|Loss: {start_loss - 0.001 * step}: {pct:3d}%|█   "
                         f"      | {inner}/{epoch_steps} [{clock}<00:10,  2.00s/it]")
            if step == done:
                break
    return "\n".join(lines) + "\n"


def test_torchtune_step_is_the_global_step_of_epochs_times_bar_total() -> None:
    summary = parse_log(LOG.read_bytes())
    assert summary.points, "the bar's label carries the step and the loss"
    assert summary.points[-1].step == 160  # the global step, not the epoch bar's 40
    assert summary.points[-1].values["loss"] == LAST_LOSS
    assert summary.total_steps == 360  # epochs: 3 x 120 steps a epoch, not the bar's 120
    assert summary.progress is not None and summary.progress.current == 160
    assert summary.sec_per_step is not None and 3.3 < summary.sec_per_step < 3.5
    assert summary.model_dump() == _parse_reference(LOG.read_bytes()).model_dump()


def test_torchtune_run_reads_healthy_with_loss_and_eta() -> None:
    report = judge(_from_log(LOG.read_bytes(), name="sft-torchtune-llama8b")).report
    assert (report.step, report.total_steps) == (160, 360)
    assert report.metrics["loss"] == LAST_LOSS
    assert report.verdict == "healthy"
    assert "Filling buffer" not in report.trend
    assert report.trend.startswith("Loss ") and "ETA 11m" in report.trend  # 200 x ~3.4 s


def test_torchtune_total_from_a_null_step_cap_is_epochs_times_the_bar() -> None:
    text = _CONFIG.format(epochs=2, cap="null") + _bars(50, 70)
    summary = parse_log(text)
    assert (summary.points[-1].step, summary.total_steps) == (70, 100)
    assert summary.points[-1].values["loss"] == 2.0 - 0.001 * 70


def test_torchtune_total_is_capped_by_max_steps_per_epoch() -> None:
    # An older recipe whose bar counted the whole epoch: the cap bounds the steps a epoch.
    text = _CONFIG.format(epochs=4, cap=30) + _bars(50, 20)
    assert parse_log(text).total_steps == 120


def test_torchtune_without_its_config_shows_the_step_without_a_total() -> None:
    summary = parse_log(_bars(50, 70))
    assert summary.points[-1].step == 70
    assert summary.total_steps is None  # never the epoch bar's 50
    assert summary.progress is None  # a bar of no known total (its rate still read)
    assert summary.sec_per_step == 2.0
    report = judge(_from_log(_bars(50, 70), name="sft-torchtune")).report
    assert report.step == 70 and report.total_steps is None
    assert "Filling buffer" not in report.trend


def test_torchtune_reader_paths_agree_on_a_long_run() -> None:
    # Long enough that the read-back suffix starts mid-log: the skimmed bars must agree.
    text = _CONFIG.format(epochs=3, cap="null") + _bars(400, 900)
    fast, slow = parse_log(text), _parse_reference(text)
    assert fast.model_dump() == slow.model_dump()
    assert fast.points[-1].step == 900 and fast.total_steps == 1200


def test_torchtune_stdout_logger_lines_are_read() -> None:
    text = _CONFIG.format(epochs=1, cap="null") + "".join(
        f"Step {n} | loss:{1.5 - 0.01 * n} lr:2e-05 tokens_per_second_per_gpu:{900 + n}.5 \n"
        for n in range(1, 11))
    summary = parse_log(text)
    assert [p.step for p in summary.points] == list(range(1, 11))
    assert summary.points[-1].values["loss"] == 1.5 - 0.01 * 10
    assert summary.points[-1].values["learning_rate"] == 2e-05


def test_torchtune_fold_reads_what_the_whole_pass_reads() -> None:
    # The bot's fold: the config read in the first chunk is carried to the later bars.
    data = LOG.read_bytes()
    carry = None
    for cut in range(0, len(data), 997):
        summary, carry = parse_increment(carry, data[cut:cut + 997])
        carry = LogCarry.model_validate_json(carry.model_dump_json())
    whole = _parse_reference(data)
    assert (summary.points[-1].step, summary.total_steps) == (160, 360)
    assert summary.points == whole.points and summary.progress == whole.progress
    assert summary.sec_per_step == whole.sec_per_step
