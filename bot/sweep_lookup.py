"""Finding one job in a sweep's result when its id is not simply there, or not only there.

Policy: an array's (or hetjob's) own id shows one of its tasks, a running one first, its note
saying which and how many; a job found without a cluster named, while another cluster could
not be read, says that cluster may hold another job of that id; a job in no row says why
(a cluster that may hold it did not answer, cannot hold such an id, or was read in part).
Imported by :meth:`bot.sweep_result.SweepResult.find` only on those paths.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from bot.errors import JobNotFoundError
from probes.ids import scheduler_job
from probes.models import JobState

if TYPE_CHECKING:
    from bot.sweep_result import SweepResult
    from report.models import ClusterReport, JobDetail


def not_found(result: SweepResult, cluster: str | None, job_id: str) -> JobNotFoundError:
    """Why ``[cluster:]job_id`` is in no row of ``result``: a cluster that may hold it did not
    answer, cannot hold such an id (a name on SLURM), or was read in part; else not there."""
    where = f" on cluster {cluster!r}" if cluster else ""
    # The cluster's detail (an SSH error, ...) is outside text in a message whose
    # backticks are the bot's own (bot.messages.error_text): none of its own. (Imported
    # here: this module leaves report/ to the judging import, bot.preload.)
    from report.chunks import no_backticks, public_reason

    unasked = [f"{c.name!r} is {c.status}" + (f" ({no_backticks(public_reason(c.detail))})"
                                              if c.detail else "")
               for c in result.report.clusters
               if c.status != "ok" and (cluster is None or c.name == cluster)]
    if unasked:  # not "no such job": the cluster that may hold it did not answer
        return JobNotFoundError(f"job {job_id}{where} not found: cluster "
                                + "; cluster ".join(unasked))
    asked = [c for c in result.report.clusters
             if c.status == "ok" and (cluster is None or c.name == cluster)]
    cannot = [f"cluster {c.name!r} cannot hold it ({no_backticks(result.refused[c.name])})"
              for c in asked if c.name in result.refused]
    if cannot:  # an id no job of that kind of cluster has (a name on SLURM)
        rest = [repr(c.name) for c in asked if c.name not in result.refused]
        return JobNotFoundError(
            f"job {job_id}{where} not found: " + "; ".join(cannot)
            + (f"; not on {', '.join(rest)}" if rest else ""))
    from report.render import read_in_part

    partial = [f"cluster {c.name!r} ok but {no_backticks(public_reason(why))}" for c in asked
               if (why := read_in_part(c))]
    if partial:  # read in part (JobSets refused): what it could not see may hold it
        return JobNotFoundError(f"job {job_id}{where} not found: " + "; ".join(partial))
    return JobNotFoundError(f"no job {job_id}{where} in the current report")


def array_tasks(details: Mapping[tuple[str, str], JobDetail], cluster: str | None,
                job_id: str, own: Sequence[JobDetail] = ()) -> list[JobDetail]:
    """For an array's (or hetjob's) own id, the task shown in its place, one per cluster
    holding it: the worst (the verdict a sweep's group row carries: a collapsing or failed
    task, not a healthy sibling), then a running one, then the lowest; its note says which
    and how many (``jobtables job 123`` answered 'no job 123' while 123_1 ... ran). ``own``:
    the details under the id itself (a pending remainder), members too."""
    from report.grouping import verdict_rank

    tasks: dict[str, list[JobDetail]] = {}
    for d in own:
        tasks.setdefault(d.report.cluster, []).append(d)
    for (c, j), d in details.items():
        if j != job_id and scheduler_job(j) == job_id and (cluster is None or c == cluster):
            tasks.setdefault(c, []).append(d)
    shown = []
    for members in tasks.values():
        members.sort(key=lambda d: (verdict_rank(d.report.verdict),
                                    d.report.state is not JobState.RUNNING,
                                    _task_order(d.report.job_id)))
        pick = members[0]
        if pick.report.job_id == job_id:  # the remainder itself: no task stands for it
            shown.append(pick)
            continue
        states = Counter(d.report.state.value for d in members)
        told = ", ".join(f"{n} {state}" for state, n in sorted(states.items()))
        note = (f"{job_id} is an array or hetjob: its task {pick.report.job_id} is shown "
                f"({len(members)} of its tasks read: {told}); ask for another by its id")
        shown.append(pick.model_copy(update={
            "note": "; ".join(x for x in (note, pick.note) if x)}))
    return shown


def unread_beside(detail: JobDetail, job_id: str, unread: Sequence[ClusterReport]) -> JobDetail:
    """``detail`` found without a cluster named, its note saying which cluster answered and
    which could not be read: SLURM ids overlap between clusters, so an unread cluster may hold
    another ``job_id`` (the one the user meant, to be cancelled or not on this answer)."""
    if not unread:
        return detail
    names = ", ".join(repr(c.name) for c in unread)
    ask = " or ".join(f"/job {c.name}:{job_id}" for c in unread)
    plural = "s" if len(unread) > 1 else ""
    said = (f"this is job {job_id} of cluster {detail.report.cluster!r}; cluster{plural}"
            f" {names} could not be read and may hold another job {job_id}: ask {ask}")
    return detail.model_copy(update={"note": "; ".join(x for x in (said, detail.note) if x)})


def _task_order(job_id: str) -> tuple[int, str]:
    """Tasks in index order (``123_10`` after ``123_9``); an unnumbered one last."""
    tail = job_id.replace("+", "_").rpartition("_")[2]
    return (int(tail), job_id) if tail.isdigit() else (1 << 62, job_id)
