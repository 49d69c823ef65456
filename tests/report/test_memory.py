"""Sweep memory: failure signatures, when a failure recurs, and what the next sweep keeps."""

from __future__ import annotations

from datetime import timedelta

import pytest

from probes.models import Fault, JobState
from report.judge import build_report
from report.memory import (
    SweepMemory,
    failure_signature,
    next_memory,
    repeated_failure,
    same_failure,
)
from report.models import FailureSignature
from report.settings import ReportSettings
from tests.report.factories import NOW, cluster, facts, logged_job, record

SETTINGS = ReportSettings()


def _failed(job_id: str, kind: str, text: str, elapsed: int) -> FailureSignature:
    fault = Fault(kind=kind, line_no=5, excerpt=text)
    job = facts(record("sft-x", job_id, JobState.FAILED, elapsed_s=elapsed),
                summary_kw={"faults": (fault,)})
    signature = failure_signature(job, "failed")
    assert signature is not None
    return signature


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        (("1", "oom", "CUDA out of memory at 0x7f00 (GPU 3)", 100),
         ("2", "oom", "CUDA out of memory at 0x7e11 (GPU 5)", 9000), True),
        (("1", "oom", "CUDA out of memory", 100), ("2", "traceback", "CUDA out of memory", 100),
         False),
        (("1", "sigterm", "SIGTERM received", 14400), ("2", "sigterm", "SIGTERM received", 14100),
         True),
        # near-miss: SIGTERM at a different time is not "a fixed interval"
        (("1", "sigterm", "SIGTERM received", 14400), ("2", "sigterm", "SIGTERM received", 3600),
         False),
    ],
)
def test_same_failure(
    a: tuple[str, str, str, int], b: tuple[str, str, str, int], same: bool
) -> None:
    """Signatures ignore ids, numbers and addresses; SIGTERM also needs the same elapsed time."""
    assert same_failure(_failed(*a), _failed(*b)) is same


def test_no_signature_unless_failed() -> None:
    """Only a failed attempt leaves a signature."""
    job = facts(record("sft-x", "1", JobState.COMPLETED))
    assert failure_signature(job, "done") is None
    assert failure_signature(facts(record("sft-x", "1", JobState.TIMEOUT)), "restarting") is None


def test_next_memory_remembers_edges_signatures_and_healthy_configs() -> None:
    """Edges survive SLURM clearing Dependency; failures and healthy configs are recorded."""
    pred = logged_job("rl-x", "1", JobState.RUNNING)
    succ = logged_job("rl-x", "2", JobState.PENDING, depends_on=("1",))
    failed = logged_job("sft-y", "3", JobState.FAILED, exit_code=1)
    clusters = [cluster("alpha", [pred, succ, failed])]
    memory = SweepMemory()
    report, details = build_report(clusters, settings=SETTINGS, now=NOW, memory=memory)
    memory = next_memory(report, details, clusters, memory)
    assert memory.known_edges == {"alpha": {"1": "2"}}
    assert memory.seen_configs == {"alpha": ["rl-x"]}
    [signature] = memory.failure_signatures["alpha:sft-y"]
    assert (signature.job_id, signature.kind, signature.text) == ("3", "exit1", "failed")

    # next sweep: the predecessor timed out, the successor started and SLURM cleared Dependency
    timed_out = logged_job("rl-x", "1", JobState.TIMEOUT, end_time=NOW)
    started = logged_job("rl-x-renamed", "2", JobState.RUNNING)
    clusters = [cluster("alpha", [timed_out, started, failed])]
    report, details = build_report(clusters, settings=SETTINGS, now=NOW, memory=memory)
    assert details[("alpha", "1")].report.successor == "2"
    again = next_memory(report, details, clusters, memory)
    assert again.failure_signatures == memory.failure_signatures  # not appended twice
    assert again.known_edges == {"alpha": {"1": "2"}}


def test_next_memory_forgets_gone_chains_but_keeps_unreachable_clusters() -> None:
    """Edges whose jobs left the report are dropped; an unreachable cluster keeps its edges."""
    previous = SweepMemory(known_edges={"alpha": {"1": "2"}, "beta": {"7": "8"}})
    clusters = [cluster("alpha", [logged_job("rl-q", "50")]),
                cluster("beta", [], status="unreachable", collected_at=NOW - timedelta(0))]
    report, details = build_report(clusters, settings=SETTINGS, now=NOW, memory=previous)
    memory = next_memory(report, details, clusters, previous)
    assert memory.known_edges == {"beta": {"7": "8"}}
    assert next_memory(report, details, clusters, None).known_edges == {}


def test_signature_ignores_attempt_numbers_but_not_the_error() -> None:
    """Another attempt with other numbers in its error is the same failure; another error is not.

    (Moved from the bot's incident tests: the incident files now use this signature.)
    """
    first = _failed("100", "traceback", "RuntimeError: shard 7 is corrupt", 600)
    again = _failed("200", "traceback", "RuntimeError: shard 12 is corrupt", 900)
    other = _failed("300", "traceback", "RuntimeError: CUDA out of memory", 600)
    assert same_failure(again, first) and not same_failure(other, first)
    assert (first.kind, first.text) == ("traceback", "runtimeerror: shard # is corrupt")


def test_repeated_failure_compares_with_the_latest_other_attempt() -> None:
    """Only the run's latest earlier attempt counts, and never the job itself."""
    oom = _failed("1", "oom", "CUDA out of memory", 100)
    trace = _failed("2", "traceback", "KeyError: x", 100)
    now = _failed("3", "oom", "CUDA out of memory", 100)
    assert repeated_failure(now, [oom]) == oom
    assert repeated_failure(now, [oom, trace]) is None  # A, B, A: not consecutive
    assert repeated_failure(now, [oom, now]) == oom  # its own earlier entry is skipped
    assert repeated_failure(now, []) is None


def test_memory_reads_signatures_written_before_they_were_a_model() -> None:
    """A ``job|kind|text|elapsed`` string in Redis still reads as that signature."""
    memory = SweepMemory.model_validate(
        {"failure_signatures": {"alpha:sft-x": ["7|sigterm|sigterm received|14400", "8|oom|x|"]}})
    assert memory.failure_signatures["alpha:sft-x"] == [
        FailureSignature(job_id="7", kind="sigterm", text="sigterm received", elapsed_s=14400),
        FailureSignature(job_id="8", kind="oom", text="x", elapsed_s=None),
    ]
