"""Benchmark: linking restart chains for a whole sweep, as ``report.judge`` does (not a test).

    PYTHONPATH=. nice -n 19 .venv/bin/python tests/bench/bench_chain.py [--grid 300,1000,3000]

In process, no SLURM: one cluster's ``SchedulerRecord`` list, indexed once
(``report.chain.ChainIndex``, as ``judge.build_report`` does per cluster), then
``report.chain.chain_link`` called for every job with the judge's arguments
(``holds.as_ended`` of the record, no remembered edges, ``continues``/``co_waits`` by bucket
as ``judge.judge_job`` passes them). The sets:

- ``lab``: 5,000 jobs over 500 workdirs, 20 users: restart chains of 3 to 12 links (each a
  TIMEOUT whose ``afterany`` successor was queued while it ran, released at its end; SLURM has
  cleared the met ``Dependency`` of those that started; the last link RUNNING, or PENDING
  still naming its predecessor; some renamed ``-r2``), ``%1`` restart arrays, arrays run in
  waves with TIMEOUT tasks, and some chains stopped by a cancelled pending restart (run names
  ``rl-grpo-qwen-<w>`` and so on: one name stem for all of a user's runs of a kind); ``lab 1
  user``: the same, all of one user;
- ``grid N``: the degenerate case, N TIMEOUT cells of one user in one workdir ending together,
  a third with a RUNNING restart of their name (dependency cleared), a third with a PENDING
  one still naming them, a third with none.

Printed per set: the index build alone (the linear floor), the linking of every job, per job
cost, and the linking's ratio to the floor. Each figure is the least process CPU time of three
repeats (``time.process_time``: other processes' load only ever adds time).
"""

from __future__ import annotations

import argparse
import random
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta

from probes.models import JobState, SchedulerRecord
from report.buckets import bucket_for
from report.chain import ChainIndex, ChainLink, chain_link
from report.holds import as_ended
from report.settings import ReportSettings

__test__ = False

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
WALLTIME = timedelta(hours=4)
CLUSTER = "bench"


class _Ids:
    def __init__(self, start: int = 10_000) -> None:
        self.next = start

    def take(self) -> str:
        self.next += 1
        return str(self.next)


def _ended(job_id: str, name: str, user: str, workdir: str, start: datetime, *,
           state: JobState = JobState.TIMEOUT, submit: datetime | None = None,
           **extra: object) -> SchedulerRecord:
    return SchedulerRecord(
        cluster=CLUSTER, job_id=job_id, name=name, user=user, state=state,
        submit_time=submit or start - timedelta(minutes=3), eligible_time=submit or start,
        start_time=start, end_time=start + WALLTIME, time_limit_s=int(WALLTIME.total_seconds()),
        workdir=workdir, stdout_path=f"{workdir}/slurm-{job_id}.out", nodes="n1",
        **extra)  # type: ignore[arg-type]


def _chain(ids: _Ids, rng: random.Random, user: str, workdir: str,
           name: str) -> list[SchedulerRecord]:
    """One run's restart chain: TIMEOUT links, each released by its predecessor's end."""
    links = rng.randint(3, 12)
    start = NOW - WALLTIME * links - timedelta(minutes=rng.randint(1, 600))
    out: list[SchedulerRecord] = []
    previous: SchedulerRecord | None = None
    renamed = rng.random() < 0.3
    stopped = rng.random() < 0.1
    for k in range(links):
        job_id = ids.take()
        title = f"{name}-r{k}" if renamed and k else name
        submit = (previous.start_time + timedelta(minutes=1)
                  if previous and previous.start_time else start - timedelta(minutes=2))
        last = k == links - 1
        if previous is None or not last:
            record = _ended(job_id, title, user, workdir, start, submit=submit)
            if previous is not None:
                record = record.model_copy(update={"eligible_time": previous.end_time})
        elif stopped:
            record = SchedulerRecord(
                cluster=CLUSTER, job_id=job_id, name=title, user=user, state=JobState.CANCELLED,
                submit_time=submit, start_time=previous.end_time, end_time=previous.end_time,
                workdir=workdir, dependency=f"afterany:{previous.job_id}(unfulfilled)",
                nodes="None assigned")
        elif rng.random() < 0.5:
            record = SchedulerRecord(
                cluster=CLUSTER, job_id=job_id, name=title, user=user, state=JobState.RUNNING,
                submit_time=submit, eligible_time=previous.end_time, start_time=previous.end_time,
                workdir=workdir, stdout_path=f"{workdir}/slurm-{job_id}.out", nodes="n2")
        else:  # queued behind the link still running: that one is the TIMEOUT-to-be
            record = SchedulerRecord(
                cluster=CLUSTER, job_id=job_id, name=title, user=user, state=JobState.PENDING,
                reason="Dependency", submit_time=submit, workdir=workdir,
                dependency=f"afterany:{previous.job_id}(unfulfilled)")
        out.append(record)
        previous, start = record, start + WALLTIME
    return out


def _array(ids: _Ids, rng: random.Random, user: str, workdir: str,
           name: str) -> list[SchedulerRecord]:
    """An array's tasks: one at a time (``%1``, a restart chain) or in waves (``%4``)."""
    array, throttle = ids.take(), rng.choice((1, 4))
    tasks = rng.randint(4, 10)
    submit = NOW - WALLTIME * (tasks + 1)
    out = []
    for t in range(tasks):
        start = submit + WALLTIME * (t if throttle == 1 else t // throttle) + timedelta(minutes=1)
        task = f"{array}_{t}"
        extra = {"array_job_id": array, "array_task_id": str(t),
                 "labels": {"array_throttle": str(throttle)}}
        if start + WALLTIME < NOW:
            out.append(_ended(task, name, user, workdir, start, submit=submit, **extra))
        elif start <= NOW:
            out.append(SchedulerRecord(
                cluster=CLUSTER, job_id=task, name=name, user=user, state=JobState.RUNNING,
                submit_time=submit, eligible_time=submit, start_time=start, workdir=workdir,
                nodes="n3", **extra))  # type: ignore[arg-type]
    return out


def lab(jobs: int = 5000, workdirs: int = 500, users: int = 20,
        seed: int = 7) -> list[SchedulerRecord]:
    """About ``jobs`` records over ``workdirs`` workdirs (module docstring, ``lab``)."""
    rng, ids = random.Random(seed), _Ids()
    out: list[SchedulerRecord] = []
    names = ("rl-grpo-qwen", "sft-llama-lr3e5", "datagen-swe", "eval-math", "my-run")
    w = 0
    while len(out) < jobs:
        user, workdir = f"u{w % users}", f"/scratch/u{w % users}/exp{w % workdirs}"
        name = f"{rng.choice(names)}-{w}"
        out += (_array if rng.random() < 0.2 else _chain)(ids, rng, user, workdir, name)
        w += 1
    return out[:jobs]


def grid(cells: int) -> list[SchedulerRecord]:
    """``cells`` TIMEOUT cells in one workdir (module docstring, ``grid N``)."""
    ids, out = _Ids(), []
    start, workdir = NOW - WALLTIME - timedelta(minutes=10), "/scratch/u0/sweep"
    for i in range(cells):
        cell = _ended(ids.take(), f"sft-grid-lr{i}x", "u0", workdir, start,
                      submit=start - timedelta(minutes=5, seconds=i))
        out.append(cell)
        end = cell.end_time
        assert end is not None
        if i % 3 == 0:
            out.append(SchedulerRecord(
                cluster=CLUSTER, job_id=ids.take(), name=cell.name, user="u0",
                state=JobState.RUNNING, submit_time=start + timedelta(minutes=1),
                eligible_time=end, start_time=end, workdir=workdir, nodes="n4"))
        elif i % 3 == 1:
            out.append(SchedulerRecord(
                cluster=CLUSTER, job_id=ids.take(), name=cell.name, user="u0",
                state=JobState.PENDING, reason="Dependency",
                submit_time=start + timedelta(minutes=1), workdir=workdir,
                dependency=f"afterany:{cell.job_id}(unfulfilled)"))
    return out


def link_all(records: Sequence[SchedulerRecord],
             settings: ReportSettings) -> list[ChainLink]:
    """Every job's link, as ``judge.build_report``/``judge_job`` ask for them."""
    index = ChainIndex(records)
    links = []
    for record in records:
        bucket = bucket_for(record.name, settings.buckets)
        links.append(chain_link(
            as_ended(record), records, {}, index=index, planned_stop=False, success_edges=None,
            continues=lambda r, b=bucket: bucket_for(r.name, settings.buckets) in (b, "other"),
            co_waits=lambda r, b=bucket: bucket_for(r.name, settings.buckets) == b))
    return links


def _least(run: Callable[[], object], repeats: int = 3) -> float:
    best = float("inf")
    for _ in range(repeats):
        began = time.process_time()
        run()
        best = min(best, time.process_time() - began)
    return best


def measure(label: str, records: Sequence[SchedulerRecord], settings: ReportSettings) -> None:
    floor = _least(lambda: ChainIndex(records))
    linked = _least(lambda: link_all(records, settings))
    timeouts = sum(1 for r in records if r.state is JobState.TIMEOUT)
    print(f"{label:<12} {len(records):>6} jobs {timeouts:>5} TIMEOUT  index {floor * 1e3:8.1f} ms"
          f"  link {linked * 1e3:9.1f} ms  {linked / len(records) * 1e6:8.1f} us/job"
          f"  x{linked / floor:7.1f} floor", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--grid", default="300,1000,3000")
    parser.add_argument("--jobs", type=int, default=5000)
    args = parser.parse_args()
    settings = ReportSettings()
    measure("lab", lab(args.jobs), settings)
    measure("lab 1 user", lab(args.jobs, users=1), settings)
    for n in (int(x) for x in args.grid.split(",")):
        measure(f"grid {n}", grid(n), settings)


if __name__ == "__main__":
    main()
