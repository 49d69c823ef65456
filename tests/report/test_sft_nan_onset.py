"""SFT nan-loss: the Trend and diagnosis name the step the run went bad, not the first of the
last five logged steps.

Found by replaying on the real SLURM an HF Trainer (transformers 5.x string dicts) SFT run,
``logging_steps=10``, whose loss was filtered to ``'0'`` with ``'grad_norm': 'nan'`` from step
60 to step 130: ``jobtables job`` read "Loss 0 with NaN grad at step 90" and told the user to
"resume from the last good checkpoint", though step 80 (and 70, 60) was already poisoned.
"""

from __future__ import annotations

from probes.logs.parse import parse_log
from probes.models import JobFacts, JobState
from report.models import JobDetail
from tests.report.factories import judge, log, record


def _hf_log(records: list[tuple[int, str, str]], total: int = 916) -> str:
    """An HF Trainer log: its banner, then a bar redraw and a step dict per logged step."""
    lines = ["***** Running training *****", f"  Total optimization steps = {total}"]
    for step, loss, grad in records:
        bar = f"{100 * step // total:3d}%|          | {step}/{total} [02:09<13:05,  1.00s/it]"
        lines.append(f"\r{bar}\r{' ' * 46}{{'loss': '{loss}', 'grad_norm': '{grad}', "
                     f"'learning_rate': '1.7e-05', 'epoch': '{step / 458:.4g}'}}")
    return "\n".join(lines) + "\n"


def _judge(text: str) -> JobDetail:
    job = JobFacts(record=record("sft-q3b-nanfilter", "82", JobState.RUNNING),
                   log=log(text=text), summary=parse_log(text))
    return judge(job)


def test_the_trend_names_the_first_poisoned_step() -> None:
    """Eight logged steps of loss 0 / NaN grad (60..130): the onset is step 60."""
    good = [(s, "1.5", "0.7") for s in range(10, 50, 10)] + [(50, "1.5", "1.4e+14")]
    bad = [(s, "0", "nan") for s in range(60, 140, 10)]
    report = _judge(_hf_log(good + bad)).report
    assert report.flags[0] == "nan-loss" and report.verdict == "failed"
    assert report.trend == "Loss 0 with NaN grad at step 60"
    assert report.recommendation is not None
    assert report.recommendation.why.startswith("Loss 0 with NaN grad at step 60:")


def test_a_recent_onset_is_named_as_before() -> None:
    """NaN only on the last two steps: the onset is the first of them (unchanged)."""
    good = [(s, "1.5", "0.7") for s in range(10, 120, 10)]
    bad = [(120, "nan", "nan"), (130, "nan", "nan")]
    report = _judge(_hf_log(good + bad)).report
    assert report.trend == "Loss → NaN at step 120"


def test_a_recovered_nan_out_of_view_stays_unflagged() -> None:
    """A NaN six logged steps back, healthy since: no nan-loss (the last-5 rule, unchanged)."""
    records = [(s, "1.5", "0.7") for s in range(10, 60, 10)] + [(60, "nan", "nan")]
    records += [(s, "1.4", "0.7") for s in range(70, 130, 10)]
    report = _judge(_hf_log(records)).report
    assert "nan-loss" not in report.flags


def test_an_onset_older_than_the_history_read_is_not_named_exact() -> None:
    """NaN from step 20 to 100, logged every step: a tail keeps its last 32 steps (69-100),
    all poisoned. Naming step 69 as the onset would send the user back to a checkpoint that
    is already poisoned (review of 9aa0549); the Trend says the run went bad by then."""
    records = [(s, "1.5", "0.7") for s in range(1, 20)] + [(s, "nan", "nan")
                                                           for s in range(20, 101)]
    report = _judge(_hf_log(records)).report
    assert report.trend == "Loss → NaN at or before step 69"
    assert report.recommendation is not None
    assert report.recommendation.why.startswith("Loss → NaN at or before step 69:")
