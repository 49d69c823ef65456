"""Review of e502067: a JobSet list that failed for one sweep tells no news when it answers again.

e502067 keeps a Kubernetes cluster ``ok`` when only its JobSet list fails (a 500, a 429 past its
retry, a proxy's page), its Jobs reported and the detail ``JobSets not listed: ...``; before,
the cluster read ``unreachable`` and the digest kept its jobs' last snapshots
(``bot.digest.seen_now``), so a blip told nothing. Read in part, the JobSet runs were simply
missing: their snapshots were dropped, and the next sweep, the list answering again, told
each running one ``started`` (a collapsed one ``collapsed`` again) in the day's thread.
A live job missing from a cluster read in part is now kept as an unread cluster's are; an
ended one is not (a Job deleted after it finished, or one the probe already called vanished,
is no job the partial read hid).
"""

from __future__ import annotations

from bot.digest import seen_now
from report.changes import diff
from report.models import Report
from tests.bot.builders import detail, job, sweep_result


def _read_in_part(report: Report) -> Report:
    """``report``'s clusters ok but with JobSets not listed, and no jobs (they were JobSets)."""
    clusters = [c.model_copy(update={"detail": "JobSets not listed: list jobsets: HTTP 500"})
                for c in report.clusters]
    return report.model_copy(update={"clusters": clusters, "jobs": []})


def test_a_jobset_list_blip_tells_no_start_when_it_answers_again() -> None:
    """16:00 the JobSet run reads healthy; 16:30 the JobSet list fails (the cluster read in
    part); 17:00 it answers: no 'started' line for a run that ran all along."""
    run = detail(job("rl-grpo-js", "rl-grpo-js", cluster="beta"))
    full = sweep_result([run], clusters=("beta",)).report
    first = seen_now(None, full)
    blip = seen_now(first, _read_in_part(full))
    assert diff(blip, full) == []


def test_an_ended_job_missing_from_a_partial_read_is_not_kept() -> None:
    """Near miss: a job last seen ended and now gone (a finished Job its TTL deleted) is not
    carried on: the kept snapshots do not grow with every deleted Job."""
    ended = detail(job("sft-done", "sft-done", cluster="beta", bucket="sft",
                       state="COMPLETED", verdict="done"))
    full = sweep_result([ended], clusters=("beta",)).report
    assert ("beta", "sft-done") not in seen_now(seen_now(None, full), _read_in_part(full))
