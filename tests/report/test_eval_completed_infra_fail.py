"""An eval that COMPLETED with its trials failing instantly, or never starting, is no score.

Found judging Harbor trees written by the dry-run maker (Harbor's on-disk format) through the
real collector and judge: an eval whose 40 trials all ended at once with null output tokens
(the rulebook's instant-fail: "tunnel not carrying traffic"), or all with
EnvironmentStartTimeoutError (sandboxes never came up), read verdict done, Trend 'Completed',
recommendation cleanup: the owner's DM a plain ✅ and the routine that reaps the only evidence.
The running eval's checks (instant-fail, never started) hold for a finished one's trials too:
its 'score' is an infra failure, to diagnose before any cleanup.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from probes.logs.parse import parse_log
from probes.models import JobState
from probes.remote.collector import collect_trials
from probes.slurm.assemble import job_facts
from tests.report.factories import judge, log, record
from tests.report.test_harbor_dryrun_datagen import MAKE
from tests.report.test_harbor_shared_root import _LOG, _age, _start


def _completed(tmp: Path, mix: dict[str, int], name: str = "eval-qwen3-x-tbench"):
    jobs = tmp / "jobs"
    MAKE.write(jobs / "2026-12-05__08-00-00", mix, total=40, seed=1, finished=True,
               minutes_ago=20)
    _age(jobs / "2026-12-05__08-00-00", 10)
    now = datetime.now(UTC)
    rec = record(name, state=JobState.COMPLETED, start_time=_start(30),
                 end_time=now - timedelta(minutes=1), submit_time=now - timedelta(minutes=31),
                 elapsed_s=1740)
    facts = job_facts(rec, {"trials": collect_trials([str(jobs)])}, aliases={},
                      benign_patterns=[])
    facts = facts.model_copy(update={"log": log(mtime=now), "summary": parse_log(_LOG, mtime=now)})
    return judge(facts, now=now).report


@pytest.mark.parametrize(("mix", "said"), [({"instant": 40}, "INSTANT-FAIL: 40/40"),
                                           ({"never": 36, "pass": 4}, "NEVER STARTED: 36/40")])
def test_a_completed_eval_of_infra_failures_is_diagnosed(tmp_path: Path, mix: dict[str, int],
                                                         said: str) -> None:
    report = _completed(tmp_path, mix)
    assert "instant-fail" in report.flags, (report.flags, report.trend)
    assert report.verdict == "warning"
    assert report.trend.startswith(said), report.trend
    assert report.recommendation is not None and report.recommendation.action == "diagnose"


def test_a_completed_eval_that_ran_is_cleaned_up(tmp_path: Path) -> None:
    """Near-miss: passes, fails and agent timeouts are a score: cleanup as before."""
    report = _completed(tmp_path, {"pass": 12, "fail": 20, "timeout": 8})
    assert "instant-fail" not in report.flags and report.verdict == "done"
    assert report.recommendation is not None and report.recommendation.action == "cleanup"


def test_a_completed_datagen_run_whose_sandboxes_never_started_is_diagnosed(
        tmp_path: Path) -> None:
    """The same for datagen: 40/40 trials never started read 'Completed' and
    datagen-job-cleanup (consolidating nothing); it generated nothing: diagnose."""
    report = _completed(tmp_path, {"never": 40}, name="datagen-swe-v2")
    assert "instant-fail" in report.flags, (report.flags, report.trend)
    assert report.recommendation is not None and report.recommendation.action == "diagnose"
    assert "do NOT consolidate" in report.recommendation.why
