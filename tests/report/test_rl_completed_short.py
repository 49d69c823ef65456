"""A COMPLETED RL run that stopped far short of its total is not sent to cleanup.

Replayed on the real SLURM: a SkyRL+Harbor run ('Total steps: 50') exiting 0 after its 8th step
('Step 8:' the last dict, no 'Training done!', no checkpoint or export) read verdict done,
recommendation cleanup 'rl-agentic-job-cleanup' (reap the trial tree of a run 16 % through).
The seed: banked steps come from durable evidence and an exports/global_step_N signals
completion on a finished run. Without trainer_state.json / trainer_log.jsonl, a COMPLETED RL
run whose log stops short of its printed total, with no finish line and no checkpoint or
export at the total, is incomplete-run + diagnose; a durable step at the total still says done.
"""

from __future__ import annotations

from pathlib import Path

from probes.logs.parse import parse_log
from probes.models import CheckpointListing, JobFacts, JobState
from tests.report.factories import judge, log, record

FIX = Path(__file__).resolve().parents[1] / "fixtures"
# SkyRL v0.3 console run, 30 of 100 steps, its closing lines ('Reached max_training_steps=30,
# stopping early.', 'Saved final checkpoint.', 'Training done!') left out: an exit at step 30
_ENDS = ("Reached max_training_steps", "Saved final checkpoint", "Training done!")
SKYRL = "\n".join(line for line in (FIX / "skyrl-rebuilt" / "console_v03.log").read_text()
                  .splitlines() if not any(end in line for end in _ENDS)) + "\n"


def _completed(text: str, checkpoints: CheckpointListing | None = None) -> JobFacts:
    return JobFacts(record=record("rl-skyrl-gsm8k", state=JobState.COMPLETED),
                    log=log(text=text), summary=parse_log(text), checkpoints=checkpoints)


def test_a_short_exit_is_diagnosed_not_cleaned_up() -> None:
    """30 of 100 steps, nothing durable at the total: incomplete-run, diagnose."""
    report = judge(_completed(SKYRL)).report
    assert "incomplete-run" in report.flags and report.verdict == "warning"
    assert report.recommendation is not None and report.recommendation.action == "diagnose"
    assert "step 30 of 100" in report.recommendation.why
    assert "-job-cleanup" in report.recommendation.why  # the routine it holds back


def test_an_export_at_the_total_says_done() -> None:
    """exports/global_step_100 on the finished run is its completion."""
    durable = CheckpointListing(roots=("/w/ckpts",), steps=(20,), export_steps=(100,))
    report = judge(_completed(SKYRL, durable)).report
    assert "incomplete-run" not in report.flags and report.verdict == "done"
    assert report.recommendation is not None and report.recommendation.action == "cleanup"


def test_a_finish_line_says_done() -> None:
    """SkyRL's own 'Training done!' (the log it came from) still reads done."""
    text = (FIX / "skyrl-rebuilt" / "console_v03.log").read_text()
    report = judge(_completed(text)).report
    assert report.verdict == "done" and "incomplete-run" not in report.flags
