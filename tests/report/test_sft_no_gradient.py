"""SFT: a run whose grad norm has been exactly 0 for a window is no healthy run.

Found by replaying on the real SLURM an HF Trainer (transformers 5.x line format) SFT run that
diverged at step 3 (loss 7643, grad_norm 1.1e+06), then logged grad_norm '0' with its loss flat
at ln(vocab) (11.93) to step 200: RUNNING it read "Loss flat; healthy", COMPLETED it was routed
to ``sft-job-cleanup`` with no warning. The explosion came two values into the run, before a
window (CONTRACT §5: 5 values) could hold a mean, so ``grad-explosion`` (finite, windowed) is
rightly silent; the dead gradient afterwards is what must be read. The log lines are the ones
the replay job printed.
"""

from __future__ import annotations

import pytest

from probes.logs.parse import parse_log
from probes.models import JobFacts, JobState
from report.models import JobDetail
from tests.report.factories import judge, log, record


def _hf_log(grads: list[str], losses: list[str]) -> str:
    """An HF Trainer SFT log run to its end: its banner, then one bar redraw and step dict
    per step."""
    total = len(grads)
    lines = ["***** Running training *****", "  Num examples = 6,400",
             f"  Total optimization steps = {total}"]
    for step, (grad, loss) in enumerate(zip(grads, losses, strict=True), start=1):
        bar = f"{100 * step // total:3d}%|          | {step}/{total} [00:04<00:10,  9.95it/s]"
        lines.append(f"\r{bar}\r{' ' * 46}{{'loss': '{loss}', 'grad_norm': '{grad}', "
                     f"'learning_rate': '2e-05', 'epoch': '{step / total:.4g}'}}")
    return "\n".join(lines) + "\n"


def _diverged(zero_steps: int) -> str:
    """Steps 1-2 healthy, step 3 explodes, then ``zero_steps`` steps of grad norm 0."""
    grads = ["5.113", "38.21", "1.1e+06", *["0"] * zero_steps]
    losses = ["10.42", "9.871", "7643", *["11.93"] * zero_steps]
    return _hf_log(grads, losses)


def _judge(text: str, state: JobState) -> JobDetail:
    job = JobFacts(record=record("sft-deadgrad", "2774", state, exit_code=0),
                   log=log(text=text), summary=parse_log(text))
    return judge(job)


@pytest.mark.parametrize("state", [JobState.RUNNING, JobState.COMPLETED])
def test_a_dead_gradient_warns_and_asks_for_a_diagnosis(state: JobState) -> None:
    """20 steps of grad norm 0 after the spike: warning, the trend says since when,
    diagnose quoting the last nonzero grad norm, never cleanup."""
    report = _judge(_diverged(20), state).report
    assert report.verdict == "warning"
    assert report.trend == "No gradient for 20 steps: grad norm 0 since step 4"
    assert report.recommendation is not None
    assert report.recommendation.action == "diagnose"
    assert "last nonzero grad norm was 1.10e+06 at step 3" in report.recommendation.why
    assert ("sft-job-cleanup" in report.recommendation.why) is (state is JobState.COMPLETED)
    assert "grad-explosion" not in report.flags  # finite, and before any window held 5 values


@pytest.mark.parametrize("state", [JobState.RUNNING, JobState.COMPLETED])
def test_zeros_past_the_kept_history_say_at_least(state: JobState) -> None:
    """The replayed run (197 zero steps): the log's kept points are all 0, so the trend says
    at least that many; still warning and diagnose, not "Loss flat; healthy" or cleanup."""
    report = _judge(_diverged(197), state).report
    assert report.verdict == "warning"
    assert report.trend == "No gradient for 32+ steps: grad norm 0 on all read"
    assert report.recommendation is not None
    assert report.recommendation.action == "diagnose"


def test_fewer_zeros_than_a_window_needs_are_not_yet_read() -> None:
    """Four zero grad norms (min_window is 5): the run still reads as before."""
    report = _judge(_diverged(4), JobState.RUNNING).report
    assert report.verdict == "healthy"
    assert not report.trend.startswith("No gradient")


def test_a_nonzero_latest_grad_norm_is_a_live_gradient() -> None:
    """Zeros that ended (a small nonzero value since) are no dead gradient now."""
    grads = ["1.2"] * 10 + ["0"] * 8 + ["3e-05"]
    report = _judge(_hf_log(grads, ["2.1"] * len(grads)), JobState.COMPLETED).report
    assert report.verdict == "done"
    assert report.recommendation is not None
    assert report.recommendation.why == "sft-job-cleanup"
