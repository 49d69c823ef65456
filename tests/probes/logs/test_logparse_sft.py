"""SFT and HF/TRL logs through parse_log: step dicts, the training bar, totals, the rate."""

from __future__ import annotations

import json
import math
from pathlib import Path
from textwrap import dedent

import pytest

from probes.logs.history import MetricScan
from probes.logs.incremental import LogCarry, parse_increment
from probes.logs.parse import _parse_reference, parse_log, trailing_rate
from probes.logs.recent import HISTORY_DEPTH
from probes.models import LogSummary
from probes.remote.completion import parse_trainer_log_jsonl

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
HF = FIXTURES / "hf-transformers-5.24.0"
TRL = FIXTURES / "trl-1.16.0"
VERL = FIXTURES / "verl-0.9.1"


def test_hf5_fixture_steps_from_training_bar() -> None:
    """transformers 5.x string-valued dicts get steps 1..95 from the bar, eval dicts skipped;
    the summary keeps the last HISTORY_DEPTH of them, and the log's start reads step 1."""
    text = (HF / "sft_healthy.out").read_bytes()
    summary = parse_log(text)
    assert [p.step for p in summary.points] == list(range(96 - HISTORY_DEPTH, 96))
    start = parse_log(text[: text.index(b"\n", text.index(b"'loss'"))])
    assert [p.step for p in start.points] == [1]
    assert start.points[0].values == {
        "loss": 5.717,
        "grad_norm": 1.418,
        "learning_rate": 0.0,
        "epoch": 0.01053,
    }
    assert summary.points[-1].values["epoch"] == 1.0
    assert summary.total_steps == 95
    assert summary.progress is not None
    assert (summary.progress.current, summary.progress.total) == (95, 95)
    assert summary.finished
    assert summary.formats == ("hf",)


def test_hf5_fixture_nan_grad_norm_kept() -> None:
    """A NaN grad norm stays a float NaN next to the zero loss the trainer prints."""
    summary = parse_log((HF / "sft_nan.out").read_text())
    last = summary.points[-1].values
    assert last["loss"] == 0.0
    assert math.isnan(last["grad_norm"])
    assert any(math.isnan(p.values["grad_norm"]) for p in summary.points)


def test_trl_grpo_fixture_rl_metrics() -> None:
    """TRL GRPO dicts map reward, entropy, clip_ratio/region_mean and mean length."""
    summary = parse_log((TRL / "grpo_healthy.out").read_bytes())
    assert len(summary.points) == 30
    first = summary.points[0].values
    assert first["reward"] == pytest.approx(0.08596)
    assert first["entropy"] == pytest.approx(5.688)
    assert first["clip_ratio"] == 0.0
    assert first["avg_num_tokens"] == 16.0
    assert summary.total_steps == 30


def test_verl_fixture_rate_checkpoints_and_finish() -> None:
    """The real-formatted verl log: 40 steps, saves at 20/40, a trailing rate, final validation."""
    summary = parse_log((VERL / "console.log").read_bytes())
    assert [p.step for p in summary.points] == list(range(41 - HISTORY_DEPTH, 41))
    assert summary.total_steps == 40
    assert summary.checkpoint_steps == (20, 40)
    assert summary.finished
    assert summary.sec_per_step is not None
    assert 100 < summary.sec_per_step < 130


BANNER = dedent(
    """\
    [INFO|trainer.py:2414] 2025-03-01 12:35:10,123 >> ***** Running training *****
    [INFO|trainer.py:2415] 2025-03-01 12:35:10,123 >>   Num examples = 52,002
    [INFO|trainer.py:2416] 2025-03-01 12:35:10,124 >>   Num Epochs = 3
    [INFO|trainer.py:2420] 2025-03-01 12:35:10,124 >>   Total optimization steps = 2,436
    """
)
TOKENIZER_BAR = (
    "\rRunning tokenizer on dataset (num_proc=16):  50%|█████     | 26001/52002 "
    "[00:06<00:06, 4213.33 examples/s]"
    "\rRunning tokenizer on dataset (num_proc=16): 100%|██████████| 52002/52002 "
    "[00:12<00:00, 4213.33 examples/s]\n"
)


def bar(step: int, total: int, elapsed: int) -> str:
    """One HF training-bar redraw (no desc) with a whole-second elapsed clock."""
    minutes, seconds = divmod(elapsed, 60)
    clock = f"{minutes:02d}:{seconds:02d}"
    return f"\r  {100 * step // total}%|███▍      | {step}/{total} [{clock}<22:10,  2.35s/it]"


def test_banner_total_not_example_count_and_tokenizer_bar_ignored() -> None:
    """Total steps come from the banner (commas removed), not the tokenizer bar's example count."""
    text = BANNER + TOKENIZER_BAR + bar(320, 2436, 640) + "\n"
    summary = parse_log(text)
    assert summary.total_steps == 2436
    assert summary.progress is not None
    assert (summary.progress.current, summary.progress.total) == (320, 2436)
    assert summary.progress.sec_per_it == pytest.approx(2.35)
    assert summary.last_timestamp is not None and summary.last_timestamp.year == 2025


def test_older_hf_float_dicts_with_logging_interval() -> None:
    """Float-valued dicts every 10 steps take the bar's step; the train_runtime dict finishes."""
    text = ""
    for step in (10, 20, 30):
        text += bar(step, 100, step * 2)
        text += (
            f"\r{{'loss': {3 - step / 100}, 'grad_norm': 0.8765, 'learning_rate': 4.9e-05, "
            f"'epoch': {step / 100}}}\n"
        )
    text += "{'train_runtime': 60.1, 'train_samples_per_second': 12.3, 'train_loss': 0.98}\n"
    summary = parse_log(text)
    assert [p.step for p in summary.points] == [10, 20, 30]
    assert summary.points[-1].values["loss"] == pytest.approx(2.7)
    assert summary.finished


def test_rate_ignores_a_checkpoint_save_spike() -> None:
    """A 60 s save between two 2 s steps does not move the trailing-window rate."""
    elapsed, text = 0, ""
    for step in range(1, 21):
        elapsed += 62 if step == 15 else 2
        text += bar(step, 100, elapsed)
    text += (
        "\n[INFO|trainer.py:3800] 2025-03-01 13:00:00,000 >> "
        "Saving model checkpoint to out/checkpoint-15\n"
    )
    summary = parse_log(text)
    assert summary.sec_per_step == pytest.approx(2.0)
    assert summary.checkpoint_steps == (15,)


@pytest.mark.parametrize(
    ("events", "expected"),
    [
        ([], None),
        ([(5, 10.0)], None),
        ([(1, 0.0), (2, 2.0), (3, 4.0), (4, 6.0)], 2.0),
        ([(1, 0.0), (2, 2.0), (3, 64.0), (4, 66.0), (5, 68.0)], 2.0),  # one save spike
        ([(1, 0.0), (11, 5.0), (21, 10.0)], 0.5),  # sparse redraws
        ([(1, 0.0), (2, 0.0), (3, 1.0), (4, 1.0), (5, 1.0), (6, 2.0)], 0.4),  # whole seconds
        ([(3, 10.0), (2, 12.0)], None),  # going backwards: no rate
    ],
)
def test_trailing_rate_table(events: list[tuple[int, float]], expected: float | None) -> None:
    """The trailing window is total time over total steps, without pairs 3x the median."""
    rate = trailing_rate(events)
    assert rate == (None if expected is None else pytest.approx(expected))


def test_nested_eval_bar_is_not_the_training_bar() -> None:
    """An eval bar drawn at position 1 (cursor-up escape) never replaces the training bar."""
    text = bar(40, 95, 4) + "\n\x1b[A  0%|          | 0/3 [00:00<?, ?it/s]\x1b[A\n"
    summary = parse_log(text)
    assert summary.progress is not None
    assert summary.progress.total == 95


@pytest.mark.parametrize(
    ("text", "current", "total", "finished"),
    [
        ('{"current_steps": 10, "total_steps": 375, "loss": 2.2}\n', 10, 375, False),
        ('{"current_steps": 375, "total_steps": 375, "loss": 0.9}\n', 375, 375, True),
        (  # resumed run: steps repeat; the last record wins, not the largest
            '{"current_steps": 300, "total_steps": 375}\n'
            '{"current_steps": 200, "total_steps": 375}\n',
            200,
            375,
            False,
        ),
        ('{"current_steps": 5, "total_steps": 10}\n{"current_steps": 6, "tot', 5, 10, False),
        ("", None, None, False),
        ("not json\n[1, 2]\n", None, None, False),
    ],
)
def test_trainer_log_jsonl_completion(
    text: str, current: int | None, total: int | None, finished: bool
) -> None:
    """trainer_log.jsonl answers only 'did it reach the last step', tolerating cut lines."""
    status = parse_trainer_log_jsonl(text)
    assert (status["current_steps"], status["total_steps"], status["finished"]) == (
        current,
        total,
        finished,
    )


# BLOOM 176B (bigscience tr11 chronicles): the first lm-loss spike, as Megatron-DeepSpeed printed
# it under the launcher's ``[defaultN]:`` prefix; one of these lines is cut from the real log.
_BLOOM_SPIKE = ((31214, 2.198845, 0.242, 105.76), (31215, 2.220424, 0.947, 105.90),
                (31216, 2.595213, 2.390, 106.40), (31217, 2.241558, 15.886, 106.33),
                (31218, 2.345, 145.0, 400.0), (31219, 5.098, 960.0, 106.2))


def _megatron_line(step: int, loss: float, grad: float, seconds: float) -> str:
    return (
        f"[default7]: iteration {step:>8}/  115311 | consumed samples:     {step * 2048} | "
        f"consumed tokens:  {step * 2048 * 2048} | elapsed time per iteration (s): {seconds:.2f}"
        f" | learning rate: 5.279E-05 | global batch size:  2048 | lm loss: {loss:E} | "
        f"grad norm: {grad:.3f} | num zeros: 0.0 | number of skipped iterations:   0 | "
        "number of nan iterations:   0 | samples per second: 19.338 | TFLOPs: 148.06 |"
    )


def test_megatron_iteration_lines() -> None:
    """``iteration N/ T | key: value`` lines give steps, loss, grad norm, LR, the train-iters
    total (not consumed samples) and a trailing rate that the 400 s save spike does not move."""
    text = "\r\n".join(_megatron_line(*row) for row in _BLOOM_SPIKE) + "\r\n"
    summary = parse_log(text)
    assert [p.step for p in summary.points] == [row[0] for row in _BLOOM_SPIKE]
    last = summary.points[-1].values
    assert last == {"loss": pytest.approx(5.098), "grad_norm": 960.0,
                    "learning_rate": pytest.approx(5.279e-05)}
    assert summary.total_steps == 115311 and "megatron" in summary.formats
    assert summary.sec_per_step == pytest.approx(106.14, abs=0.1)


@pytest.mark.parametrize(
    "line",
    [
        " iteration      100/  1000 | consumed samples: 6400 | elapsed time per iteration (ms):"
        " 1234.5 | learning rate: 1.000E-04 | global batch size: 64 | lm loss: 2.345E+00 |"
        " loss scale: 1.0 | grad norm: 0.876 | number of skipped iterations: 0 |",
        "[2024-05-01 10:00:00] iteration 100/ 1000 | elapsed time per iteration (ms): 1234.5 |"
        " learning rate: 1.0E-04 | lm loss: 2.345E+00 | grad norm: 0.876 |",
        " iteration 100/ 1000 | elapsed time per iteration (ms): 1234.5 | learning rate: 1.0E-04 |"
        " lm_loss: 2.3450E+00 | grad norm: 0.876 |",
    ],
)
def test_megatron_lm_and_neox_variants(line: str) -> None:
    """Megatron-LM (ms timings, leading timestamp) and GPT-NeoX (``lm_loss``) read the same."""
    summary = parse_log(line + "\n")
    assert [p.step for p in summary.points] == [100] and summary.total_steps == 1000
    assert summary.points[0].values["loss"] == pytest.approx(2.345)
    assert summary.points[0].values["grad_norm"] == pytest.approx(0.876)


def test_megatron_leaves_a_nan_loss_out_and_prints_its_nan_grad_norm() -> None:
    """Megatron-LM's ``training_log`` prints a loss only ``if avg > 0.0``, so once the loss is
    NaN the line has no ``lm loss`` and says ``grad norm: nan``: that step's loss is NaN (the
    Loss column showed the last finite loss, the job a grad-explosion warning)."""
    lines = [
        f" iteration {it:8d}/    5000 | elapsed time per iteration (ms): 1234.5 | learning rate:"
        f" 3.0E-04 |{'' if it > 300 else f' lm loss: {2.5 - it / 1000:.6E} |'} loss scale: 1.0 |"
        f" grad norm: {'nan' if it > 300 else '0.312'} | number of skipped iterations:   0 |"
        for it in range(10, 401, 10)]
    summary = parse_log("\n".join(lines) + "\n")
    by_step = {p.step: p.values for p in summary.points}
    assert by_step[300]["loss"] == pytest.approx(2.2)
    assert math.isnan(by_step[310]["loss"]) and math.isnan(by_step[400]["loss"])
    assert math.isnan(by_step[400]["grad_norm"])
    finite = parse_log(" iteration 10/ 100 | elapsed time per iteration (ms): 1.0 |"
                       " grad norm: 0.5 |\n")
    assert "loss" not in finite.points[0].values  # no NaN grad: nothing is made up


@pytest.mark.parametrize(
    "line",
    ["Skipping iteration 100/1000 because of NaN", "iteration 100/1000 done", "per iteration: 3"],
)
def test_iteration_near_misses(line: str) -> None:
    """Near-miss: prose mentioning an iteration is no metric line."""
    assert parse_log(line + "\n").points == ()


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("[2026-11-30 07:59:00] INFO:     127.0.0.1:5 - \"POST /v1/completions\" 200", "07:59:00"),
        ("[2024-05-01 10:00:00.250] iteration 1/ 10 | lm loss: 2.0 |", "10:00:00.250000"),
        ("[INFO|2026-11-30 07:59:00] trainer: step", "07:59:00"),
        ("[rank0]: 2026-11-30 07:59:00 is not a leading stamp", None),
    ],
)
def test_bracketed_iso_timestamps(line: str, expected: str | None) -> None:
    """SGLang / Megatron-LM ``[YYYY-MM-DD HH:MM:SS]`` line stamps are the log's clock too."""
    stamp = parse_log(line + "\n").last_timestamp
    assert (stamp.time().isoformat() if stamp else None) == expected


def test_verl_sft_trainer_names_its_metrics_under_train() -> None:
    """verl >= 0.6's SFT trainer (``verl/trainer/sft_trainer.py``) renames ``loss``,
    ``grad_norm`` and ``lr`` to ``train/loss``, ``train/grad_norm`` and ``train/lr`` before
    ``concat_dict_to_str`` prints ``step:N - key:value - ...``; the Grad Norm column read
    nothing. TRL's GRPO up to 0.17 printed ``completion_length`` (``completions/mean_length``
    since)."""
    lines = ["Total training steps: 1200,"]
    for step in range(1, 41):
        lines.append(f"Epoch 1/3:  3%|          | {step}/400 [00:{step:02d}<10:00,  3.01s/it]\r"
                     f"step:{step} - train/loss:{1 + 1 / step!r} - train/grad_norm:"
                     f"{0.5 + step / 100!r} - train/lr:1e-05 - train/mfu:0.4123")
    summary = parse_log("\n".join(lines) + "\n")
    last = summary.points[-1]
    assert last.step == 40 and summary.total_steps == 1200
    assert last.values["loss"] == pytest.approx(1.025)
    assert last.values["grad_norm"] == pytest.approx(0.9)
    assert last.values["learning_rate"] == pytest.approx(1e-5)
    trl = parse_log("{'loss': 0.01, 'completion_length': 212.5, 'reward': 0.4}\n")
    assert trl.points[-1].values["avg_num_tokens"] == 212.5


@pytest.mark.parametrize("prefix", ["192.168.50.170: ", "gpu-node-7.cluster: ", "0: ", "  0: ",
                                    "[default0]:", "[rank0]: ", "node01: "])
def test_a_launchers_rank_or_host_prefix_before_each_dict(prefix: str) -> None:
    """Multi-node DeepSpeed / pdsh (``<host>: ``), ``srun -l`` (``0: ``) and
    ``torchrun --tee`` (``[default0]:``, ``[rank0]:``) put a prefix before each line of a
    rank's output: the HF dicts behind it are still read (none was: a multi-node run sat in
    "Filling buffer", and a NaN loss there raised nothing)."""
    text = "".join(f"{prefix}{{'loss': {1.0 / (i + 1):.4f}, 'grad_norm': 0.5, "
                   f"'learning_rate': 1e-05, 'epoch': {i / 100:.2f}}}\n" for i in range(30))
    text += f"{prefix}{{'loss': nan, 'grad_norm': nan, 'learning_rate': 1e-05, 'epoch': 0.3}}\n"
    summary = parse_log(text)
    assert len(summary.points) == 31
    assert summary.points[-2].values["loss"] == pytest.approx(1 / 30, abs=1e-4)
    assert math.isnan(summary.points[-1].values["loss"])


@pytest.mark.parametrize("postfix", ["lr=0.0001, step_loss=0.0612",
                                     "lr=0.0001, step_loss=0.0612, " + "x" * 120 + "=1"])
def test_a_bar_with_a_set_postfix_is_the_training_bar(postfix: str) -> None:
    """accelerate/diffusers loops call ``progress_bar.set_postfix(**logs)``: the bar ends
    ``1.00s/it, lr=..., step_loss=...]``. Its rate is ``1.00s/it`` and it is the training
    bar (it was refused: the rate read as the whole postfix; a long postfix was no bar)."""
    text = "".join(f"\rSteps:   {s // 10}%|▏         | {s}/1000 [00:{s % 60:02d}<15:00,  "
                   f"1.00s/it, {postfix}]" for s in range(1, 41)) + "\n"
    summary = parse_log(text)
    assert summary.progress is not None and summary.progress.current == 40
    assert summary.total_steps == 1000 and summary.sec_per_step == pytest.approx(1.0)


@pytest.mark.parametrize("prefix", ["1: ", "  3: ", "[default1]:", "[rank7]: ", "val: ",
                                    "train: "])
def test_another_ranks_or_a_labelled_dict_is_no_step(prefix: str) -> None:
    """Near-miss: rank 0 logs; another rank's dicts (``srun -l``'s ``3: ``, torchrun's
    ``[rank7]:``) would interleave as steps, and ``val: {...}`` names no host: none is read."""
    text = "".join(f"{{'loss': {1.0 / (i + 1):.4f}, 'grad_norm': 0.5, 'epoch': {i / 100:.2f}}}\n"
                   for i in range(10))
    text += f"{prefix}{{'loss': 9.5, 'grad_norm': 0.5, 'epoch': 0.1}}\n"
    summary = parse_log(text)
    assert len(summary.points) == 10 and summary.points[-1].values["loss"] == 0.1


# --- HF Trainer with ``disable_tqdm=True``: no bar, the step from the dict's epoch -------------

def _true_steps(mode: str) -> list[int]:
    """The real run's step of each training dict (``trainer.state.log_history``)."""
    sidecar = json.loads((HF / f"sft_notqdm_{mode}_steps.json").read_text())
    return list(sidecar["train_steps"])


def _fold_whole(text: bytes, pieces: int = 7) -> LogSummary:
    """``parse_increment`` over ``text`` cut into ``pieces`` reads, the carry through JSON."""
    carry, summary = None, LogSummary(line_count=0)
    size = -(-len(text) // pieces)
    for at in range(0, len(text), size):
        summary, carry = parse_increment(carry, text[at:at + size])
        carry = LogCarry.model_validate_json(carry.model_dump_json())
    return summary


@pytest.mark.parametrize(("mode", "total"), [("epochs", 144), ("maxsteps", 100), ("args", None)])
def test_hf_disable_tqdm_dicts_take_their_real_steps(mode: str, total: int | None) -> None:
    """Real transformers 5.24 runs with ``disable_tqdm=True`` print only the dicts. Their
    steps were the dict count (1, 2, ...: 3-4x too small here, 10-500x at real
    ``logging_steps``). ``epochs``: 3 epochs, GA 2, ``logging_steps=4``, the banner says 48
    update steps per epoch; ``maxsteps``: ``max_steps=100`` (the banner's ``Num Epochs = 3``
    is rounded up); ``args``: no banner, a printed ``TrainingArguments`` with
    ``logging_steps=3`` and ``logging_first_step``. The cold pass and the bot's fold read the
    run's own steps (from its ``log_history``)."""
    text = (HF / f"sft_notqdm_{mode}.out").read_bytes()
    want = _true_steps(mode)[-HISTORY_DEPTH:]
    cold = parse_log(text)
    assert [p.step for p in cold.points] == want
    assert [p.step for p in _fold_whole(text).points] == want
    assert cold.total_steps == total and cold.progress is None


@pytest.mark.parametrize("mode", ["epochs", "maxsteps"])
def test_hf4_banner_without_update_steps_per_epoch(mode: str) -> None:
    """transformers 4.x's banner has no ``Num update steps per epoch`` line: steps per epoch
    are ``Total optimization steps / Num Epochs`` for a run by epochs, ``ceil(Num examples /
    Total train batch size)`` for a run by ``max_steps`` (where the first reads 33, not 48)."""
    text = b"".join(line for line in (HF / f"sft_notqdm_{mode}.out").read_bytes()
                    .splitlines(keepends=True) if b"Num update steps per epoch" not in line)
    assert [p.step for p in parse_log(text).points] == _true_steps(mode)[-HISTORY_DEPTH:]


def _hf4_banner(examples: int, epochs: str, batch: int, total: int) -> str:
    """transformers 4.x's training banner in LLaMA-Factory's explicit format."""
    head = "[INFO|trainer.py:2414] 2025-03-01 12:35:10,123 >> "
    return "".join(f"{head}{line}\n" for line in (
        "***** Running training *****", f"  Num examples = {examples:,}",
        f"  Num Epochs = {epochs}", "  Instantaneous batch size per device = 8",
        f"  Total train batch size (w. parallel, distributed & accumulation) = {batch:,}",
        "  Gradient Accumulation steps = 3", f"  Total optimization steps = {total:,}",
        "  Number of trainable parameters = 20,971,520"))


@pytest.mark.parametrize(
    ("banner", "per_epoch", "total"),
    [
        (_hf4_banner(24_000, "3", 48, 1_500), 500, 1_500),  # by epochs: 1,500 / 3
        (_hf4_banner(24_000, "1", 48, 400), 500, 400),  # max_steps=400 < one epoch of 500
        (_hf4_banner(23_990, "3", 48, 1_250), 500, 1_250),  # num_train_epochs=2.5
        # A dataset of no length: Num Epochs is sys.maxsize, Num examples max_steps x batch.
        (_hf4_banner(48 * 900, "9,223,372,036,854,775,807", 48, 900), 900, 900),
        # A sampler that repeats each prompt (TRL's GRPO): examples / batch says 21 steps an
        # epoch, which 2 epochs of 1,000 steps cannot be; total / epochs is right.
        (_hf4_banner(200, "2", 10, 1_000), 500, 1_000),
    ],
)
def test_hf4_printer_dicts_take_the_step_of_their_epoch(
        banner: str, per_epoch: int, total: int) -> None:
    """transformers 4.x's ``PrinterCallback`` prints the raw float epoch, ``epoch + (batch
    + 1) / batches_in_epoch`` (GA 3 here, so a step's epoch is a multiple of 3 batches),
    every 50 steps: each dict's step is its epoch times the steps per epoch the banner's
    numbers are consistent with, not its count (1, 2, 3, ...)."""
    batches = 3 * per_epoch
    lines = [banner]
    for step in range(50, total + 1, 50):
        epoch, k = divmod(step - 1, per_epoch)
        lines.append(f"{{'loss': {2 - step / 2000!r}, 'grad_norm': 0.8, 'learning_rate': 1e-05, "
                     f"'epoch': {epoch + 3 * (k + 1) / batches!r}}}\n")
    lines.append("{'train_runtime': 3600.5, 'train_samples_per_second': 12.3, "
                 f"'train_loss': 1.5, 'epoch': {total / per_epoch!r}}}\n")
    summary = parse_log("".join(lines))
    assert [p.step for p in summary.points] == list(range(50, total + 1, 50))[-HISTORY_DEPTH:]
    assert summary.total_steps == total and summary.finished
    assert [p.step for p in _fold_whole("".join(lines).encode()).points] == [
        p.step for p in summary.points]


def test_coarse_epochs_snap_to_logging_steps() -> None:
    """transformers 5 prints the epoch to 4 significant digits: at 1,000 steps an epoch,
    ``'12.34'`` is a step in 12,335-12,345. With ``logging_steps=3`` printed, the step read is
    a logged one (a multiple of 3) by that window (within 5 + 3 / 2 of each dict's own; dicts
    of one printed epoch share a step), not a step no dict is logged at."""
    head = "".join(f"[transformers]   {line}\n" for line in (
        "Num examples = 16,000", "Num Epochs = 20", "Num update steps per epoch = 1,000",
        "Total train batch size (w. parallel, distributed & accumulation) = 16",
        "Total optimization steps = 20,000"))
    text = "TrainingArguments(\nlogging_first_step=False,\nlogging_steps=3,\n" \
           "logging_strategy=IntervalStrategy.STEPS,\n)\n" + head
    steps = range(12_003, 12_300, 3)
    text += "".join(f"{{'loss': '{1 + s / 1e5:.6g}', 'epoch': '{s / 1000:.4g}'}}\n" for s in steps)
    summary = parse_log(text)
    assert len(summary.points) >= 25
    for point in summary.points:
        true = round((point.values["loss"] - 1) * 1e5)
        assert point.step % 3 == 0 and abs(point.step - true) <= 6


@pytest.mark.parametrize(
    ("args", "total", "every"),
    [
        ("logging_steps=10,\nlogging_strategy=steps,", None, 10),
        ("'logging_steps': 0.05, 'logging_strategy': 'steps'", 200, 10),  # a fraction of total
        ("logging_steps: 0.05", None, None),  # a fraction, and no total to take it of
        ("logging_steps=500,\nlogging_strategy=IntervalStrategy.EPOCH,", None, None),
        ("logging_steps=7,\nlogging_first_step=True,", None, 7),
    ],
)
def test_logging_fields_as_printed(args: str, total: int | None, every: int | None) -> None:
    """``TrainingArguments``' repr, a JSON or YAML config: the dicts' spacing; none when
    logging is by epoch (the repr still says ``logging_steps=500``, the default)."""
    scan = MetricScan({})
    for line in args.splitlines():
        scan.feed(line, line, 1)
    assert scan.hf_banner.every(total) == every


def test_bar_less_dicts_counted_by_logging_steps_without_banner() -> None:
    """No banner, no epoch: the n-th dict is ``n x logging_steps`` from the log's start (it
    was n); without a printed ``logging_steps``, still n."""
    dicts = "".join(f"{{'loss': {1 / (i + 1):.4f}, 'grad_norm': 0.5}}\n" for i in range(40))
    spaced = parse_log("TrainingArguments(\nlogging_steps=25,\n)\n" + dicts)
    assert [p.step for p in spaced.points] == list(range(25, 1001, 25))[-HISTORY_DEPTH:]
    assert [p.step for p in parse_log(dicts).points] == list(range(9, 41))


# --- a tqdm redraw and a printed dict on one line ---------------------------------------------

def test_dict_printed_on_a_bars_line_is_read() -> None:
    """Real tqdm 4.70.1: a loop ``print()``s a dict while its bar is drawn, so the dict lands
    on the redraw's line with no ``\\r`` between (``... 5/50 [00:00<00:02, 19.80it/s]{'loss':
    2.375, ...}``). It was dropped: no metric at all. It takes the bar's step."""
    text = (FIXTURES / "tqdm-4.70.1" / "loop_print_glued.out").read_bytes()
    summary = parse_log(text)
    assert [p.step for p in summary.points] == list(range(5, 51, 5))
    assert summary.points[0].values == {"loss": 2.375, "grad_norm": 0.525,
                                        "learning_rate": 1e-05, "epoch": 0.1}
    assert summary.progress is not None and summary.progress.current == 50
    assert [p.step for p in _fold_whole(text, pieces=13).points] == list(range(5, 51, 5))


def test_dict_on_a_ray_prefixed_bars_line_and_the_end_dict() -> None:
    """The same behind a Ray prefix (the per-line path), and HF's end-of-training dict on a
    bar's line finishes the run, also when it lies before the lines read for metrics."""
    ray = "".join(f"(TrainWorker pid=7) {s * 2}%|█   | {s}/50 [00:{s:02d}<00:10,  1.00it/s]"
                  f"{{'loss': {3 - s / 10}, 'grad_norm': 0.5}}\n" for s in range(1, 51))
    assert [p.step for p in parse_log(ray).points] == list(range(19, 51))
    end = ("100%|██████████| 50/50 [00:50<00:00,  1.00it/s]{'train_runtime': 50.1, "
           "'train_loss': 1.2, 'epoch': 1.0}\n")
    after = "".join(f"step:{s} - actor/pg_loss:0.1 - actor/grad_norm:0.2\n" for s in range(1, 300))
    for text in (end, end + after, f"(TrainWorker pid=7) {end}{after}"):
        assert parse_log(text).finished
        assert _parse_reference(text).finished


def test_saves_every_few_steps_are_part_of_the_rate() -> None:
    """A 40 s save every 8 steps of 4 s: dropping every save read 4.0 s/step (a dry-run's ETA
    half the real time). Recurring saves are the run's pace: about 9 s/step, as elapsed."""
    elapsed, events = 0.0, []
    for step in range(1, 65):
        elapsed += 4 + (40 if step % 8 == 0 else 0)
        events.append((step, elapsed))
    rate = trailing_rate(events)
    assert rate == pytest.approx((31 * 4 + 4 * 40) / 31, rel=0.02)
