"""Each job's log folded as soon as its line of the collector's answer arrives.

Policy: the sweep's facts must be exactly what folding the whole answer afterwards gives
(``probes.slurm.cursors.fold_jobs``). So a job is folded early, in the answer's worker thread
(``probes.slurm.answer.stream_answer``), with the record the squeue document in the answer's
head gives it (the same parse, arguments and ``expand_stdout`` as the probe's snapshot), and
the early result is used only if, at the end, the sweep's own record for that job is equal
and its entry is the very one folded; any other job (sacct's, scontrol-merged, collected by a
second run, or whose early fold raised) is folded then, as before.

A line that came before the head (a running job the collector's fast listing named, read while
``squeue --json`` ran) has no record yet: it is folded against a stand-in holding only its
id, because a fold reads the record for its id alone (the prior state's key) and hands it
through to ``JobFacts.record``; the sweep's own record then takes the stand-in's place.

"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from datetime import datetime
from typing import Any

from probes.models import JobFacts, JobState, SchedulerRecord
from probes.slurm.assemble import job_facts
from probes.slurm.cursors import LogState, fold_job
from probes.slurm.parse import expand_stdout, records_from_squeue

Fold = Callable[[SchedulerRecord, Mapping[str, Any] | None],
                tuple[JobFacts, LogState | None]]


def folder(prior: Mapping[str, LogState] | None, *, aliases: Mapping[str, str],
           benign_patterns: Sequence[str]) -> Fold:
    """One job's fold as ``fold_jobs`` does it: cold (``job_facts``, no state) without
    ``prior``, else resumed from the job's prior state (``fold_job``)."""
    if prior is None:
        def cold(r: SchedulerRecord, entry: Mapping[str, Any] | None,
                 ) -> tuple[JobFacts, LogState | None]:
            return job_facts(r, entry, aliases=aliases, benign_patterns=benign_patterns), None
        return cold

    def resumed(r: SchedulerRecord, entry: Mapping[str, Any] | None,
                ) -> tuple[JobFacts, LogState | None]:
        return fold_job(r, entry, prior.get(r.job_id), aliases=aliases,
                        benign_patterns=benign_patterns)
    return resumed


class EarlyFolds:
    """The jobs folded so far; fed by an ``AnswerReader``'s callbacks (one thread)."""

    def __init__(self, fold: Fold, *, cluster: str = "", now: datetime | None = None,
                 users: Collection[str] | None = None, since: datetime | None = None,
                 recent: Callable[[SchedulerRecord], bool] | None = None) -> None:
        self._fold = fold
        self._cluster, self._now, self._users, self._since = cluster, now, users, since
        self._recent = recent or (lambda r: True)
        self.records: dict[str, SchedulerRecord] = {}
        """The jobs whose lines are folded on arrival, by id (expanded, selected)."""
        self.parsed: tuple[Any, list[SchedulerRecord]] | None = None
        """``(document, records_from_squeue of it)``: the head's parse, for the snapshot."""
        self._done: dict[str, tuple[SchedulerRecord, Mapping[str, Any], Any]] = {}
        self._stand_ins: dict[str, SchedulerRecord] = {}
        self._expanded: dict[str, tuple[SchedulerRecord, SchedulerRecord]] = {}

    def expect(self, records: Sequence[SchedulerRecord]) -> None:
        """Fold these records' jobs as their lines arrive (a run for known records)."""
        self.records.update({r.job_id: r for r in records})

    def head(self, head: Mapping[str, Any]) -> None:
        """The one-trip answer's head: its squeue document's records, as the snapshot reads
        them (``records_from_squeue``, the users' jobs, expanded, recent)."""
        out = head.get("squeue")
        document = out.get("json") if isinstance(out, dict) else None
        if not isinstance(document, dict) or self._now is None or document.get("errors"):
            return  # nothing to fold against (the probe judges the document itself)
        try:
            parsed = records_from_squeue(document, cluster=self._cluster, now=self._now,
                                         users=self._users, since=self._since)
        except Exception:
            return
        self.parsed = (document, parsed)
        by_id = {r.job_id: r for r in parsed
                 if self._users is None or r.user in self._users}
        self._expanded = {k: (r, expand_stdout(r)) for k, r in by_id.items()}
        self.records.update({k: x for k, (r, x) in self._expanded.items() if self._recent(r)})

    def expanded(self, record: SchedulerRecord) -> SchedulerRecord:
        """``expand_stdout(record)``: the very object folded against when the head's parse
        gave this record (the snapshot's records are then the early folds' own)."""
        got = self._expanded.get(record.job_id)
        return got[1] if got is not None and got[0] is record else expand_stdout(record)

    def job(self, key: str, entry: Mapping[str, Any], raw: bytes | None = None) -> None:
        record = self.records.get(key)
        if record is None or record.state is JobState.PENDING:
            return
        try:
            result = self._fold(record, entry)
        except Exception:
            return
        self._done[key] = (record, entry, result)

    def before_head(self, key: str, entry: Mapping[str, Any], raw: bytes | None = None) -> None:
        """A job line that came before the head (``AnswerReader``'s ``on_early``): no record
        is known yet, so it is folded against a stand-in (:meth:`stand_in`); a fold reads
        the record for nothing but its id (``tests/probes/slurm/test_early_listing.py``
        holds it to that), and :meth:`take` puts the sweep's own record in its place."""
        stand_in = self._stand_ins[key] = self.stand_in(key)
        try:
            result = self._fold(stand_in, entry)
        except Exception:
            return
        self._done[key] = (stand_in, entry, result)

    def stand_in(self, key: str) -> SchedulerRecord:
        """The record an early line is folded against: its id, nothing else known."""
        return SchedulerRecord(cluster=self._cluster, job_id=key, name="",
                               state=JobState.RUNNING)

    def take(self, record: SchedulerRecord, entry: Mapping[str, Any] | None,
             ) -> tuple[JobFacts, LogState | None] | None:
        """The early fold of this record's job, if it was made from this record (or, for a
        line before the head, its stand-in) and this very entry."""
        got = self._done.get(record.job_id)
        if got is None or got[1] is not entry:
            return None
        result: tuple[JobFacts, LogState | None] = got[2]
        if got[0] is record or got[0] == record:
            return result
        if got[0] is self._stand_ins.get(record.job_id):
            facts, state = result
            return facts.model_copy(update={"record": record}), state
        return None

    @property
    def folded(self) -> int:
        """Jobs folded early so far (tests and benchmarks read it)."""
        return len(self._done)


def fold_all(records: Sequence[SchedulerRecord], collected: Mapping[str, Any],
             early: EarlyFolds | None, fold: Fold, *, stateful: bool,
             ) -> tuple[tuple[JobFacts, ...], dict[str, LogState]]:
    """``fold_jobs``' result: every record's facts (early ones where they stand), and the
    states of the jobs that have one when ``stateful``."""
    jobs: list[JobFacts] = []
    states: dict[str, LogState] = {}
    for r in records:
        entry = collected.get(r.job_id)
        got = early.take(r, entry) if early is not None and entry is not None else None
        facts, state = got if got is not None else fold(r, entry)
        jobs.append(facts)
        if stateful and state is not None:
            states[r.job_id] = state
    return tuple(jobs), states
