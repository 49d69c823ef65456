"""A datagen run's chunks submitted as separate jobs read as one run (the seed's Datagen table:
one row per run, ``Chunks`` done/total). A dry-run on the real SLURM gave four rows for
``datagen-swe-v2-chunk-0`` ... ``-3`` sharing one workdir, each reading "2/4 done, 150 trials"."""

from __future__ import annotations

from probes.models import JobState
from report.grouping import find_groups, group_report, groups_json
from report.models import JobReport
from report.render import render_text
from tests.report.factories import report_job, report_of


def chunk(n: int, *, stem: str = "datagen-swe-v2", sep: str = "-chunk-", user: str = "alice",
          state: JobState = JobState.RUNNING, verdict: str = "healthy", **extra: object,
          ) -> JobReport:
    fields: dict[str, object] = {"trend": f"chunk {n} steady", "state": state,
                                 "verdict": verdict, "user": user,
                                 "metrics": {"chunks_done": 2, "chunks_total": 4, "trials": 150},
                                 **extra}
    return report_job(f"{stem}{sep}{n}", "datagen", job_id=str(500 + n), **fields)


def test_separate_chunk_jobs_are_one_row() -> None:
    jobs = [chunk(0, state=JobState.COMPLETED, verdict="done"), chunk(1, state=JobState.COMPLETED,
            verdict="done"), chunk(2), chunk(3)]
    grouped, details = group_report(report_of(*jobs), {})
    assert [j.job_id for j in grouped.jobs] == ["datagen-swe-v2_*datagen"]
    label = details[("alpha", "datagen-swe-v2_*datagen")].display_name
    assert label == "datagen-swe-v2 [2 running · 2 completed]"
    text = render_text(grouped, details, width=100)
    assert text.count("2/4 done") == 1 and "datagen-swe-v2 [2 running" in text, text
    (group,) = groups_json(report_of(*jobs))
    assert group["kind"] == "chunks" and group["members"] == ["500", "501", "502", "503"]


def test_a_failed_chunk_keeps_its_own_row() -> None:
    jobs = [chunk(0), chunk(1), chunk(2, state=JobState.FAILED, verdict="failed",
                                      trend="Traceback: boom")]
    grouped, _ = group_report(report_of(*jobs), {})
    assert sorted(j.job_id for j in grouped.jobs) == ["502", "datagen-swe-v2_*datagen"]


def test_chunk_names_of_other_forms_group() -> None:
    jobs = [chunk(n, stem="datagen-math", sep="_shard") for n in range(3)]
    (group,) = find_groups(report_of(*jobs))
    assert (group.kind, group.key, len(group.members)) == ("chunks", "datagen-math", 3)


def test_two_users_runs_of_one_name_never_merge() -> None:
    jobs = [chunk(0, user="alice"), chunk(1, user="bob")]
    assert find_groups(report_of(*jobs)) == []


def test_only_datagen_chunks_group() -> None:
    jobs = [report_job(f"rl-grpo-part-{n}", "rl", job_id=str(700 + n)) for n in range(3)]
    assert find_groups(report_of(*jobs)) == []
