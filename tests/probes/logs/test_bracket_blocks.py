"""A bracketed progress header, then the step's metrics one per indented line.

MosaicML Composer's ``ConsoleLogger`` (composer/loggers/console_logger.py, the console of
every llm-foundry run) prints each logged batch as ``[batch=N/T]:`` (``max_duration`` in
batches) or ``[epoch=E][batch=b/L]:`` (in epochs: the batch within the epoch, of the
dataloader's length), then ``\\n\\t Train <name>: <value>`` per metric (floats ``.4f``, ints
as they are); its trainer logs ``time/batch`` (the batches done before this one) among them::

    [batch=12/1000]:
    \\t Train time/batch: 11
    \\t Train loss/train/total: 2.3456
    \\t Train l2_norm/grad/global: 0.3120
    \\t Train lr-DecoupledAdamW/group0: 0.0000
    \\t Train throughput/batches_per_sec: 0.2439

AI2's OLMo trainer (olmo/train.py ``log_metrics_to_console``) logs ``[step=N/T]`` (or
``[step=N/T,epoch=E]``) through its logging prefix, then ``    name=value`` per metric
(``train/CrossEntropyLoss``, ``optim/total_grad_norm``, ``optim/learning_rate_group0``).

Policy: the block is read one line after another after its header, as EasyR1's is; the
first line that is no metric line (the next header, a log line) ends it and makes it the
step's point; a block still open where the text ends is no point yet. A ``[batch=N/T]`` or
``[step=N/T]`` header gives the run's total T; an epoch header's L is the epoch's, not the
run's, and its step is ``time/batch`` + 1. Composer's ``throughput/batches_per_sec`` (its
SpeedMonitor's window average) gives the step time; OLMo's stamped headers give it by their
stamps.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from probes.logs.parse import parse_log
from probes.models import LogSummary
from tests.probes.logs.pieces import fold_in_pieces

MTIME = datetime(2026, 12, 5, 4, 0, tzinfo=UTC)


def _composer_block(step: int, header: str) -> str:
    rows = [("time/batch", str(step - 1)), ("time/sample", str((step - 1) * 48)),
            ("memory/current_allocated_mem", "14.5360"),
            ("trainer/device_train_microbatch_size", "8"),
            ("loss/train/total", f"{3.0 - step / 100:.4f}"),
            ("metrics/train/LanguageCrossEntropy", f"{3.0 - step / 100:.4f}"),
            ("l2_norm/grad/global", "0.3120"), ("time/train", f"{step * 4 / 3600:.4f}"),
            ("lr-DecoupledAdamW/group0", "0.0000" if step > 3 else "0.0001"),
            ("time/remaining_estimate", "1.1377")]
    if step > 10:
        rows += [("throughput/batches_per_sec", "0.2500"),
                 ("throughput/device/tokens_per_sec", "2997.0700")]
    return header + "".join(f"\n\t Train {key}: {value}" for key, value in rows)


def composer_log(steps: int, *, per_epoch: int | None = None, duration: str = "") -> str:
    """``duration``: the ``max_duration`` llm-foundry's ``log_config`` prints (``om.to_yaml``)
    before training starts, if any."""
    config = (f"max_seq_len: 2048\nmax_duration: {duration}\neval_interval: 1ep\n"
              "global_train_batch_size: 48\n") if duration else ""
    head = (config + "2026-12-05 03:10:13,120: rank0[41822][MainThread]: INFO: __main__: "
            "Starting training...\n" + "*" * 30 + "\nConfig:\nnum_gpus_per_node: 8\n"
            "num_nodes: 1\nrank_zero_seed: 17\n\n" + "*" * 30 + "\n")
    blocks = []
    for step in range(1, steps + 1):
        if per_epoch is None:
            header = f"[batch={step}/1000]:"
        else:
            epoch, inner = divmod(step - 1, per_epoch)
            header = f"[epoch={epoch + 1}][batch={inner + 1}/{per_epoch}]:"
        blocks.append(_composer_block(step, header))
    return head + "\n".join(blocks) + "\n"


def _olmo_log(steps: int) -> str:
    out = []
    for step in range(1, steps + 1):
        out.append(f"2026-12-05 03:{10 + step // 6:02d}:{step % 6 * 10:02d}.123\tgpu-01:0\t"
                   f"olmo.train:968\tINFO\t[step={step}/739328,epoch=0]")
        out += [f"    train/CrossEntropyLoss={3.2 - step / 100:.3f}",
                f"    train/Perplexity={20.5 - step / 10:.2f}",
                "    optim/total_grad_norm=0.4521",
                "    optim/learning_rate_group0=0.0004",
                f"    throughput/total_tokens={step * 4194304:,d}",
                "    System/Peak GPU Memory (MB)=61,234"]
    return "\n".join(out) + "\n"


def _folded(text: str) -> LogSummary:
    return fold_in_pieces(text, 5, mtime=MTIME)


READS = [pytest.param(lambda t: parse_log(t, mtime=MTIME), id="cold"),
         pytest.param(_folded, id="folded")]


@pytest.mark.parametrize("read", READS)
def test_composer_batch_blocks(read) -> None:
    summary = read(composer_log(140))
    last = summary.points[-1]
    assert last.step == 139  # step 140's block is still open: its next line may come
    assert last.values["loss"] == pytest.approx(3.0 - 139 / 100)
    assert last.values["grad_norm"] == pytest.approx(0.312)
    assert "learning_rate" not in last.values  # printed 0.0000: below Composer's .4f
    assert summary.total_steps == 1000
    assert last.values["sec_per_step"] == pytest.approx(4.0)  # 1 / batches_per_sec
    steps = [point.step for point in summary.points]
    assert steps == list(range(steps[0], 140))


@pytest.mark.parametrize("read", READS)
def test_composer_epoch_blocks_count_every_epoch(read) -> None:
    summary = read(composer_log(210, per_epoch=160))
    last = summary.points[-1]
    assert last.step == 209  # epoch 2's batch 49: time/batch 208 + 1
    assert last.values["loss"] == pytest.approx(3.0 - 209 / 100)
    assert summary.total_steps is None  # 160 is one epoch's batches, not the run's


@pytest.mark.parametrize("read", READS)
def test_composer_epochs_total_from_max_duration(read) -> None:
    """llm-foundry's finetuning yamls run by epochs (``max_duration: 2ep``): the run's total is
    those epochs of the header's batches an epoch."""
    summary = read(composer_log(210, per_epoch=160, duration="2ep"))
    assert summary.points[-1].step == 209
    assert summary.total_steps == 320


@pytest.mark.parametrize("read", READS)
def test_olmo_step_blocks(read) -> None:
    summary = read(_olmo_log(60))
    last = summary.points[-1]
    assert last.step == 59
    assert last.values["loss"] == pytest.approx(3.2 - 59 / 100)
    assert last.values["grad_norm"] == pytest.approx(0.4521)
    assert last.values["learning_rate"] == pytest.approx(0.0004)
    assert summary.total_steps == 739328
    assert summary.sec_per_step == pytest.approx(10.0)


@pytest.mark.parametrize("read", READS)
def test_composer_eval_block_is_no_training_point(read) -> None:
    text = composer_log(20) + (
        "[Eval batch=1/10] Eval on eval data\n"
        "[Eval batch=10/10] Eval on eval data:\n"
        "\t Eval metrics/eval/LanguageCrossEntropy: 9.8000\n"
        "\t Eval metrics/eval/LanguagePerplexity: 18000.0000\n")
    summary = read(text)
    assert summary.points[-1].step == 20  # the eval header closed step 20's block
    assert summary.points[-1].values["loss"] == pytest.approx(2.8)
