"""``Attempts``: judging a sweep indexes its jobs once for earlier attempts and relaunches; the
answers are the ones the scan of every job gave (the pre-index algorithm, kept here as the
oracle), on random sweeps of few stems, users, clusters, times and states."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta, timezone

from hypothesis import example, given, settings
from hypothesis import strategies as st

from probes.models import TERMINAL_STATES, JobFacts, JobState, RunFingerprint, SchedulerRecord
from report.chain import name_stem
from report.fingerprint import (
    _PARTS,
    Attempts,
    fingerprint_parts,
    relaunch_change,
    run_attempts,
)
from tests.report.factories import NOW, facts, record, summary

_NAMES = ["rl-grpo", "rl-grpo-r2", "rl-grpo-attempt3", "RL-grpo", "rl-ppo", "rl-ppo-r1", "x"]
_STATES = [JobState.RUNNING, JobState.PENDING, JobState.COMPLETED, JobState.FAILED,
           JobState.TIMEOUT]


def _scan_before(record: SchedulerRecord, other: SchedulerRecord) -> bool:
    def key(r: SchedulerRecord) -> tuple[datetime, int]:
        at = r.submit_time or r.start_time or datetime.max
        naive = at.replace(tzinfo=None) - (at.utcoffset() or timedelta())
        return naive, int(r.job_id) if r.job_id.isdigit() else 0
    return key(other) < key(record)


def _scan_attempts(job: JobFacts, sweep: Sequence[JobFacts]) -> list[JobFacts]:
    """Earlier attempts as they were found before the index: every job scanned."""
    rec = job.record
    stem = name_stem(rec.name)
    found = [o for o in sweep
             if o.record.job_id != rec.job_id and o.record.cluster == rec.cluster
             and o.record.user == rec.user
             and (name_stem(o.record.name) == stem or o.record.job_id in rec.depends_on)
             and _scan_before(rec, o.record)]
    return sorted(found, key=lambda o: (o.record.submit_time is None, _naive(o.record.submit_time)
                                        or datetime.min, o.record.job_id))


def _naive(at: datetime | None) -> datetime | None:
    """The scan compared submit times as they were, raising on a sweep mixing naive and aware
    ones; the index reads a naive one as UTC, as the order of attempts always did."""
    return None if at is None else at.replace(tzinfo=None) - (at.utcoffset() or timedelta())


def _scan_relaunch(job: JobFacts, sweep: Sequence[JobFacts]) -> str | None:
    mine = fingerprint_parts(job)
    if not mine:
        return None
    ended = [o for o in _scan_attempts(job, sweep) if o.record.state in TERMINAL_STATES]
    for other in reversed(ended):
        theirs = fingerprint_parts(other)
        if not theirs:
            continue
        order = [*_PARTS, *sorted(set(mine) - set(_PARTS))]
        changed = [p for p in order if p in mine and p in theirs and mine[p] != theirs[p]]
        if not changed:
            return None
        shown = ", ".join(f"{p} {theirs[p]}→{mine[p]}" if p != "config" else "config"
                          for p in changed)
        return f"relaunch of {other.record.job_id} with new {shown}"
    return None


@st.composite
def sweeps(draw: st.DrawFn) -> list[JobFacts]:
    count = draw(st.integers(1, 10))
    ids = draw(st.lists(st.sampled_from([str(n) for n in range(100, 120)] + ["a7", "b"]),
                        min_size=count, max_size=count))
    jobs = []
    for job_id in ids:
        hours = draw(st.one_of(st.none(), st.integers(0, 6)))
        aware = draw(st.booleans())
        when = None if hours is None else NOW - timedelta(hours=hours)
        if when is not None and not aware:
            when = when.replace(tzinfo=None)
        elif when is not None and draw(st.booleans()):
            when = when.astimezone(timezone(timedelta(hours=2)))
        start = draw(st.one_of(st.none(), st.just(NOW - timedelta(hours=1))))
        rec = record(draw(st.sampled_from(_NAMES)), job_id, draw(st.sampled_from(_STATES)),
                     user=draw(st.sampled_from(["alice", "bob", None])),
                     cluster=draw(st.sampled_from(["alpha", "beta"])),
                     submit_time=when, start_time=start,
                     depends_on=tuple(draw(st.lists(st.sampled_from(ids), max_size=2))))
        printed = draw(st.one_of(st.none(), st.builds(
            RunFingerprint, model=st.sampled_from([None, "qwen-7b", "llama-8b"]),
            image=st.sampled_from([None, "img:1", "img:2"]), nodes=st.sampled_from([None, 2, 4]))))
        jobs.append(facts(rec) if printed is None
                    else JobFacts(record=rec, summary=summary(fingerprint=printed)))
    return jobs


_SAME_IDS = [facts(record(name, job_id, submit_time=None, start_time=None, depends_on=deps))
             for name, job_id, deps in [("rl-grpo", "100", ()), ("rl-grpo", "100", ()),
                                        ("rl-ppo", "100", ()), ("rl-grpo", "101", ("100",)),
                                        ("rl-grpo", "100", ())]]
"""Attempts whose listing keys tie (one id, no times), one of them found through
``depends_on`` only: listed in sweep order, as the scan's stable sort listed them."""


@settings(max_examples=150, deadline=None)
@example(_SAME_IDS)
@given(sweeps())
def test_the_index_answers_as_the_scan_of_every_job(sweep: list[JobFacts]) -> None:
    attempts = Attempts(sweep)
    for job in sweep:
        expected = _scan_attempts(job, sweep)
        assert [id(o) for o in run_attempts(job, attempts)] == [id(o) for o in expected]
        assert attempts.any_earlier(job) is bool(expected)
        assert relaunch_change(job, attempts) == _scan_relaunch(job, sweep)
        assert relaunch_change(job, sweep) == _scan_relaunch(job, sweep)  # unindexed callers
    outsider = facts(record("rl-grpo-r9", "999", submit_time=NOW))  # not in the index
    assert attempts.any_earlier(outsider) is bool(_scan_attempts(outsider, sweep))
    assert relaunch_change(outsider, attempts) == _scan_relaunch(outsider, sweep)


def test_a_relaunch_with_a_new_model_is_named() -> None:
    old = JobFacts(record=record("rl-grpo", "100", JobState.FAILED,
                                 submit_time=NOW - timedelta(hours=5)),
                   summary=summary(fingerprint=RunFingerprint(model="qwen-7b")))
    new = JobFacts(record=record("rl-grpo-r2", "101"),
                   summary=summary(fingerprint=RunFingerprint(model="llama-8b")))
    attempts = Attempts([old, new])
    assert relaunch_change(new, attempts) == "relaunch of 100 with new model qwen-7b→llama-8b"
    assert attempts.any_earlier(new) and not attempts.any_earlier(old)


def test_a_sweep_mixing_naive_and_aware_submit_times_is_judged() -> None:
    """A naive submit time (read as UTC) beside aware ones: the scan's sort raised TypeError,
    failing the whole sweep's judging."""
    from report.judge import build_report
    from report.settings import ReportSettings
    from tests.report.factories import cluster

    jobs = [facts(record("rl-grpo", "100", JobState.FAILED,
                         submit_time=(NOW - timedelta(hours=5)).replace(tzinfo=None))),
            facts(record("rl-grpo-r2", "101", JobState.FAILED,
                         submit_time=NOW - timedelta(hours=4))),
            facts(record("rl-grpo-r3", "102", submit_time=NOW - timedelta(hours=3)))]
    report, _ = build_report([cluster("alpha", jobs)], settings=ReportSettings(), now=NOW)
    assert [j.job_id for j in report.jobs] == ["100", "101", "102"]
    assert [o.record.job_id for o in run_attempts(jobs[2], jobs)] == ["100", "101"]
