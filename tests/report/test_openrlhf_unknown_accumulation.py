"""An OpenRLHF SFT/DPO/RM run whose accumulation is not printed says so, not "Filling buffer".

The ``Train step of epoch N`` bar counts micro-batches; the optimizer step is that count over
the gradient accumulation, which only DeepSpeed's config dump prints. A log without it
(``openrlhf-rebuilt/sft_step_bar.out`` with the dump's lines taken out) gives no step, and the
run is training: its trend says the step is unknown and why, with no invented step.
"""

from __future__ import annotations

from pathlib import Path

from probes.models import JobFacts
from report.layouts import is_buffering
from tests.report.factories import judge, log
from tests.report.test_judge_rl_rulebook import _from_log

LOG = Path(__file__).resolve().parents[1] / "fixtures" / "openrlhf-rebuilt" / "sft_step_bar.out"


def _running(text: str) -> JobFacts:
    """The job as the sweep read it: its log's text and the parser's reading of it."""
    facts = _from_log(text, name="sft-openrlhf")
    return facts.model_copy(update={"log": log(text=text, size=len(text.encode()))})


def test_a_micro_batch_bar_without_accumulation_is_training_of_unknown_step() -> None:
    """No step is invented, and the trend says why there is none."""
    text = "".join(line for line in LOG.read_bytes().decode().splitlines(keepends=True)
                   if "config.py" not in line)
    report = judge(_running(text)).report
    assert "buffer-filling" not in report.flags and not is_buffering(report)
    assert report.step is None
    assert "micro-batch" in report.trend and "accumulation" in report.trend


def test_with_the_accumulation_the_run_has_its_step() -> None:
    """DeepSpeed's dump gives the accumulation: the run's optimizer step and total."""
    report = judge(_running(LOG.read_bytes().decode())).report
    assert report.step == 24 and report.total_steps == 24
    assert "buffer-filling" not in report.flags
