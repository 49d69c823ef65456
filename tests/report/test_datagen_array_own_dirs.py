"""A datagen array whose tasks each write their own Harbor job dir is one run of that many
chunks: its row counts them all (found by an acceptance dry run: an sbatch ``--array=0-3`` as
jtuser on the real SLURM, each task's Harbor ``--jobs-dir`` under a ``trial_roots`` template
``.../{user}/{name}/{job_id}`` (``262_0`` ... ``262_3``), read through ``jobtables sweep``).

Each task reads its own tree: Chunks 0/1 and its own trials. Chunks submitted as separate jobs
each with its own dir already counted as the run's members; an array's tasks did not, so the
group row ``datagen-tbench-synth [4 running]`` read ``0/1 done`` and one task's 22 trials for a
run of 4 chunks and 88 trials (the rulebook's Datagen row: Chunks done/total, Trials as the
result.json count of the run).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from probes.logs.parse import parse_log
from probes.models import JobFacts, JobState
from probes.remote.collector import collect_trials
from probes.slurm.assemble import trial_tree
from report.grouping import group_report
from report.render import render_text
from tests.report.factories import judge, log, record, report_of
from tests.report.test_harbor_dryrun_datagen import MAKE


def _task(root: Path, job_id: str, mix: dict[str, int], *, finished: bool = False,
          seed: int) -> JobFacts:
    now = datetime.now(UTC)
    MAKE.write(root / job_id / "2026-12-05__03-00-00", mix, total=sum(mix.values()),
               seed=seed, finished=finished, turns=4 + seed % 3)
    tree = trial_tree(collect_trials([str(root / job_id)]))
    assert tree is not None
    state = JobState.COMPLETED if finished else JobState.RUNNING
    rec = record("datagen-tbench-synth", job_id=job_id, state=state,
                 start_time=now - timedelta(minutes=30), elapsed_s=1800,
                 array_job_id=job_id.partition("_")[0], array_task_id=job_id.partition("_")[2])
    return JobFacts(record=rec, log=log(mtime=now), summary=parse_log("engine up\n", mtime=now),
                    trials=tree)


def test_an_arrays_tasks_with_their_own_dirs_are_the_runs_chunks(tmp_path: Path) -> None:
    """Four tasks, one finished: the row reads 1/4 done and every task's trials."""
    now = datetime.now(UTC)
    facts = [_task(tmp_path, "900_0", {"pass": 10, "fail": 10}, finished=True, seed=1),
             _task(tmp_path, "900_1", {"pass": 8, "fail": 12, "inflight": 4}, seed=2),
             _task(tmp_path, "900_2", {"pass": 4, "timeout": 6, "inflight": 4}, seed=3),
             _task(tmp_path, "900_3", {"fail": 6, "inflight": 4}, seed=4)]
    details = [judge(f, others=[g.record for g in facts if g is not f], now=now)
               for f in facts]
    rows = [d.report for d in details]
    assert [r.metrics["chunks_total"] for r in rows] == [1.0] * 4
    grouped, shown = group_report(report_of(*rows),
                                  {(d.report.cluster, d.report.job_id): d for d in details})
    [row] = grouped.jobs
    trials = sum(r.metrics["trials"] for r in rows)
    assert trials == 56.0
    assert (row.metrics["chunks_done"], row.metrics["chunks_total"]) == (1.0, 4.0)
    assert row.metrics["trials"] == trials
    exc = sum(r.metrics["exc_pct"] * r.metrics["trials"] for r in rows) / trials
    assert abs(row.metrics["exc_pct"] - exc) < 1e-9
    turns = sum(r.metrics["avg_turns"] * r.metrics["trials"] for r in rows) / trials
    assert abs(row.metrics["avg_turns"] - turns) < 1e-9
    text = render_text(grouped, shown, width=100)
    assert "1/4 done" in text and "│ 56 " in text, text


def test_an_arrays_tasks_sharing_one_tree_keep_the_runs_counts(tmp_path: Path) -> None:
    """Tasks that each read the whole shared tree already count the run: nothing is summed."""
    now = datetime.now(UTC)
    shared = tmp_path / "jobs"
    MAKE.write(shared / "task-0", {"pass": 5, "fail": 5}, total=10, seed=1, finished=True)
    MAKE.write(shared / "task-1", {"pass": 3, "inflight": 7}, total=10, seed=2)
    tree = trial_tree(collect_trials([str(shared)]))
    assert tree is not None
    facts = [JobFacts(record=record("datagen-tbench-synth", job_id=f"901_{k}",
                                    start_time=now - timedelta(minutes=30), elapsed_s=1800,
                                    array_job_id="901", array_task_id=str(k)),
                      log=log(mtime=now), summary=parse_log("engine up\n", mtime=now),
                      trials=tree) for k in (0, 1)]
    details = [judge(f, others=[g.record for g in facts if g is not f], now=now)
               for f in facts]
    grouped, _ = group_report(report_of(*(d.report for d in details)),
                              {(d.report.cluster, d.report.job_id): d for d in details})
    [row] = grouped.jobs
    assert (row.metrics["chunks_done"], row.metrics["chunks_total"]) == (1.0, 2.0)
    assert row.metrics["trials"] == 13.0


def _group_row(facts: list[JobFacts]):
    now = datetime.now(UTC)
    details = [judge(f, others=[g.record for g in facts if g is not f], now=now)
               for f in facts]
    grouped, shown = group_report(report_of(*(d.report for d in details)),
                                  {(d.report.cluster, d.report.job_id): d for d in details})
    [row] = grouped.jobs
    return row, grouped, shown


def test_an_arrays_tasks_with_several_chunks_each_are_the_runs_chunks(tmp_path: Path) -> None:
    """Found replaying on the real SLURM: a datagen ``--array=0-3`` whose tasks each write three
    Harbor job dirs into their own ``{workdir}/jobs/{job_id}`` (a ``trial_roots`` template), two
    finished and one running. The row read ``2/3 done`` and 24 trials, one task's tree, for a
    run of 12 chunks (8 done) and 96 trials: the members' trees were summed only when each held
    one chunk."""
    now = datetime.now(UTC)
    facts = []
    for k in range(4):
        root = tmp_path / f"902_{k}"
        for c in (0, 1):
            MAKE.write(root / f"chunk_{c}", {"pass": 5, "fail": 5}, total=10, seed=10 * k + c,
                       finished=True)
        MAKE.write(root / "chunk_2", {"pass": 2, "fail": 2, "inflight": 6}, total=10,
                   seed=10 * k + 2)
        tree = trial_tree(collect_trials([str(root)]))
        assert tree is not None and tree.chunks_total == 3
        facts.append(JobFacts(
            record=record("datagen-tbench-synth", job_id=f"902_{k}",
                          start_time=now - timedelta(minutes=30), elapsed_s=1800,
                          array_job_id="902", array_task_id=str(k)),
            log=log(mtime=now), summary=parse_log("engine up\n", mtime=now), trials=tree))
    row, grouped, shown = _group_row(facts)
    assert (row.metrics["chunks_done"], row.metrics["chunks_total"]) == (8.0, 12.0), row.metrics
    assert row.metrics["trials"] == 96.0
    assert "8/12 done" in render_text(grouped, shown, width=100)


def test_tasks_reading_one_shared_single_chunk_tree_are_not_summed(tmp_path: Path) -> None:
    """Near-miss of the above: task 0 wrote the only chunk so far into the shared jobs dir and
    task 1 has not written its own yet; both read that one chunk. Summing them read 2/2 done
    and twice its trials."""
    now = datetime.now(UTC)
    shared = tmp_path / "jobs"
    MAKE.write(shared / "task-0", {"pass": 5, "fail": 5}, total=10, seed=1, finished=True)
    tree = trial_tree(collect_trials([str(shared)]))
    assert tree is not None and tree.chunks_total == 1
    facts = [JobFacts(record=record("datagen-tbench-synth", job_id=f"903_{k}",
                                    state=state, start_time=now - timedelta(minutes=30),
                                    elapsed_s=1800, array_job_id="903", array_task_id=str(k)),
                      log=log(mtime=now), summary=parse_log("engine up\n", mtime=now),
                      trials=tree)
             for k, state in ((0, JobState.COMPLETED), (1, JobState.RUNNING))]
    row, _, _ = _group_row(facts)
    assert row.metrics["trials"] == 10.0, row.metrics
    assert row.metrics["chunks_done"] == 1.0, row.metrics
