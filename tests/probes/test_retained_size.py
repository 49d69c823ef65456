"""A job's facts do not grow with its log (issue 12): built through the collector and
``job_facts`` from 1 MiB and 10 MiB tails, what a job retains is bounded and the same for both
(the Kubernetes path: ``tests/probes/kubernetes/test_k8s_retained_size.py``)."""

from __future__ import annotations

import getpass
from pathlib import Path
from typing import Any

import pytest

from probes.config import SlurmCluster
from probes.logs.excerpt import TAIL_CHARS
from probes.models import ClusterFacts, JobFacts, JobState, SchedulerRecord
from probes.remote import collector
from probes.slurm.assemble import job_facts
from probes.slurm.request import collector_request
from report.judge import build_report
from report.render import render_job_detail, render_job_json
from report.settings import ReportSettings
from tests.probes.retained import deep_size, rl_log
from tests.report.factories import NOW

SIZES = [1 << 20, 10 << 20]
BOUND = 100_000
"""The issue's target per job (bytes, both as JSON and in memory)."""
READ_ALL = 16 << 20
"""A tail budget that reads either log whole: the tail is as long as the log."""


Collected = tuple[SchedulerRecord, dict[str, Any]]


def collect(tmp_path: Path, text: str) -> Collected:
    """The sweep's path, first half: the collector reads the log whole."""
    log = tmp_path / "slurm-7.out"
    log.write_text(text)
    record = SchedulerRecord(cluster="a", job_id="7", name="rl-agentic-7",
                             user=getpass.getuser(), state=JobState.FAILED,
                             workdir=str(tmp_path), stdout_path=str(log))
    cluster = SlurmCluster(name="a", local=True, tail_bytes=READ_ALL,
                           answer_budget_bytes=64 << 20)
    answer = collector.collect(collector_request([record], cluster))
    assert len(answer["jobs"]["7"]["log"]["text"]) == len(text)  # read whole
    return record, answer["jobs"]["7"]


def slurm_facts(collected: Collected, *, whole_tail: bool = False) -> JobFacts:
    """The sweep's path, second half: ``job_facts`` assembles the collector's answer."""
    record, answer = collected
    return job_facts(record, answer, aliases={}, benign_patterns=(), whole_tail=whole_tail)


def sizes(job: JobFacts) -> tuple[int, int]:
    return len(job.model_dump_json()), deep_size(job)


@pytest.fixture(scope="module")
def logs() -> dict[int, str]:
    return {n: rl_log(n) for n in SIZES}


@pytest.fixture(scope="module")
def collected(logs: dict[int, str], tmp_path_factory: pytest.TempPathFactory,
              ) -> dict[int, Collected]:
    """Each log's collector answer, read once for the module's tests (neither changes it)."""
    return {n: collect(tmp_path_factory.mktemp(f"log-{n}"), logs[n]) for n in SIZES}


@pytest.fixture(scope="module")
def bounded(collected: dict[int, Collected]) -> dict[int, JobFacts]:
    """Each log's facts as a sweep keeps them (frozen models, only read by the tests)."""
    return {n: slurm_facts(collected[n]) for n in SIZES}


def test_slurm_job_retains_a_bounded_size(bounded: dict[int, JobFacts]) -> None:
    """The collector's whole-log answer through ``job_facts``: under 100 KB as JSON and in
    memory, for 1 MiB as for 10 MiB (the whole tail is ~1 MB and ~10 MB)."""
    small, large = (bounded[n] for n in SIZES)
    for job in (small, large):
        assert job.log is not None and len(job.log.text) <= TAIL_CHARS
        assert max(sizes(job)) < BOUND
    json_small, mem_small = sizes(small)
    json_large, mem_large = sizes(large)
    assert abs(json_large - json_small) < 0.05 * json_small
    assert abs(mem_large - mem_small) < 0.05 * mem_small


def test_user_sees_the_same_job_from_the_bounded_facts(
        logs: dict[int, str], collected: dict[int, Collected],
        bounded: dict[int, JobFacts]) -> None:
    """``jobtables job`` (its text and its JSON) is the same from the kept facts as from the
    facts holding the whole 10 MiB tail."""
    whole = slurm_facts(collected[10 << 20], whole_tail=True)
    assert whole.log is not None and len(whole.log.text) == len(logs[10 << 20])
    views = []
    for job in (bounded[10 << 20], whole):
        cluster = ClusterFacts(name="a", kind="slurm", status="ok", collected_at=NOW,
                               jobs=(job,))
        report, details = build_report([cluster], settings=ReportSettings(), now=NOW)
        detail = details[("a", "7")]
        views.append((render_job_detail(detail), render_job_json(detail),
                      report.model_dump_json()))
    assert views[0] == views[1]
    assert "RuntimeError: CUDA error" in views[0][0]
