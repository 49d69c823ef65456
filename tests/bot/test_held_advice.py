"""A job held by its owner (``JobHeldUser``) is told with how to release it.

Replayed on the real SLURM 22.05 (``sbatch -H``): the row reads verdict ``stalled``, Trend
'Held (JobHeldUser): will not start until released', but its recommendation was action
``none``, so the job-end DM ('⏸ ... is stalled') and every place that shows a recommendation
left out ``scontrol release ID``: only the Trend said it was held, not what to do. A held job
never starts on its own; whoever held it decides (release or cancel), as for an
administrator's hold (``diagnose``).
"""

from __future__ import annotations

from bot.alert_messages import job_end_dm
from probes.models import JobFacts, JobState
from report.changes import Change
from tests.report.factories import judge, record


def _held(reason: str = "JobHeldUser") -> JobFacts:
    return JobFacts(record=record("sft-held", "11", JobState.PENDING, reason=reason,
                                  start_time=None, elapsed_s=None))


def test_the_owners_hold_recommends_its_release() -> None:
    rec = judge(_held()).report.recommendation
    assert rec is not None and rec.action == "diagnose", rec
    assert "scontrol release 11" in rec.why


def test_the_stalled_dm_of_a_held_job_says_how_to_release_it() -> None:
    detail = judge(_held())
    change = Change(kind="stalled", cluster="alpha", job_id="11", name="sft-held",
                    state=JobState.PENDING, verdict="stalled", why=detail.report.trend)
    text = job_end_dm(change, detail).text
    assert "scontrol release 11" in text, text
