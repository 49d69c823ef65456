"""NeMo-RL's own finish line for a run its max_num_steps ended is a finish line.

NeMo-RL's GRPO loop prints ``Max number of steps has been reached, stopping training early``
and returns when ``total_steps >= max_num_steps``. Its step banner ``===== Step N/M =====``
counts N within the epoch and M is ``min(len(dataloader), max_num_steps)``: a two-epoch run
of 50 batches an epoch with max_num_steps 70 ends on 'Step 20/50' of its second epoch, then
that line, exit 0. 418fc7c reads a COMPLETED RL run's own step and total, never against a
finish line, and knew SkyRL's and verl's only: that run read incomplete-run, diagnose 'the log
shows step 20 of 50'. The NeMo-RL fixture, cut at step 30 of 100 with that line after it,
stands for it here.
"""

from __future__ import annotations

from pathlib import Path

from probes.logs.parse import parse_log
from probes.models import JobFacts, JobState
from tests.report.factories import judge, log, record

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "nemo-rl-rebuilt" / "grpo_console.log"
END = "Max number of steps has been reached, stopping training early\n"


def _report(text: str) -> tuple[str, list[str]]:
    facts = JobFacts(record=record("rl-nemo-grpo", state=JobState.COMPLETED),
                     log=log(text=text), summary=parse_log(text))
    report = judge(facts).report
    return report.verdict, list(report.flags)


def test_the_max_steps_line_says_done() -> None:
    """With NeMo-RL's finish line: done, no incomplete-run."""
    verdict, flags = _report(FIX.read_text() + END)
    assert verdict == "done" and "incomplete-run" not in flags


def test_without_it_the_short_log_is_still_incomplete() -> None:
    """The same log without it: incomplete-run, as 418fc7c reads it."""
    assert "incomplete-run" in _report(FIX.read_text())[1]
