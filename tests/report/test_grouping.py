"""Array and grid grouping: one row per array, attention members kept, JSON adds groups."""

from __future__ import annotations

import json

import pytest

from probes.models import JobState
from report.chunks import slack_messages
from report.grouping import find_groups, group_report, groups_json, task_count
from report.models import GridCell, GridRollup, JobReport, Report
from report.render import render_json, render_tables, render_text
from tests.report.factories import report_job, report_of


def task(array: str, n: int, *, state: JobState = JobState.RUNNING, verdict: str = "healthy",
         name: str = "rl-sweep-arr", **extra: object) -> JobReport:
    fields: dict[str, object] = {"trend": f"task {n} steady", **extra}
    return report_job(name, "rl", job_id=f"{array}_{n}", state=state, verdict=verdict,
                      step=10, total_steps=100, metrics={"reward": 0.5, "entropy": 0.9,
                                                         "grad_norm": 0.2}, **fields)


def array_report(running: int, pending: int, *, failed: tuple[int, ...] = ()) -> Report:
    jobs = [task("9000", i, verdict="failed", state=JobState.FAILED, trend="Traceback: boom")
            if i in failed else task("9000", i) for i in range(running)]
    jobs += [task("9000", running + i, state=JobState.PENDING, verdict="healthy")
             for i in range(pending)]
    return report_of(*jobs, report_job("sft-other", "sft", job_id="9100"))


@pytest.mark.parametrize(("spec", "count"), [
    ("0-499", 500), ("3", 1), ("1,3,5-9", 7), ("0-10:2", 6), ("0-99%8", 100), ("", None),
    ("a-b", None), ("9-3", None),
])
def test_task_count_reads_slurm_array_specs(spec: str, count: int | None) -> None:
    """SLURM's array_task_string (ranges, steps, lists, throttles) counts its tasks."""
    assert task_count(spec) == count


def test_array_is_one_row_with_tally_worst_member_and_attention_rows() -> None:
    """480 running + 20 pending tasks, two failed: one group row plus the two failures."""
    report = array_report(480, 20, failed=(17, 201))
    grouped, details = group_report(report, {})
    rows = [j for j in grouped.jobs if j.name == "rl-sweep-arr"]
    assert sorted(j.job_id for j in rows) == ["9000_*rl", "9000_17", "9000_201"]
    group_row = next(j for j in rows if j.job_id == "9000_*rl")
    assert group_row.verdict == "failed" and group_row.trend.startswith("9000_17: Traceback")
    label = details[("alpha", "9000_*rl")].display_name
    assert label == "rl-sweep-arr [478 running · 20 pending · 2 failed]"
    # Pending tasks without metrics sit in their own (RL) table here: the judge said healthy.
    assert len(grouped.jobs) == 4  # two failures, the group, the unrelated SFT job


def test_buffering_and_running_members_group_per_table() -> None:
    """Members filling their buffer group in that table, the rest in the bucket's table."""
    jobs = [task("77", i) for i in range(3)]
    jobs += [task("77", 3 + i, verdict="buffering", flags=["buffer-filling"]) for i in range(5)]
    grouped, details = group_report(report_of(*jobs), {})
    tables = {t.title: t.text for t in render_tables(grouped, details, width=160)}
    assert "rl-sweep-arr [3 running]" in tables["RL"]
    assert "rl-sweep-arr [5 running]" in tables["Filling buffer"]
    assert tables["RL"].count("rl-sweep-arr") == 1


def test_unsplit_pending_record_counts_its_tasks() -> None:
    """SLURM keeps unstarted tasks as one record under the array id: its spec is counted."""
    jobs = [task("500", i) for i in range(64)]
    jobs.append(report_job("rl-sweep-arr", "rl", job_id="500", state=JobState.PENDING))
    report = report_of(*jobs)
    [group] = find_groups(report, pending_tasks={("alpha", "500"): 436})
    assert group.tally() == "64 running · 436 pending"
    [unknown] = find_groups(report)
    assert unknown.tally() == "64 running · ≥1 pending" and not unknown.exact


def test_catch_all_array_groups_too() -> None:
    """An ad-hoc array (Catch-all) is one Note line naming its worst member."""
    jobs = [report_job("pretokenize-shard", "other", job_id=f"31_{i}", state=JobState.COMPLETED,
                       verdict="done", trend="shard done") for i in range(40)]
    grouped, details = group_report(report_of(*jobs), {})
    [table] = render_tables(grouped, details, width=160)
    assert table.title == "Catch-all"
    assert "pretokenize-shard [40 completed]" in table.text
    assert "31_0: shard done" in table.text


def test_pending_grid_cells_group_and_running_cells_keep_rows() -> None:
    """Pending cells of a rolled-up SFT grid fold into one row; running cells stay rows."""
    running = [report_job(f"sft-grid-lr{i}", "sft", job_id=str(600 + i), step=5,
                          total_steps=10) for i in range(2)]
    pending = [report_job(f"sft-grid-lr{i}", "sft", job_id=str(700 + i),
                          state=JobState.PENDING, verdict="buffering",
                          flags=["buffer-filling"]) for i in range(2, 8)]
    grid = GridRollup(grid="sft-grid", running=2, pending_unique=6, done=0, long_pole=None,
                      cells=[GridCell(cell=j.name, job_id=j.job_id, progress_pct=50.0,
                                      eta_s=None) for j in running])
    grouped, details = group_report(report_of(*running, *pending, grid=[grid]), {})
    text = render_text(grouped, details, width=160)
    assert "sft-grid [6 pending]" in text
    assert "sft-grid-lr0" in text and "sft-grid-lr1" in text
    assert "sft-grid-lr5" not in text


def test_json_keeps_members_and_adds_groups() -> None:
    """--format json: every member is still a job; `groups` describes each group."""
    report = array_report(10, 5, failed=(3,))
    data = json.loads(render_json(report))
    assert len(data["jobs"]) == 16
    [group] = groups_json(report)
    assert group["label"] == "rl-sweep-arr [9 running · 5 pending · 1 failed]"
    assert group["worst"] == {"job_id": "9000_3", "verdict": "failed"}
    assert group["attention"] == ["9000_3"] and len(group["members"]) == 15


def test_five_hundred_tasks_fit_one_message() -> None:
    """A 500-task array (3 failed) is one Slack message; ungrouped it needs several."""
    report = array_report(470, 30, failed=(5, 50, 400))
    ungrouped = slack_messages(render_tables(report, {}, width=160))
    grouped, details = group_report(report, {})
    messages = slack_messages(render_tables(grouped, details, width=160))
    assert len(ungrouped) > 1
    assert len(messages) == 1
    text = "\n".join(b["text"]["text"] for b in messages[0].blocks)
    assert "rl-sweep-arr [467 running · 30 pending · 3 failed]" in text
    assert text.count("[FAILED]") == 4  # three failure rows and the group row's tag


def test_counts_view_never_counts_a_failure_twice() -> None:
    """For a summary the group row is judged by its members without rows of their own."""
    report = array_report(20, 0, failed=(4,))
    grouped, _ = group_report(report, {}, for_counts=True)
    verdicts = sorted(j.verdict for j in grouped.jobs if j.name == "rl-sweep-arr")
    assert verdicts == ["failed", "healthy"]
    shown, _ = group_report(report, {})
    assert sorted(j.verdict for j in shown.jobs if j.name == "rl-sweep-arr") == ["failed",
                                                                                 "failed"]


def test_warning_members_keep_their_own_rows_and_are_counted_once() -> None:
    """A warning task (a grad-norm spike, a fault in a live log) is the seed's "reads healthy
    while it is not": rolled up behind a failure or another warning it was never shown. Each
    keeps its own row; the tally still counts every task once, and so does a summary."""
    jobs = [task("9000", i) for i in range(20)]
    jobs[4] = task("9000", 4, verdict="failed", state=JobState.FAILED, trend="Traceback: boom")
    for n in (7, 12):
        jobs[n] = task("9000", n, verdict="warning", trend=f"grad_norm 1.{n} (>1.0) two steps")
    report = report_of(*jobs)
    grouped, details = group_report(report, {})
    rows = {j.job_id: j for j in grouped.jobs if j.name == "rl-sweep-arr"}
    assert sorted(rows) == ["9000_*rl", "9000_12", "9000_4", "9000_7"]
    assert rows["9000_*rl"].verdict == "failed"  # the group row still reads as its worst
    assert details[("alpha", "9000_*rl")].display_name == "rl-sweep-arr [19 running · 1 failed]"
    text = render_text(grouped, details, width=160)
    assert "grad_norm 1.7 (>1.0)" in text and "grad_norm 1.12 (>1.0)" in text
    counted, _ = group_report(report, {}, for_counts=True)
    verdicts = sorted(j.verdict for j in counted.jobs if j.name == "rl-sweep-arr")
    assert verdicts == ["failed", "healthy", "warning", "warning"]
    [group] = groups_json(report)
    assert group["attention"] == ["9000_4", "9000_7", "9000_12"]
    assert group["counts"] == {"RUNNING": 19, "FAILED": 1}


def test_a_lone_warning_member_is_its_own_row_and_the_group_reads_it() -> None:
    """One warning among healthy tasks: its own row, the group row led by its id; counted once."""
    jobs = [task("9000", i, verdict="warning", trend="dead rollouts: reward flat at 0")
            if i == 3 else task("9000", i) for i in range(10)]
    report = report_of(*jobs)
    grouped, _ = group_report(report, {})
    rows = {j.job_id: j for j in grouped.jobs if j.name == "rl-sweep-arr"}
    assert sorted(rows) == ["9000_*rl", "9000_3"]
    assert rows["9000_*rl"].trend.startswith("9000_3: dead rollouts")
    counted, _ = group_report(report, {}, for_counts=True)
    assert sorted(j.verdict for j in counted.jobs if j.name == "rl-sweep-arr") == [
        "healthy", "warning"]


def test_attention_tasks_are_told_apart_by_their_task() -> None:
    """Two collapsing tasks of one array kept their own rows as two identical 'rl-sweep-arr'
    lines (a Slack dry-run); each row now names its task, the group row its tally."""
    jobs = [task("9000", i, verdict="collapse", trend="COLLAPSE: grad_norm + entropy")
            if i in (2, 5) else task("9000", i) for i in range(8)]
    grouped, details = group_report(report_of(*jobs), {})
    assert details[("alpha", "9000_2")].display_name == "rl-sweep-arr [task 2]"
    assert details[("alpha", "9000_5")].display_name == "rl-sweep-arr [task 5]"
    text = render_text(grouped, details, width=160)
    assert "rl-sweep-arr [task 2]" in text and "rl-sweep-arr [task 5]" in text


def test_a_group_whose_every_task_has_its_own_row_adds_no_count() -> None:
    """Every task collapsing: the summary counted the group row as well ('9 jobs' for 8)."""
    jobs = [task("9000", i, verdict="collapse", trend="COLLAPSE") for i in range(8)]
    counted, _ = group_report(report_of(*jobs), {}, for_counts=True)
    assert len([j for j in counted.jobs if j.name == "rl-sweep-arr"]) == 8
    shown, _ = group_report(report_of(*jobs), {})
    assert len([j for j in shown.jobs if j.name == "rl-sweep-arr"]) == 9  # tables keep the tally
