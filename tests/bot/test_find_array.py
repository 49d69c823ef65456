"""``jobtables job 123`` and ``/job 123`` for an array's own id: the report holds its tasks
(``123_1`` ...), not ``123``; it answered "no job 123 in the current report" (exit 2)."""

from __future__ import annotations

import pytest

from bot.errors import JobNotFoundError, UsageError
from tests.bot.builders import detail, job, sweep_result


def test_an_arrays_id_shows_its_running_task_and_says_so() -> None:
    result = sweep_result([
        detail(job("1528_10", "sft-arr", state="COMPLETED", verdict="done")),
        detail(job("1528_2", "sft-arr")),
        detail(job("1528_9", "sft-arr")),
        detail(job("1529", "sft-other")),
    ])
    shown = result.find(None, "1528")
    assert shown.report.job_id == "1528_2"  # running first, then in index order (2 < 9)
    assert shown.note.startswith("1528 is an array or hetjob: its task 1528_2 is shown (3 of "
                                 "its tasks read: 1 COMPLETED, 2 RUNNING)")
    assert result.find(None, "1528_9").report.job_id == "1528_9"  # a task by its own id
    assert result.find("alpha", "1529").note == ""


def test_a_hetjobs_id_shows_its_first_component() -> None:
    result = sweep_result([detail(job("8000+1", "het", state="PENDING", verdict="buffering")),
                           detail(job("8000+0", "het", state="PENDING", verdict="buffering"))])
    assert result.find(None, "8000").report.job_id == "8000+0"


def test_not_a_prefix_match_and_several_clusters_still_asked_to_choose() -> None:
    result = sweep_result([detail(job("15280_1", "a")),
                           detail(job("77_1", "b", cluster="alpha")),
                           detail(job("77_1", "b", cluster="beta"))],
                          clusters=("alpha", "beta"))
    with pytest.raises(JobNotFoundError):
        result.find(None, "1528")
    with pytest.raises(UsageError, match="several clusters"):
        result.find(None, "77")
    assert result.find("beta", "77").report.cluster == "beta"


def test_an_arrays_id_shows_the_task_its_group_row_carries() -> None:
    """The worst task, as the sweep's group row (``report.grouping``): ``jobtables job 2002``
    read 2002_0 'healthy' while 2002_1 collapsed (real SLURM, tests/probes/slurm/
    test_e2e_array_worst_task.py)."""
    result = sweep_result([
        detail(job("2002_0", "rl-arr")),
        detail(job("2002_1", "rl-arr", verdict="collapse")),
        detail(job("2002_2", "rl-arr")),
    ])
    shown = result.find(None, "2002")
    assert shown.report.job_id == "2002_1"
    assert shown.note.startswith("2002 is an array or hetjob: its task 2002_1 is shown")


def test_a_failed_task_outranks_the_pending_remainder_under_the_arrays_own_id() -> None:
    """The unsplit remainder is reported under the array's id: an exact hit that used to hide
    the task that failed beside it."""
    result = sweep_result([
        detail(job("1700", "sft-arr", state="PENDING", verdict="buffering")),
        detail(job("1700_0", "sft-arr")),
        detail(job("1700_1", "sft-arr", state="FAILED", verdict="failed")),
    ])
    assert result.find(None, "1700").report.job_id == "1700_1"
    # near miss: nothing worse than the remainder's siblings' health: a running task, then
    # the remainder itself when no task started
    calm = sweep_result([detail(job("1701", "sft-arr", state="PENDING", verdict="buffering")),
                         detail(job("1701_0", "sft-arr"))])
    assert calm.find(None, "1701").report.job_id == "1701_0"
    alone = sweep_result([detail(job("1702", "sft-arr", state="PENDING", verdict="buffering"))])
    assert alone.find(None, "1702").report.job_id == "1702"
