"""A sweep's fixed command set: squeue (inside the collector or alone), sacct, scontrol.

Policy (the SLURM probe's, ``probes.slurm.probe``): squeue and sacct run concurrently over the
runner's one connection; with ``--json`` and a one-trip request squeue runs inside the
collector, which collects the users' started jobs in the same run. scontrol runs on the plain
path or for a log path squeue's fields cannot give. A long-lived probe holds the document of
its last sweep (:class:`HeldQueue`) and a later sweep of an unchanged queue reuses it; the
signature listing that allows this is backed off while it spares nothing
(:class:`ListingBackoff`). ``squeue --json`` and ``sacct --json`` found unsupported are
remembered (``probes.slurm.commands.Capability``). :class:`SnapshotCommands` is the part of
:class:`probes.slurm.probe.SlurmProbe` that runs these commands.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from probes.config import SlurmCluster
from probes.models import ACTIVE_STATES, SchedulerRecord
from probes.remote.script import build_collector_script
from probes.remote.stdio_pattern import SQUEUE_JOB_KEYS
from probes.slurm.answer import AnswerReader, stream_answer
from probes.slurm.commands import (
    NO_JSON,
    NO_SACCT,
    Capability,
    check_document,
    first_probe_error,
    json_document,
    mentions,
    queue_answer,
)
from probes.slurm.early import EarlyFolds
from probes.slurm.parse import (
    expand_stdout,
    needs_scontrol,
    parse_squeue_json,
    records_from_squeue,
    slurm_release,
    stdout_final,
)
from probes.slurm.plain import new_nonce, parse_squeue_plain, plain_format
from probes.slurm.request import collector_request
from probes.slurm.scontrol import known_from, merge_scontrol, parse_scontrol_all
from probes.slurm.transport import CommandResult, Runner


@dataclass(frozen=True)
class Snapshot:
    """What the scheduler commands printed in one sweep, verbatim, and the merged records."""

    squeue: str
    """squeue's text; empty when its ``--json`` document came parsed from the collector."""
    squeue_format: str
    """``json`` or ``plain``."""
    scontrol: str
    sacct: str | None
    records: tuple[SchedulerRecord, ...]
    """The jobs asked for (all, or the users'), merged, before the recency filter."""
    slurm_version: str | None
    collected: Mapping[str, Any] | None = None
    """The collector's answer per job id when squeue ran inside it (one round trip)."""
    document: Mapping[str, Any] | None = None
    """squeue's ``--json`` document, parsed (its job objects trimmed unless ``verbatim``)."""


@dataclass(frozen=True)
class HeldQueue:
    """A long-lived probe's squeue document of its last sweep that printed one, and the
    digest of the signature listing run just before it (``probes.remote.collector``): a
    later collector whose listing has that digest answers ``same`` and prints no document.
    The document answers for these users' jobs, kept from ``since`` on."""

    digest: str
    users: tuple[str, ...]
    since: float
    document: Mapping[str, Any]


class ListingBackoff:
    """Whether a bot's sweep runs the signature listing first (``squeue.reuse``): always,
    until that fails to spare the document twice in a row; then only every 2nd, 4th, then
    8th sweep, until one spares it again.

    A listing-first sweep that prints the document all the same (the queue changed since
    the held one, or the listing gave no digest to hold) paid for the listing's own run
    before ``squeue --json`` started: tens of milliseconds against the hundreds the document
    costs. On a queue that changes between every two sweeps (a busy lab swept every 30
    minutes) that would be paid every sweep; backing off pays it on two sweeps in nine at
    most. Sweeps in between take the path without the listing first, which leaves the held
    document as it was (still valid for its own digest, but older than the documents they
    printed): the first listing-first sweep after them misses whenever the queue changed
    during them, though it may be quiet now. That miss holds the document it prints and does
    not back off further: the next sweep runs the listing first again, and only a miss
    there (the queue still changing) backs off. So a queue that goes quiet is found again
    within ten sweeps, wherever its last change fell (with every miss counted, a change
    during a skipped stretch cost the next stretch too: 16 sweeps)."""

    CAP = 8

    def __init__(self) -> None:
        self.misses = 0
        """Listing-first sweeps in a row that printed the document all the same."""
        self.skip = 0
        """Sweeps still to run without the listing first."""
        self.stale = False
        """A sweep without the listing first ran since the last listing-first one: the held
        document may be older than the queue's last change, quiet or not."""

    def wanted(self) -> bool:
        """This sweep runs the listing first (counts a skipped sweep)."""
        if self.skip > 0:
            self.skip -= 1
            self.stale = True
            return False
        return True

    def spared(self) -> None:
        self.misses = self.skip = 0
        self.stale = False

    def printed(self) -> None:
        if self.stale:  # against a document older than the skipped sweeps': try once more
            self.stale = False
            self.skip = 0
            return
        self.misses += 1
        self.skip = min(2 ** (self.misses - 1), self.CAP) - 1


def restore_held(head: dict[str, Any], held: HeldQueue | None) -> None:
    """A collector head saying the queue is ``same`` as the held document's (its digest):
    that document is put in the head as if squeue had printed it (``squeue.json``). A
    ``same`` for any other digest is left without one (the probe then reads the queue anew)."""
    out = head.get("squeue")
    if isinstance(out, dict) and "same" in out and held is not None \
            and out["same"] == held.digest:
        out["json"] = with_estimates(held.document, out.get("estimates"))


def with_estimates(document: Mapping[str, Any], estimates: Any) -> Mapping[str, Any]:
    """The held document with each pending job's estimated start time as the collector's
    listing gives it now (``listing.estimated``: left out of the digest, as the backfill
    scheduler rewrites it every few seconds); the held one is not changed. The time is
    written in the shape the document gives it (an int up to 22.05, a
    ``{set, infinite, number}`` object from 23.02). A pending job's end time is left as held:
    nothing reads it (:func:`probes.slurm.parse.parse_squeue_json` gives a pending job no end
    time and no elapsed time)."""
    if not isinstance(estimates, dict) or not estimates:
        return document
    jobs = []
    for job in document.get("jobs") or ():
        key = str(job.get("job_id")) if isinstance(job, dict) else None
        if key is None or key not in estimates:
            jobs.append(job)
            continue
        value = estimates[key]
        number = value if isinstance(value, int) and not isinstance(value, bool) \
            and value > 0 else None
        jobs.append({**job, "start_time": (
            {"set": number is not None, "infinite": False, "number": number or 0}
            if isinstance(job.get("start_time"), dict) else number or 0)})
    return {**document, "jobs": jobs}


class SnapshotCommands:
    """The fixed command set of :class:`probes.slurm.probe.SlurmProbe` (its base: the probe
    sets these attributes)."""

    _cluster: SlurmCluster
    _now: datetime
    _json: Capability
    _sacct_cap: Capability
    _holds_queue: bool
    _backoff: ListingBackoff
    _held: HeldQueue | None

    async def snapshot(
        self, runner: Runner, now: datetime, users: Collection[str] | None = None,
        *, with_scontrol: bool = False, one_trip: bool = False,
        offsets: Mapping[str, int] | None = None, verbatim: bool = False,
        cursors: Mapping[str, Any] | None = None, early: EarlyFolds | None = None,
    ) -> Snapshot:
        """Run squeue and sacct concurrently over the runner's one connection.

        With ``one_trip`` and ``users`` (and ``--json``) squeue runs inside the collector,
        which collects those users' started jobs too (``Snapshot.collected``). scontrol runs
        on the plain path, for a path squeue's fields cannot give, or ``with_scontrol``
        (``record``, which also asks for the job objects ``verbatim``). With ``early``, each
        job the one-trip answer brings is folded as it arrives (``probes.slurm.early``)."""
        self._now = now
        nonce = new_nonce()
        queue = None
        if one_trip and users is not None:
            queue = self._queue_request(now, users, offsets, verbatim)
            if cursors is not None:  # resume running jobs' logs (probes.remote.logread)
                queue["cursors"] = dict(cursors)
        try:
            async with asyncio.TaskGroup() as group:
                squeue = group.create_task(self._squeue(runner, queue, nonce, early))
                sacct = group.create_task(self._sacct(runner))
        except BaseExceptionGroup as failed:
            # Re-raise the member itself: it already chains the library's original error.
            raise first_probe_error(failed)  # noqa: B904
        (squeue_text, document, collected), sacct_text = squeue.result(), sacct.result()
        records = self._parsed(squeue_text, document, sacct_text, now=now, users=users,
                               nonce=nonce, early=early)
        records, scontrol_text = await self._with_scontrol(
            runner, records, now=now, plain=document is None, collected=collected,
            with_scontrol=with_scontrol, early=early)
        return Snapshot(squeue_text, "json" if document is not None else "plain", scontrol_text,
                        sacct_text, tuple(records.values()),
                        slurm_release(document) if document is not None else None, collected,
                        document)

    def _parsed(self, squeue_text: str, document: dict[str, Any] | None,
                sacct_text: str | None, *,
                now: datetime, users: Collection[str] | None, nonce: str,
                early: EarlyFolds | None) -> dict[str, SchedulerRecord]:
        """The users' records by job id: squeue's (its JSON ``document``, else its plain
        text), then sacct's for the jobs squeue no longer lists."""
        name = self._cluster.name
        if document is not None and early is not None and early.parsed is not None \
                and early.parsed[0] is document:  # parsed in the answer's worker already
            parsed = early.parsed[1]
        elif document is not None:
            parsed = records_from_squeue(document, cluster=name, now=now, users=users,
                                         since=self._cutoff(now))
        else:
            parsed = parse_squeue_plain(squeue_text, cluster=name, now=now, nonce=nonce)
        records = {r.job_id: r for r in parsed if users is None or r.user in users}
        if sacct_text:
            for r in parse_squeue_json(sacct_text, cluster=name, now=now, users=users):
                records.setdefault(r.job_id, r)
        return records

    async def _with_scontrol(
        self, runner: Runner, records: dict[str, SchedulerRecord], *, now: datetime,
        plain: bool, collected: Mapping[str, Any] | None, with_scontrol: bool,
        early: EarlyFolds | None,
    ) -> tuple[dict[str, SchedulerRecord], str]:
        """``records`` with stdout paths expanded and scontrol's fields where needed (a
        ``plain`` squeue listing, a path squeue's fields cannot give, or ``with_scontrol``);
        and scontrol's text (empty if it was not run)."""
        scontrol_text = ""
        if plain and records:
            # squeue -o has no StdOut: scontrol's (expanded) paths, one command for all jobs.
            scontrol_text = await self._scontrol(runner)
            records = self._merged(records, scontrol_text)
        expand = early.expanded if early is not None else expand_stdout
        expanded = {k: expand(r) for k, r in records.items()}
        # A path expanded here is slurmstepd's: scontrol's StdOut (wrong for %%, %3a, %J...
        # in 22.05) never replaces it. Not on the plain path: that one is scontrol's already.
        final = frozenset() if plain else frozenset(
            k for k, r in records.items() if stdout_final(r, expanded[k]))
        raw = [r for k, r in expanded.items() if needs_scontrol(r, None if plain else k in final)]
        if collected is not None:
            # Only the jobs this sweep reports and the collector could not read count: a
            # %N job that ended hours ago must not cost every sweep a round trip.
            raw = [r for r in raw if r.job_id not in collected and self._recent(r, now)]
        if not scontrol_text and (with_scontrol or raw):
            scontrol_text = await self._scontrol(runner)
            expanded = self._merged(expanded, scontrol_text, final)
        return expanded, scontrol_text

    def _queue_request(self, now: datetime, users: Collection[str],
                       offsets: Mapping[str, int] | None, verbatim: bool) -> dict[str, Any]:
        """The one-trip collector request: squeue runs inside it, the roots filled there."""
        wanted: dict[str, Any] = {} if verbatim else {"keys": list(SQUEUE_JOB_KEYS)}
        since = self._cutoff(now).timestamp()
        if self._holds_queue and not verbatim and self._backoff.wanted():
            held = self._held
            fits = (held is not None and held.users == tuple(sorted(users))
                    and held.since <= since)
            wanted["reuse"] = held.digest if fits and held is not None else ""
            wanted["delim"] = f"|{new_nonce()}|"  # the signature listing's (collector)
        return {**collector_request([], self._cluster), "stream": True,
                "squeue": {"argv": ["squeue", "--json"], "users": sorted(users),
                           "since": since, "listing": True, **wanted},
                "roots": {"checkpoint": list(self._cluster.checkpoint_roots),
                          "trial": list(self._cluster.trial_roots)},
                "offsets": dict(offsets or {})}

    @staticmethod
    def _merged(records: dict[str, SchedulerRecord], scontrol_text: str,
                final: frozenset[str] = frozenset(),
                ) -> dict[str, SchedulerRecord]:
        """Records with scontrol's fields, read with what squeue said (no record forgery);
        the ``final`` ones keep their log path."""
        fields = parse_scontrol_all(scontrol_text, wanted=records.keys(),
                                    known={k: known_from(r) for k, r in records.items()})
        return {k: merge_scontrol(r, fields.get(k), keep_stdout=k in final)
                for k, r in records.items()}

    async def _squeue(
        self, runner: Runner, queue: Mapping[str, Any] | None, nonce: str,
        early: EarlyFolds | None = None,
    ) -> tuple[str, dict[str, Any] | None, Mapping[str, Any] | None]:
        """``(text, document, collected)``: ``document`` is the parsed ``--json`` output
        (``None`` on the plain format; ``text`` is empty when it came parsed from the
        collector); ``collected`` only when squeue ran in the collector."""
        if self._json.worth_trying(self._now):
            res, document, collected = await self._squeue_json(runner, queue, early)
            if document is not None:
                self._json.found()
                return "", check_document(document, res.stderr, runner.target), collected
            if res.exit_status == 0 and res.stdout.lstrip().startswith("{"):
                self._json.found()
                document = json_document(res.stdout)
                return res.stdout, check_document(document, res.stderr, runner.target), collected
            if res.exit_status != 0 and not mentions(res.stderr, NO_JSON):
                raise res.failure(runner.target)
            self._json.missing(self._now)
        plain = ["env", "SLURM_TIME_FORMAT=%s", "squeue", "-h", "-t", "all", "-o",
                 plain_format(nonce)]
        res = await runner.run(plain)
        return res.stdout, None, None

    async def _squeue_json(
        self, runner: Runner, queue: Mapping[str, Any] | None, early: EarlyFolds | None = None,
    ) -> tuple[CommandResult, dict[str, Any] | None, Mapping[str, Any] | None]:
        """``(result, document, collected)`` of ``squeue --json``: from inside the collector run
        when ``queue`` is given, where a JSON answer comes already parsed (``document``).

        A collector run that fails (no python3, killed) before its answer's head is not a
        squeue failure: squeue then runs on its own and the files are collected by a separate
        run (the two-step path). One that fails after it keeps what it answered: the jobs it
        did not reach are collected by that separate run (``complete_files``).
        """
        argv = ("squeue", "--json")
        if queue is not None:
            held = self._held

            def on_head(head: dict[str, Any]) -> None:
                restore_held(head, held)
                if early is not None:
                    early.head(head)

            reader = AnswerReader(on_head=on_head,
                                  on_job=early.job if early is not None else None,
                                  on_early=early.before_head if early is not None else None)
            if early is not None:  # a sweep past its deadline reads the head as it arrived
                early.restore = lambda head: restore_held(head, held)
            res = await stream_answer(runner, build_collector_script(queue), reader,
                                      on_arrival=early.arrived if early is not None else None)
            answer = queue_answer(reader)
            if answer is not None and "same" in answer["squeue"] \
                    and "json" not in answer["squeue"]:
                answer = None  # "unchanged" from a document not held: the two-step path
            if answer is not None:
                out = answer["squeue"]
                document = out.get("json")
                self._hold(queue["squeue"], out)
                res = CommandResult(argv, int(out["exit"]), str(out.get("stdout") or ""),
                                    str(out["stderr"]))
                return res, document if isinstance(document, dict) else None, answer["jobs"]
        return await runner.run(list(argv), check=False), None, None

    def _hold(self, queue: Mapping[str, Any], out: Mapping[str, Any]) -> None:
        """Keep a document printed with its listing's digest (a long-lived probe only), and
        tell the backoff whether a listing-first sweep spared the document."""
        document, digest = out.get("json"), out.get("digest")
        if "reuse" in queue:
            if "same" in out:
                self._backoff.spared()
            elif queue["reuse"] or not (isinstance(digest, str) and digest):
                self._backoff.printed()  # a held digest missed, or none to hold
        if self._holds_queue and "reuse" in queue and isinstance(digest, str) and digest \
                and isinstance(document, dict) and not document.get("errors") \
                and "same" not in out:
            self._held = HeldQueue(digest, tuple(queue["users"]), float(queue["since"]),
                                   document)

    async def _scontrol(self, runner: Runner) -> str:
        # Optional enrichment: a failure leaves squeue's fields as they are.
        res = await runner.run(["scontrol", "show", "job", "-o"], check=False)
        return res.stdout if res.exit_status == 0 else ""

    async def _sacct(self, runner: Runner) -> str | None:
        if not self._sacct_cap.worth_trying(self._now):
            return None
        seconds = max(60, int(self._cluster.recent_hours * 3600))
        users = ",".join(self._users(runner))
        res = await runner.run(
            ["sacct", "--json", "-X", "-S", f"now-{seconds}", "-u", users], check=False,
        )
        if res.exit_status == 0 and res.stdout.lstrip().startswith("{"):
            self._sacct_cap.found()
            return res.stdout
        if res.exit_status == 127 or mentions(res.stderr, NO_SACCT):
            self._sacct_cap.missing(self._now)  # tried again after Capability.recheck
        return None

    def _cutoff(self, now: datetime) -> datetime:
        return now - timedelta(hours=self._cluster.recent_hours)

    def _recent(self, record: SchedulerRecord, now: datetime) -> bool:
        return (record.state in ACTIVE_STATES or record.end_time is None
                or record.end_time >= self._cutoff(now))

    def _users(self, runner: Runner) -> tuple[str, ...]:
        return self._cluster.users or (runner.login_user,)
