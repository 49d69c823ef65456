"""The SLURM backend: one sweep of a cluster over SSH (or locally) in a fixed number of commands.

Policy:

* A warm sweep on a cluster with ``squeue --json`` is ONE command: the collector (``python3 -``,
  script on stdin) runs ``squeue --json`` on the login node (an argv, no shell), keeps the
  users' job objects (cut down to the keys the records read, except for ``record``), expands
  each started job's log path with ``probes.remote.stdio_pattern`` and answers with the
  document and every such job's files. ``sacct --json`` runs beside it where accounting
  exists. A log path squeue's fields cannot give (``%N``, no workdir) costs ``scontrol show
  job -o`` and a second collector run for those jobs (as do jobs known only to sacct).
  Without ``--json`` it is squeue -o, scontrol, then the collector. ``round_trips`` counts.
* An unsupported ``--json`` or a cluster without accounting is remembered per probe instance
  for an hour (``probes.slurm.commands.Capability``), then probed again: later sweeps do not
  pay for the failed command every time, and a cluster that gains the feature gets it used.
* The plain format is nonce-delimited (``probes.slurm.plain``) and its StdOut/WorkDir come
  from one ``scontrol show job -o``, read with what squeue said (``probes.slurm.scontrol``):
  no job's name or paths can start another record or add a key.
* Jobs are those of the configured ``users`` (default: the login user) that are active or
  ended within ``recent_hours`` (decided here, after parsing). Pending jobs have no log yet
  and are not collected.
* ``collect`` never raises for a cluster problem: it returns ``status="unreachable"`` with the
  reason (naming ``host:port``). A failed collector run is not an unreachable cluster: after a
  failed one-trip run squeue runs on its own and the collector is tried twice more; if that
  fails too, every job's log is reported ``failed`` (-> fetch-failed, never "dead").
* Every command is an argv; job ids are validated before any command is built.
* The bot's warm sweeps (``collect_since``) resume each running job's log from its stored
  cursor and fold only the new bytes (``probes.slurm.cursors``); ``collect`` reads cold.
* The collector's answer streams (``probes.slurm.answer``): each job's log is folded as its
  line arrives, in one worker thread (``probes.slurm.early``), while the collector reads the
  next and the rest is in transit; the facts are exactly those of folding the whole answer
  afterwards. A run killed midway keeps the jobs it answered; the others are collected again.

The command set itself (squeue, sacct, scontrol, the held queue) is ``probes.slurm.snapshot``.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from probes.config import DEFAULT_CHECKPOINT_ROOTS, SlurmCluster
from probes.errors import CommandError, InvalidJobIdError, ProbeError
from probes.ids import SLURM_ID, validate_job_id
from probes.models import ClusterFacts, JobFacts, JobState, SchedulerRecord
from probes.slurm import onejob
from probes.slurm.commands import Capability, run_collector
from probes.slurm.early import (
    EarlyFolds,
    Fold,
    FoldStack,
    fold_all,
    fold_stack_loading,
    folder,
    off_loop,
)
from probes.slurm.partial import Folded, facts_in_part
from probes.slurm.request import collector_request, request_cursors
from probes.slurm.shared_roots import own_checkpoints
from probes.slurm.snapshot import HeldQueue, ListingBackoff, Snapshot, SnapshotCommands
from probes.slurm.transport import KeptConnection, Runner, RunnerFactory, make_runner
from probes.slurm.undecodable import shown_facts

if TYPE_CHECKING:
    from probes.slurm.cursors import LogState


@dataclass(frozen=True)
class Capture:
    """One verbatim read of a cluster for a recording: the selected jobs and their files."""

    now: datetime
    users: list[str]
    snapshot: Snapshot
    keep: set[str]
    collected: Mapping[str, Any]




class SlurmProbe(SnapshotCommands):
    """A SLURM cluster reached over SSH (or locally); see the module docstring."""

    def __init__(
        self,
        cluster: SlurmCluster,
        *,
        aliases: Mapping[str, str] | None = None,
        clock: Callable[[], datetime] | None = None,
        runner_factory: RunnerFactory | None = None,
        keep_connection: bool = False,
        **_: Any,
    ) -> None:
        self._cluster = cluster
        self._kept = KeptConnection() if keep_connection and not cluster.local else None
        """With ``keep_connection`` (the bot), the connection its sweeps and one-job reads
        (``/job``) borrow and leave open (``probes.slurm.transport``); a cancel and a
        capture connect anew."""
        self._holds_queue = keep_connection
        self._backoff = ListingBackoff()
        self._held: HeldQueue | None = None
        """With ``keep_connection``, the document of the last sweep (:class:`HeldQueue`): a
        sweep of an unchanged queue reuses it instead of printing ``squeue --json`` again."""
        self._aliases = dict(aliases or {})
        self._clock = clock or (lambda: datetime.now(UTC))
        self._runner_factory = runner_factory or make_runner
        self._json = Capability()
        self._sacct_cap = Capability()
        self._now = self._clock()

    @property
    def cluster(self) -> SlurmCluster:
        return self._cluster

    @property
    def json_supported(self) -> bool:
        """``squeue --json`` believed to work (re-probed an hour after it failed)."""
        return self._json.believed

    @property
    def sacct_available(self) -> bool:
        """``sacct --json`` believed to work (re-probed an hour after it failed)."""
        return self._sacct_cap.believed

    def _runner(self) -> Runner:
        """A runner for a read: borrowing the kept connection when there is one."""
        if self._kept is None:
            return self._runner_factory(self._cluster)
        return self._runner_factory(self._cluster, kept=self._kept)

    async def collect(self, *, offsets: Mapping[str, int] | None = None) -> ClusterFacts:
        """One sweep; never raises for an unreachable or failing cluster."""
        return (await self._collect(offsets, None))[0]

    async def collect_since(self, prior: Mapping[str, LogState],
                            ) -> tuple[ClusterFacts, dict[str, LogState]]:
        """One sweep resuming each running job's log where ``prior`` says the last read
        stopped (the bot's warm sweeps, ``probes.slurm.cursors``), and the states to keep."""
        return await self._collect(None, prior)

    async def _collect(self, offsets: Mapping[str, int] | None,
                       prior: Mapping[str, LogState] | None,
                       ) -> tuple[ClusterFacts, dict[str, LogState]]:
        now = self._clock()
        try:
            runner = self._runner()
        except ProbeError as exc:
            return self._unreachable(now, str(exc), None), {}
        async with fold_stack_loading(runner) as stack:  # imported while the cluster answers
            return await self._collect_with(runner, stack, now, offsets, prior)

    async def _collect_with(self, runner: Runner, stack: FoldStack, now: datetime,
                            offsets: Mapping[str, int] | None,
                            prior: Mapping[str, LogState] | None,
                            ) -> tuple[ClusterFacts, dict[str, LogState]]:
        cursors = None if prior is None else request_cursors(prior)
        fold = folder(prior, aliases=self._aliases, benign_patterns=self._cluster.benign_patterns,
                      wait=stack.wait)
        early: EarlyFolds | None = None
        try:
            users = self._users(runner)
            # Each job's log is folded as its line of the answer arrives (probes.slurm.early).
            early = EarlyFolds(fold, cluster=self._cluster.name, now=now, users=users,
                               since=self._cutoff(now), recent=lambda r: self._recent(r, now))
            async with asyncio.timeout(self._cluster.timeout_s) as deadline:
                snap = await self.snapshot(runner, now, users, offsets=offsets,
                                           one_trip=True, cursors=cursors, early=early)
                selected = self.select(snap.records, runner, now)
                collected = await self.complete_files(runner, selected, snap, offsets, cursors,
                                                      early=early)
        except ProbeError as exc:
            return self._unreachable(now, str(exc), runner), {}
        except TimeoutError:
            queued = early.queued() if early is not None else None
            if queued is None:  # no squeue document: nothing to list
                return self._unreachable(now, self._too_long(runner), runner), {}
            # Past the deadline with the queue in: read in part (probes.slurm.partial).
            return await self._in_part(queued, early, {}, None, fold,
                                       prior=prior, runner=runner, now=now)
        finally:
            await runner.aclose()
        # Parsing every tail is CPU work: a worker thread keeps the event loop (Slack acks)
        # free. Most jobs were folded there already, as their lines arrived. The sweep's
        # deadline bounds the parsing too: past it, no further job is folded, and the jobs
        # not folded by then are reported unread (read in part).
        done: Folded = {}
        try:
            async with asyncio.timeout_at(deadline.when()):
                jobs, states = await off_loop(lambda stop: fold_all(
                    selected, collected, early, fold, stateful=prior is not None, stop=stop,
                    done=done))
        except TimeoutError:
            return await self._in_part(selected, early, done, collected, fold, prior=prior,
                                       runner=runner, now=now)
        return ClusterFacts(
            name=self._cluster.name, kind="slurm", status="ok", collected_at=now,
            jobs=self._own_checkpoints(jobs), round_trips=runner.commands_sent,
        ), states

    async def _in_part(self, records: Sequence[SchedulerRecord], early: EarlyFolds | None,
                       done: Folded, collected: Mapping[str, Any] | None, fold: Fold, *,
                       prior: Mapping[str, LogState] | None, runner: Runner, now: datetime,
                       ) -> tuple[ClusterFacts, dict[str, LogState]]:
        """A sweep past its deadline, read in part (``probes.slurm.partial``)."""
        jobs, states, detail = await facts_in_part(
            records, early=early, done=done, collected=collected, fold=fold,
            stateful=prior is not None, timeout_s=self._cluster.timeout_s)
        return ClusterFacts(
            name=self._cluster.name, kind="slurm", status="ok", detail=detail, collected_at=now,
            jobs=self._own_checkpoints(jobs), round_trips=runner.commands_sent,
        ), states

    def _too_long(self, runner: Runner) -> str:
        return f"{runner.target}: sweep took longer than {self._cluster.timeout_s:g}s"

    async def collect_job(self, job_id: str, *, whole_tail: bool = False) -> JobFacts | None:
        """One job in depth, whoever owns it and however old (``None`` if SLURM forgot it);
        ``whole_tail`` keeps the log's whole tail in ``log.text`` (the deep probe reads it)."""
        facts = await self.collect_one(job_id, quiet=False, whole_tail=whole_tail)
        return facts.jobs[0] if facts.jobs else None

    async def collect_one(self, job_id: str, *, quiet: bool = True,
                          whole_tail: bool = False) -> ClusterFacts:
        """That job only, in at most two commands (``probes.slurm.onejob``): its facts first,
        then, for a TIMEOUT or COMPLETED job, its user's live jobs (successor candidates, no
        files read).
        ``quiet``: a cluster problem is ``unreachable`` (as ``collect``), else it raises."""
        job_id = _slurm_id(job_id)
        now = self._clock()
        runner = self._runner()
        async with fold_stack_loading(runner) as stack:  # imported while the cluster answers
            return await self._collect_one_with(runner, stack, job_id, now, quiet=quiet,
                                                whole_tail=whole_tail)

    async def _collect_one_with(self, runner: Runner, stack: FoldStack, job_id: str,
                                now: datetime, *, quiet: bool, whole_tail: bool,
                                ) -> ClusterFacts:
        try:
            async with asyncio.timeout(self._cluster.timeout_s):
                found, tasks = await onejob.find_job(runner, self._cluster, job_id, now)
                if found is not None and found.user not in self._users(runner):
                    found, tasks = None, []  # not a job this cluster reports: as a sweep
                collected, live, neighbours, attempts = (
                    ({}, [], [], []) if found is None
                    else await onejob.job_files(runner, self._cluster, found, now, tasks))
                live = [r for r in live if r.job_id not in {t.job_id for t in tasks}]
                earlier = onejob.earlier_failures(found, live) if found is not None else []
                if earlier:  # read as the sweep reads them: is this failure a recurrence?
                    collected = {**collected, **await onejob.attempt_files(
                        runner, self._cluster, earlier)}
                    read = {r.job_id for r in earlier}
                    live = [r for r in live if r.job_id not in read]
                # A running run's ended attempts, read in command 2 (the setting they
                # printed): each as squeue's listing of the run's name knows it, at the path
                # the collector read.
                read_at = {r.job_id: r.stdout_path for r in attempts}
                earlier += [r.model_copy(update={"stdout_path": read_at[r.job_id]})
                            for r in live if r.job_id in read_at]
                live = [r for r in live if r.job_id not in read_at]
        except (ProbeError, TimeoutError) as exc:
            reason = str(exc) or f"{runner.target}: no answer in {self._cluster.timeout_s:g}s"
            if quiet:
                return self._unreachable(now, reason, runner)
            if isinstance(exc, ProbeError):
                raise
            raise CommandError(reason) from exc
        finally:
            await runner.aclose()
        jobs = (await asyncio.to_thread(self._facts, [found, *tasks, *earlier], collected,
                                        whole_tail, stack.wait) if found else ())
        # The neighbours' logs rode in command 2 (probes.slurm.neighbours): in ``collected``.
        around = (await asyncio.to_thread(self._facts, neighbours, collected, False, stack.wait)
                  if neighbours else ())
        return ClusterFacts(name=self._cluster.name, kind="slurm", status="ok",
                            collected_at=now, round_trips=runner.commands_sent,
                            # Names shown as the sweep shows them; paths exact (module policy
                            # of probes.slurm.undecodable).
                            jobs=tuple(map(shown_facts, self._own_checkpoints(
                                (*jobs, *(JobFacts(record=r) for r in live)), around))))

    def _own_checkpoints(self, jobs: Sequence[JobFacts],
                         neighbours: Sequence[JobFacts] = ()) -> tuple[JobFacts, ...]:
        """Runs sharing a workdir bank only their own steps under the default roots
        (``probes.slurm.shared_roots``); roots the config names are read as they are.
        ``neighbours``: other runs in a job's workdir, their logs read where they could be
        (their progress), for that only (not returned)."""
        if self._cluster.checkpoint_roots != DEFAULT_CHECKPOINT_ROOTS:
            return tuple(jobs)
        kept = own_checkpoints((*jobs, *neighbours))
        return kept[:len(jobs)]

    async def cancel(self, job_id: str, *, uid: str | None = None,
                     owner: str | None = None) -> None:
        """``scancel <id>``; the id is validated before anything connects. A heterogeneous
        job's component (``N+k``) is its whole job ``N``: SLURM refuses to cancel a component
        alone ("Operation not permitted on individual component of heterogeneous job"), so a
        press on its alert failed and the run kept going.

        With ``owner`` (a plain user name) the cancel is ``scancel --verbose --user=<owner>
        <id>``: SLURM then cancels the id only while it is that user's live job, and says so
        when none matches ("No active jobs match ALL job filters", exit 0 either way). A press
        checks the job's submit time against its alert's (``bot.episodes.same_instance``) and
        salvages before it cancels; an id given meanwhile to another user's job (a controller
        whose ids were reset or wrapped) is not cancelled, and the press is told so. An owner
        that is no plain user name (a comma-separated list, an option) cancels nothing."""
        job_id = _slurm_id(job_id).split("+", 1)[0]
        argv = ["scancel", job_id]
        if owner is not None:
            if not _PLAIN_USER.fullmatch(owner):
                raise ProbeError(f"job {job_id}'s owner {owner!r} is no user name scancel can "
                                 "filter by: nothing cancelled")
            argv = ["scancel", "--verbose", f"--user={owner}", job_id]
        runner = self._runner_factory(self._cluster)
        try:
            done = await runner.run(argv)
        finally:
            await runner.aclose()
        if len(argv) > 2 and _NO_MATCH in done.stderr:
            raise ProbeError(f"job {job_id} is no longer a live job of user {owner}: "
                             "nothing cancelled")

    async def capture(self) -> Capture:
        """One verbatim read for ``record``: selected jobs' objects, scontrol lines and files."""
        now = self._clock()
        runner = self._runner_factory(self._cluster)
        try:
            snap = await self.snapshot(runner, now, self._users(runner), with_scontrol=True,
                                       one_trip=True, verbatim=True)
            selected = self.select(snap.records, runner, now)
            collected = await self.complete_files(runner, selected, snap, None)
            users = list(self._users(runner))
        finally:
            await runner.aclose()
        return Capture(now=now, users=users, snapshot=snap,
                       keep={r.job_id for r in selected}, collected=collected)

    async def aclose(self) -> None:
        """Close the kept connection, if any (each other call closes its own)."""
        if self._kept is not None:
            await self._kept.aclose()

    async def complete_files(
        self, runner: Runner, selected: Sequence[SchedulerRecord], snap: Snapshot,
        offsets: Mapping[str, int] | None, cursors: Mapping[str, Any] | None = None,
        *, early: EarlyFolds | None = None,
    ) -> dict[str, Any]:
        """The collector's answer for every started selected job.

        What the one-trip run collected is kept; the rest (all of them on the two-step path;
        else jobs whose log path needed scontrol, or known only to sacct) are collected by
        one more run, for those jobs only.
        """
        started = [r for r in selected if r.state is not JobState.PENDING]
        have = snap.collected or {}
        missing = [r for r in started if r.job_id not in have]
        got = await self.collect_files(runner, missing, offsets, cursors, early=early)
        return {r.job_id: have.get(r.job_id) or got.get(r.job_id) for r in started}

    async def collect_files(
        self, runner: Runner, records: Sequence[SchedulerRecord],
        offsets: Mapping[str, int] | None, cursors: Mapping[str, Any] | None = None,
        *, early: EarlyFolds | None = None,
    ) -> dict[str, Any]:
        """The collector's answer per job id; one run, retried once for the jobs it did not
        answer, else those logs ``failed`` (``probes.slurm.commands.run_collector``)."""
        started = [r for r in records if r.state is not JobState.PENDING]
        if not started:
            return {}
        if early is not None:
            early.expect(started)
        request = collector_request(started, self._cluster, offsets=offsets, cursors=cursors)
        return await run_collector(runner, {**request, "stream": True}, started,
                                   on_job=early.job if early is not None else None)

    # -- selection and assembly --------------------------------------------------------

    def select(self, records: Sequence[SchedulerRecord], runner: Runner, now: datetime,
               ) -> list[SchedulerRecord]:
        """The configured users' jobs that are active or ended within ``recent_hours``."""
        users = set(self._users(runner))
        return [r for r in records if r.user in users and self._recent(r, now)]

    def _facts(self, records: Sequence[SchedulerRecord], collected: Mapping[str, Any],
               whole_tail: bool = False, wait: Callable[[], None] | None = None,
               ) -> tuple[JobFacts, ...]:
        """Each record's facts (in a worker thread): after ``wait`` (a ``FoldStack.wait``:
        the fold stack imported by then), when given."""
        if wait is not None:
            wait()
        from probes.slurm.assemble import job_facts  # (the fold stack)

        patterns = self._cluster.benign_patterns
        return tuple(
            job_facts(r, collected.get(r.job_id), aliases=self._aliases, benign_patterns=patterns,
                      whole_tail=whole_tail)
            for r in records
        )

    def _unreachable(self, now: datetime, reason: str, runner: Runner | None) -> ClusterFacts:
        return ClusterFacts(
            name=self._cluster.name, kind="slurm", status="unreachable", detail=reason,
            collected_at=now, round_trips=runner.commands_sent if runner else 0,
        )


_PLAIN_USER = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}")
"""A user name passed to ``scancel --user``: no comma (a list there), no option, no space."""
_NO_MATCH = "No active jobs match"
"""``scancel --verbose``'s words (on stderr) when its filters leave the id no job."""


def _slurm_id(job_id: str) -> str:
    validate_job_id(job_id)
    if not SLURM_ID.match(job_id):
        raise InvalidJobIdError(f"{job_id!r} is not a SLURM job id (digits, optionally _N or +N)")
    return job_id
