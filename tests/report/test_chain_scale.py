"""The chain's links on random clusters are the ones the implementation before its lookups by
name and per-workdir lists (at fe6addc, where a grid of N TIMEOUTs in one workdir cost O(N^3))
gave: its answers, computed then, are kept in ``chain_oracle.json`` beside this file.

Clusters are dense on purpose (a few users and workdirs, times on a coarse grid so that ends,
eligibilities and submissions coincide, dependencies of every kind, arrays, cancels), so that
every rule of :mod:`report.chain` answers some job. Regenerate the oracle only for an intended
change of the rules:

    PYTHONPATH=. .venv/bin/python tests/report/test_chain_scale.py --regenerate
"""

from __future__ import annotations

import json
import random
import sys
from dataclasses import astuple
from datetime import timedelta
from pathlib import Path

from probes.models import JobState, SchedulerRecord
from report.chain import ChainIndex, chain_link
from tests.report.factories import NOW

ORACLE = Path(__file__).with_name("chain_oracle.json")
SEEDS = range(300)
_STATES = (JobState.TIMEOUT,) * 4 + (JobState.PENDING,) * 3 + (JobState.RUNNING,) * 3 + (
    JobState.COMPLETED, JobState.FAILED, JobState.CANCELLED, JobState.CANCELLED)
_KINDS = ("afterany", "afterany", "afternotok", "afterok", "aftercorr", "after")
_REASONS = ("Dependency", "Dependency", "Priority", "DependencyNeverSatisfied", "JobHeldUser",
            None)
_NAMES = ("rl-a", "rl-a-r2", "rl-a_resume", "sft-b", "sft-b.2", "eval-c", "upload-d", "rl-e")


def _at(rng: random.Random) -> timedelta:
    """A moment on a coarse grid (ends and releases coincide), sometimes seconds off it."""
    return timedelta(minutes=10 * rng.randint(0, 30), seconds=rng.choice((0, 0, 0, 1, 3, 90)))


def _record(rng: random.Random, i: int, ids: list[str]) -> SchedulerRecord:
    base = NOW - timedelta(hours=8)
    array = rng.random() < 0.15
    job_id = f"{500 + i}_{rng.randint(0, 3)}" if array else str(500 + i)
    state = rng.choice(_STATES)
    submit = base + _at(rng)
    eligible = submit + (_at(rng) if rng.random() < 0.6 else timedelta())
    start = eligible + timedelta(minutes=rng.choice((0, 0, 10)))
    end = start + _at(rng) + timedelta(minutes=10)
    dependency = None
    if ids and rng.random() < 0.5:
        targets = rng.sample(ids, k=min(len(ids), rng.choice((1, 1, 2))))
        joiner = rng.choice((":", "?"))
        dependency = joiner.join(f"{rng.choice(_KINDS)}:{t}" for t in targets) + "(unfulfilled)"
    workdir = rng.choice(("/w/a", "/w/a", "/w/b", None))
    live = state in (JobState.PENDING, JobState.RUNNING)
    return SchedulerRecord(
        cluster="c", job_id=job_id, name=rng.choice(_NAMES), user=rng.choice(("u", "u", "v")),
        state=state, reason=rng.choice(_REASONS) if state is JobState.PENDING else None,
        submit_time=None if rng.random() < 0.03 else submit,
        eligible_time=None if state is JobState.PENDING and rng.random() < 0.5 else eligible,
        start_time=None if state is JobState.PENDING else start,
        end_time=None if live else end, workdir=workdir,
        stdout_path=rng.choice((f"{workdir}/log-%j.out".replace("%j", job_id), None,
                                f"{workdir}/slurm-{job_id}.out")),
        dependency=dependency, nodes=rng.choice(("n1", "None assigned", None)),
        array_job_id=job_id.partition("_")[0] if array else None,
        array_task_id=job_id.partition("_")[2] if array else None,
        labels={"array_throttle": rng.choice(("1", "4", "0"))} if array else {})


def _co_waiting(rng: random.Random, i: int) -> list[SchedulerRecord]:
    """A TIMEOUT ``A``, another run's job ``B`` and ``C`` queued behind both (rule 4), its
    times jittered so that the rule answers some and not others."""
    base, workdir = NOW - timedelta(hours=6), rng.choice(("/w/a", f"/w/m{i}", f"/w/m{i}"))
    a_end = base + timedelta(hours=4)
    b_end = a_end + timedelta(minutes=rng.choice((-30, 0, 20)), seconds=rng.choice((0, 2)))
    b_live = rng.random() < 0.5
    c_submit = base + timedelta(minutes=rng.choice((-5, 5, 10)))
    released = not b_live and rng.random() < 0.6
    common = {"cluster": "c", "user": "u", "workdir": workdir}
    return [
        SchedulerRecord(job_id=str(900 + 3 * i), name=rng.choice(("rl-a", "rl-e")),
                        state=JobState.TIMEOUT, submit_time=base, eligible_time=base,
                        start_time=base, end_time=a_end, nodes="n1", **common),
        SchedulerRecord(job_id=str(901 + 3 * i), name=rng.choice(("sft-b", "rl-a-r2")),
                        state=JobState.RUNNING if b_live else JobState.COMPLETED,
                        submit_time=base - timedelta(minutes=rng.choice((1, -20))),
                        eligible_time=base, start_time=base,
                        end_time=None if b_live else b_end, nodes="n2", **common),
        SchedulerRecord(job_id=str(902 + 3 * i), name=rng.choice(("rl-a", "eval-c", "rl-e-r3")),
                        state=JobState.RUNNING if released else JobState.PENDING,
                        reason=None if released else "Dependency", submit_time=c_submit,
                        eligible_time=max(a_end, b_end) if released else None,
                        start_time=max(a_end, b_end) if released else None,
                        dependency=None if released else f"{rng.choice(_KINDS)}:{901 + 3 * i}",
                        **common),
    ]


def _cancelled(rng: random.Random, i: int) -> list[SchedulerRecord]:
    """A TIMEOUT ``A`` whose restart ``B`` was cancelled while pending (SLURM keeps its
    ``Dependency``), and sometimes a job of the run queued after that cancel (a relaunch)."""
    base, workdir = NOW - timedelta(hours=6), rng.choice(("/w/a", f"/w/n{i}"))
    a_end, cancel = base + timedelta(hours=4), base + timedelta(hours=4, minutes=rng.choice((0, 5)))
    common = {"cluster": "c", "user": "u", "workdir": workdir}
    out = [
        SchedulerRecord(job_id=str(700 + 3 * i), name="rl-k", state=JobState.TIMEOUT,
                        submit_time=base, eligible_time=base, start_time=base, end_time=a_end,
                        nodes="n1", **common),
        SchedulerRecord(job_id=str(701 + 3 * i), name=rng.choice(("rl-k", "rl-k-r2", "eval-k")),
                        state=JobState.CANCELLED, submit_time=base + timedelta(minutes=1),
                        start_time=cancel, end_time=cancel, nodes="None assigned",
                        dependency=f"{rng.choice(_KINDS)}:{700 + 3 * i}(unfulfilled)", **common),
    ]
    if rng.random() < 0.6:
        out.append(SchedulerRecord(
            job_id=str(702 + 3 * i), name=rng.choice(("rl-k", "rl-k_resume", "sft-k")),
            state=rng.choice((JobState.PENDING, JobState.RUNNING)),
            submit_time=cancel + timedelta(minutes=rng.choice((10, 50, 90))), **common))
    return out


def cluster(seed: int) -> list[SchedulerRecord]:
    """One dense random cluster (module docstring)."""
    rng = random.Random(seed)
    out: list[SchedulerRecord] = []
    for i in range(rng.choice((5, 8, 12, 20, 40, 90))):
        if rng.random() < 0.15:
            out += _co_waiting(rng, i)
        elif rng.random() < 0.08:
            out += _cancelled(rng, i)
        else:
            out.append(_record(rng, i, [r.job_id for r in out]))
    return out


def links(seed: int) -> dict[str, list[object]]:
    """Every job's link in cluster ``seed``, as the judge asks (bucket callables by name),
    remembered edges on some; the empty links left out."""
    records = cluster(seed)
    rng = random.Random(seed + 10_000)
    ids = [r.job_id for r in records]
    edges = {rng.choice(ids): rng.choice(ids) for _ in range(3)}
    index = ChainIndex(records)
    found: dict[str, list[object]] = {}
    for r in records:
        prefix = r.name.split("-")[0]
        for planned in (False, True):
            link = chain_link(
                r, records, edges, index=index, planned_stop=planned, success_edges=edges,
                continues=lambda c, p=prefix: c.name.split("-")[0] in (p, "upload"),
                co_waits=lambda c, p=prefix: c.name.split("-")[0] == p)
            if any(astuple(link)):
                found[f"{r.job_id}/{int(planned)}"] = list(astuple(link))
    return found


def test_links_unchanged_on_random_clusters() -> None:
    """Each random cluster's links are those the scan before the bisection gave."""
    expected = json.loads(ORACLE.read_text())
    assert sum(len(v) for v in expected.values()) > 1000
    for seed in SEEDS:
        assert links(seed) == expected[str(seed)], seed


if __name__ == "__main__":
    if sys.argv[1:] == ["--regenerate"]:  # one line per cluster
        ORACLE.write_text("{\n" + ",\n".join(
            f'"{s}": {json.dumps(links(s), sort_keys=True, separators=(",", ":"))}'
            for s in SEEDS) + "\n}\n")
