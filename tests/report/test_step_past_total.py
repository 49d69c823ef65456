"""A step past the run's total is no progress to show (``15/80``, never ``70/30``).

Hugging Face Trainer's ProgressCallback draws ``tqdm(total=state.max_steps)`` and updates it
by ``state.global_step - self.current_step``; a run resumed from a checkpoint past a lowered
``max_steps`` (the seed's resumed runs; prime-rl before PrimeIntellect-ai/prime-rl#3352 even
idled there for ever) draws ``41/30``. The real TRL 1.16 GRPO log (tests/fixtures/trl-1.16.0)
so resumed at global step 40 read step 70, total 30: '70/30' in the Step column.
"""

from __future__ import annotations

import re
from pathlib import Path

from tests.report.factories import judge
from tests.report.test_judge_rl_rulebook import _from_log

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "trl-1.16.0" / "grpo_healthy.out"


def _resumed(text: str, at: int) -> str:
    """The bar as ProgressCallback draws it once resumed at global step ``at``."""
    return re.sub(r"\| (\d+)/30 \[",
                  lambda m: f"| {int(m.group(1)) + at if int(m.group(1)) else 0}/30 [", text)


def test_a_step_past_the_total_leaves_the_total_unknown_and_says_why() -> None:
    report = judge(_from_log(_resumed(FIXTURE.read_text(), 40), name="rl-trl-grpo")).report
    assert report.step == 70 and report.total_steps is None
    assert "step 70 past its total 30" in report.trend


def test_a_step_within_the_total_is_unchanged() -> None:
    """Near miss: the same log resumed at step 0 (and as recorded) reads 30/30."""
    report = judge(_from_log(FIXTURE.read_text(), name="rl-trl-grpo")).report
    assert (report.step, report.total_steps) == (30, 30)
    assert "past its total" not in report.trend
