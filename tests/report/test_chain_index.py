"""``ChainIndex``: judging a sweep indexes each cluster once; the answer is the one a scan of
every record gives (the pre-index algorithm, kept here as the oracle, with the restart that
already ran), on random clusters."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from probes.models import JobState, SchedulerRecord
from report import chain
from report.chain import (
    STOPPED_CHAIN,
    ChainIndex,
    ChainLink,
    chain_link,
    dependencies,
    submit_order,
)
from tests.report.factories import NOW, record

_STATES = [JobState.TIMEOUT, JobState.PENDING, JobState.RUNNING, JobState.COMPLETED,
           JobState.FAILED]
_KINDS = ["afterany", "afterok", "aftercorr", "afternotok"]


def _scan_every_record(record: SchedulerRecord, records: Sequence[SchedulerRecord],
                       known_edges: Mapping[str, str]) -> ChainLink:
    """The chain rule as it read before the index: every record scanned for every job."""
    if record.state is not JobState.TIMEOUT:
        return ChainLink()
    live = [r for r in records if r.state in chain._LIVE and r.job_id != record.job_id]
    # Another user's job queued behind it is no restart of it (chain.same_owner).
    waiting = sorted(((r, d) for r in live for d in dependencies(r) if d.job_id == record.job_id
                      and chain.same_owner(record, r)),
                     key=lambda pair: submit_order(pair[0]))
    restarts = [r for r, d in waiting
                if d.kind in chain._AFTER_TIMEOUT and not chain._never_starts(r)]
    if restarts:
        return ChainLink(successor=restarts[0].job_id)
    remembered = known_edges.get(record.job_id)
    if remembered is not None and any(r.job_id == remembered and not chain._never_starts(r)
                                      and chain.same_owner(record, r) for r in live):
        return ChainLink(successor=remembered)
    # ... or a restart that already ran: started once the predecessor had ended (a job
    # whose start is its end and that held no node never ran: cancelled while pending)
    ran = [r for r in records if r.state not in chain._LIVE and r.job_id != record.job_id
           and r.start_time is not None
           and ((r.nodes and r.nodes != "None assigned") or r.end_time is None
                or r.start_time < r.end_time)
           and chain._ran_after(record, r)]
    for r in ran:
        if r.job_id == remembered and chain.same_owner(record, r):
            return ChainLink(successor=r.job_id, ended=r.state.value)
    named = {r.job_id for r, _ in waiting}
    # The evidence a job of another run's name needs (``_held_for``) asks the index, and
    # the run's own name goes first (``fallback_order``): the rule as it reads now.
    index = ChainIndex(records)
    fallback = sorted((r for r in (*live, *ran) if r.job_id not in named
                       and not chain._never_starts(r)
                       and chain._fallback_match(record, r, index)),
                      key=lambda r: (chain.fallback_order(record, r)[0], submit_order(r)))
    if fallback:
        first = fallback[0]
        return ChainLink(successor=first.job_id,
                         ended=None if first.state in chain._LIVE else first.state.value)
    if waiting:
        return chain._blocked(*waiting[0])
    return ChainLink()


@st.composite
def clusters(draw: st.DrawFn) -> list[SchedulerRecord]:
    count = draw(st.integers(1, 14))
    out = []
    for n in range(count):
        targets = draw(st.lists(st.integers(0, count - 1), max_size=2))
        kind = draw(st.sampled_from(_KINDS))
        dependency = ",".join(f"{kind}:{100 + t}" for t in targets) or None
        out.append(record(
            draw(st.sampled_from(["rl-run", "rl-run-r2", "rl-other", "sft"])), str(100 + n),
            draw(st.sampled_from(_STATES)),
            user=draw(st.sampled_from(["alice", "bob"])),
            workdir=draw(st.sampled_from(["/w", "/v", ""])),
            dependency=dependency,
            reason=draw(st.sampled_from([None, chain.NEVER_SATISFIED])),
            submit_time=NOW - timedelta(minutes=draw(st.integers(0, 300))),
            start_time=NOW - timedelta(minutes=draw(st.integers(0, 250))),
            end_time=NOW - timedelta(minutes=draw(st.integers(0, 200))),
        ))
    return out


@settings(max_examples=300, deadline=None)
@given(clusters(), st.dictionaries(st.sampled_from([str(100 + n) for n in range(14)]),
                                   st.sampled_from([str(100 + n) for n in range(14)]),
                                   max_size=3))
def test_indexed_chain_link_equals_the_whole_scan(records: list[SchedulerRecord],
                                                  edges: dict[str, str]) -> None:
    index = ChainIndex(records)
    for r in records:
        assert chain_link(r, records, edges, index=index) == _stopped(
            _scan_every_record(r, records, edges))


def _stopped(link: ChainLink) -> ChainLink:
    """A restart that ran and failed stops the chain (``chain_link``, whatever the scan)."""
    if link.ended in STOPPED_CHAIN:
        return ChainLink(stopped=link.successor, ended=link.ended)
    return link


def test_attempt_count_excludes_the_job_itself() -> None:
    records = [record("rl-run", "1"), record("rl-run", "2", JobState.FAILED),
               record("rl-run", "3", user="bob"), record("sft", "4")]
    index = ChainIndex(records)
    # one submit time: the lower id is the earlier (a restart queued in the launch's second)
    assert [index.earlier_attempts(r) for r in records] == [0, 1, 0, 0]
