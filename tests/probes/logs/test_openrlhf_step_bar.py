"""OpenRLHF's SFT, DPO and reward-model trainers: the ``Train step of epoch N`` bar is the run.

``SFTTrainer.fit`` (and ``DPOTrainer``'s, ``RewardModelTrainer``'s) prints nothing per step but
its tqdm bar: one a epoch over the epoch's micro-batches, ``set_postfix(logs_dict)`` at each
(``gpt_loss``/``loss``, ``lr``, ``grad_norm``), the optimizer stepping at every
``accumulated_gradient``-th (DeepSpeed's ``gradient_accumulation_steps``, its config dump).
``openrlhf-rebuilt/{sft,dpo}_step_bar.out`` (real tqdm 4.70.1, generators/openrlhf_sft_tqdm.py):
2 epochs of 48 micro-batches, accumulation 4. The bar was not read: no step, no loss ("Filling
buffer" for ever).
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from probes.logs.parse import parse_log
from probes.models import LogSummary
from tests.probes.logs.pieces import fold_in_pieces

MTIME = datetime(2026, 12, 5, 4, 0, tzinfo=UTC)
FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "openrlhf-rebuilt"


def _folded(text: str) -> LogSummary:
    return fold_in_pieces(text, 5, mtime=MTIME)


READS = [pytest.param(lambda t: parse_log(t, mtime=MTIME), id="cold"),
         pytest.param(_folded, id="folded")]


@pytest.mark.parametrize("read", READS)
def test_the_sft_step_bar_is_read_in_optimizer_steps(read) -> None:
    """The bar's micro-batches over 2 epochs are 24 optimizer steps; gpt_loss is the loss."""
    summary = read((FIXTURES / "sft_step_bar.out").read_bytes().decode())
    steps = [point.step for point in summary.points]
    assert steps == list(range(1, 25))
    last = summary.points[-1].values
    assert last["loss"] == pytest.approx(0.785)
    assert last["grad_norm"] == pytest.approx(0.652)
    assert last["learning_rate"] == pytest.approx(5e-6)
    assert summary.total_steps == 24


@pytest.mark.parametrize("read", READS)
def test_the_dpo_step_bar_is_read_in_optimizer_steps(read) -> None:
    """DPO's ``loss`` (and its rewards) at the optimizer step; the epoch bar gives the total."""
    summary = read((FIXTURES / "dpo_step_bar.out").read_bytes().decode())
    assert [point.step for point in summary.points][-1] == 24
    assert summary.points[-1].values["loss"] == pytest.approx(0.201)
    assert summary.total_steps == 24


@pytest.mark.parametrize("read", READS)
def test_without_the_accumulation_no_step_is_invented(read) -> None:
    """With no DeepSpeed dump the bar's micro-batches are no count of optimizer steps."""
    text = (FIXTURES / "sft_step_bar.out").read_bytes().decode()
    summary = read("".join(line for line in text.splitlines(keepends=True)
                           if "config.py" not in line))
    assert not summary.points and summary.total_steps is None
    assert "openrlhf-microbatches" in summary.formats  # the trend says the step is unknown


def test_the_step_bar_in_a_long_tail_is_read() -> None:
    """A cold read that skims a long head still takes the accumulation and the epochs."""
    text = (FIXTURES / "sft_step_bar.out").read_bytes().decode()
    lines = text.splitlines(keepends=True)
    head, rest = lines[:12], lines[12:]
    noise = "".join(f"noise line {n}\n" for n in range(20000))
    summary = parse_log("".join(head) + noise + "".join(rest), mtime=MTIME)
    assert summary.points and summary.points[-1].step == 24
    assert summary.total_steps == 24


def _mid_run(text: str, epoch: int, count: int, total: int) -> str:
    """``text`` up to the redraw of epoch ``epoch``'s step bar at ``count/total`` (a running
    job's log: no bar closed after it)."""
    at = text.index(f"Train step of epoch {epoch}:")
    at = text.index(f"| {count}/{total} [", at)
    return text[:text.index("\r", at)]


@pytest.mark.parametrize("read", READS)
def test_a_running_step_bar_gives_the_rate_in_optimizer_steps(read) -> None:
    """The bar's s/it is a micro-batch's: an optimizer step is ``gradient_accumulation_steps``
    of them (3 s x 4), the rate an SFT row's ETA is made from. It read none: no ETA."""
    text = _mid_run((FIXTURES / "sft_step_bar.out").read_bytes().decode(), 1, 30, 48)
    summary = read(text)
    assert summary.points[-1].step == 19 and summary.total_steps == 24
    assert summary.sec_per_step == pytest.approx(12.0)


@pytest.mark.parametrize("read", READS)
def test_a_resumed_run_counts_on_from_its_checkpoint(read) -> None:
    """``openrlhf-rebuilt/sft_resumed_step_bar.out`` (generators/openrlhf_sft_resume.py): 3
    epochs of 12 steps, resumed at step 18 (``consumed_samples: 576``), running at step 29.
    The ``Train epoch`` bar counts the 2 epochs left and the resumed epoch's step bar its 24
    micro-batches left. It read steps 6-12 then 24-29 of a total of 24."""
    summary = read((FIXTURES / "sft_resumed_step_bar.out").read_bytes().decode())
    assert [point.step for point in summary.points] == list(range(19, 30))
    assert summary.total_steps == 36
    assert summary.sec_per_step == pytest.approx(12.0)
