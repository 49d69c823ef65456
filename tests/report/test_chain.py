"""Restart chains: successors of TIMEOUT jobs, remembered edges, name stems."""

from __future__ import annotations

from datetime import timedelta

import pytest

from probes.models import JobState, SchedulerRecord
from report.chain import dependency_edges, find_successor, name_stem
from tests.report.factories import NOW, record

END = NOW - timedelta(minutes=30)


def _pred(state: JobState = JobState.TIMEOUT) -> SchedulerRecord:
    return record("rl-run", "100", state, end_time=END)


@pytest.mark.parametrize(
    ("candidate", "edges", "expected"),
    [
        # 1. explicit afterany dependency on a pending successor
        (record("rl-run", "101", JobState.PENDING, depends_on=("100",)), {}, "101"),
        (record("other", "101", JobState.RUNNING, depends_on=("100",)), {}, "101"),
        # near-miss: the dependant already finished, so it does not continue the chain
        (record("rl-run-x", "101", JobState.COMPLETED, depends_on=("100",)), {}, None),
        # 2. remembered edge, Dependency cleared once the successor started
        (record("renamed", "101", JobState.RUNNING), {"100": "101"}, "101"),
        # near-miss: remembered successor is itself over
        (record("renamed", "101", JobState.FAILED), {"100": "101"}, None),
        # 3. fallback: same name/user/workdir, submitted before the predecessor ended
        (record("rl-run", "101", JobState.PENDING, submit_time=END - timedelta(hours=1)), {},
         "101"),
        (record("rl-run", "101", JobState.PENDING, submit_time=END + timedelta(minutes=4)), {},
         "101"),
        # near-misses of the fallback
        (record("rl-run", "101", JobState.PENDING, submit_time=END + timedelta(hours=1)), {}, None),
        (record("rl-run", "101", JobState.PENDING, user="bob",
                submit_time=END - timedelta(hours=1)), {}, None),
        (record("rl-run", "101", JobState.PENDING, workdir="/other",
                submit_time=END - timedelta(hours=1)), {}, None),
        (record("rl-run-2", "101", JobState.PENDING, submit_time=END - timedelta(hours=1)), {},
         None),
    ],
)
def test_find_successor(
    candidate: SchedulerRecord, edges: dict[str, str], expected: str | None
) -> None:
    """A TIMEOUT job's successor is found by dependency, memory, then name/user/workdir match."""
    pred = _pred()
    assert find_successor(pred, [pred, candidate], edges) == expected


def test_only_timeout_jobs_have_successors() -> None:
    """A FAILED job is never a chain restart, even with a dependant queued."""
    failed = _pred(JobState.FAILED)
    nxt = record("rl-run", "101", JobState.PENDING, depends_on=("100",))
    assert find_successor(failed, [failed, nxt], {}) is None


def test_earliest_dependant_wins() -> None:
    """With two jobs waiting on the predecessor, the earlier-submitted one is the next link."""
    pred = _pred()
    late = record("x", "103", JobState.PENDING, depends_on=("100",), submit_time=END)
    early = record("x", "102", JobState.PENDING, depends_on=("100",),
                   submit_time=END - timedelta(hours=1))
    assert find_successor(pred, [pred, late, early], {}) == "102"


def test_dependency_edges() -> None:
    """Edges map each predecessor to its earliest-submitted dependant."""
    a = record("x", "101", JobState.PENDING, depends_on=("100",), submit_time=END)
    b = record("x", "102", JobState.PENDING, depends_on=("101", "100"),
               submit_time=END + timedelta(minutes=1))
    assert dependency_edges([b, a]) == {"100": "101", "101": "102"}
    assert dependency_edges([record()]) == {}


@pytest.mark.parametrize(
    ("name", "stem"),
    [
        ("rl-qwen-7b", "rl-qwen-7b"),
        ("rl-qwen-7b-r2", "rl-qwen-7b"),
        ("rl-qwen-7b_restart3", "rl-qwen-7b"),
        ("SFT-Llama-resume", "sft-llama"),
        ("datagen-swe-3", "datagen-swe"),
        ("rl-qwen-v2", "rl-qwen-v2"),  # a new version is a new run, not a retry
        ("7", "7"),
    ],
)
def test_name_stem(name: str, stem: str) -> None:
    """Attempt suffixes are stripped; version and size tokens stay."""
    assert name_stem(name) == stem
