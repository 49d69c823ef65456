"""A RUNNING SFT job whose trainer said it finished, silent since, is no mid-run stall.

Replayed on the real SLURM (the sft-mix grid: HF consoles run to 300/300 and their
``train_runtime`` dict printed, the jobs still RUNNING 50 minutes later): the rows read
``STALL: no new step for 52m (limit 30m)``, recommendation "look for a hung actor or rank",
as if training hung mid-way with steps still to run. There is no step left: the job is stuck
after training (the final save, a hub push, an exit barrier). It stays a stall (it needs a
look), said as what it is.
"""

from __future__ import annotations

from datetime import timedelta

from report.judge import build_report
from report.models import JobReport
from report.settings import ReportSettings
from tests.report.factories import NOW, cluster, facts, log, points, record


def _judged(*, finished: bool, step: int = 300) -> JobReport:
    last = NOW - timedelta(minutes=52)
    job = facts(record("sft-mix-lr1e5-0.5b", "270"),
                points({"loss": [1.0] * step, "grad_norm": [0.5] * step}, last_at=last),
                summary_kw={"total_steps": 300, "sec_per_step": 2.0, "last_timestamp": last,
                            "finished": finished},
                log_fetch=log(mtime=last))
    report, _ = build_report([cluster("alpha", [job])], settings=ReportSettings(), now=NOW)
    return report.jobs[0]


def test_a_finished_trainer_still_running_is_said_so() -> None:
    job = _judged(finished=True)
    assert "stall" in job.flags and job.verdict == "stalled"
    assert job.trend == "STALL after training done (300/300): silent 52m (limit 30m)"
    assert job.recommendation is not None and "after training" in job.recommendation.why


def test_a_silent_run_with_steps_left_is_the_plain_stall() -> None:
    job = _judged(finished=False, step=120)
    assert job.trend.startswith("STALL: no new step for 52m")
