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

import asyncio
import contextlib
import contextvars
import importlib
import sys
import threading
from collections.abc import AsyncIterator, Callable, Collection, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeAlias, TypeVar

from probes.models import JobFacts, JobState, SchedulerRecord
from probes.slurm.answer import loads
from probes.slurm.parse import expand_stdout, records_from_squeue

if TYPE_CHECKING:
    from probes.slurm.cursors import LogState

Fold: TypeAlias = ("Callable[[SchedulerRecord, Mapping[str, Any] | None],"
                   " tuple[JobFacts, LogState | None]]")


FOLD_STACK = (
    "probes.logs.attempts", "probes.logs.lines", "probes.logs.bar_lines", "probes.logs.excerpt",
    "probes.logs.prefilter", "probes.logs.fault_patterns", "probes.logs.launch_checks",
    "probes.logs.tracebacks", "probes.logs.faults", "probes.logs.areal_lines",
    "probes.logs.harbor_progress", "probes.logs.hf_cadence", "probes.logs.mirror_lines",
    "probes.logs.progress", "probes.logs.nemo_rl_epochs", "probes.logs.titan_lines",
    "probes.logs.easyr1_lines", "probes.logs.bracket_lines",
    "probes.logs.litgpt_lines", "probes.logs.pair_lines",
    "probes.logs.rich_panel", "probes.logs.slime_lines", "probes.logs.skyrl_batches",
    "probes.logs.scan_patterns", "probes.logs.hf_banner", "probes.logs.metric_names",
    "probes.logs.scan_core", "probes.logs.precision", "probes.logs.unsloth_lines",
    "probes.logs.tracker_records",
    "probes.logs.scan_dicts", "probes.logs.nemo_sc_lines", "probes.logs.scan_steps",
    "probes.logs.scan_episodes", "probes.logs.scan_bars", "probes.logs.scan_summary",
    "probes.logs.scan_markers", "probes.logs.history", "probes.logs.carried",
    "probes.logs.step_intervals", "probes.logs.fold_scan", "probes.logs.metric_carry",
    "probes.logs.fault_carry", "probes.logs.fingerprint_lines", "probes.logs.namespace_dump",
    "probes.logs.fingerprint_fields", "probes.logs.fingerprint",
    "probes.logs.fingerprint_carry", "probes.logs.config_total", "probes.logs.outcome",
    "probes.logs.planned_stop", "probes.logs.line_feed",
    "probes.logs.recent", "probes.logs.parse", "probes.logs.incremental", "probes.harbor",
    "probes.remote.posix_acl", "probes.remote.hung_marks", "probes.remote.guard",
    "probes.remote.checkpoint_steps", "probes.remote.logged_paths",
    "probes.remote.tree", "probes.slurm.checkpoints", "probes.slurm.engine_log",
    "probes.slurm.assemble",
    "probes.slurm.cursors",
)
"""What folding a job imports, each module after those it imports: :func:`load_fold_stack`
takes them one at a time. (A test holds the list to what ``probes.slurm.cursors`` pulls in.)"""


async def load_fold_stack() -> None:
    """Import :data:`FOLD_STACK`, one module per turn of the event loop.

    Policy (issue 12): a cold ``jobtables sweep`` or ``job`` spends its first few hundred
    milliseconds importing, then waits while SSH connects and the login node starts the
    collector and squeue. Nothing in the fold stack is needed to send the request
    (``probes.slurm.request``), so the probe sends it first and imports these while the
    cluster answers: each step holds the loop for a few milliseconds only, so the SSH
    handshake and the first lines of the answer are read between them. The answer's worker
    thread waits for the whole stack before its first fold (``FoldStack.wait``): two
    threads importing one module graph at once could see a module half-initialised. Where
    the stack is already imported (the bot, a second sweep) this returns at once."""
    for name in FOLD_STACK:
        if name not in sys.modules:
            importlib.import_module(name)
            await asyncio.sleep(0)


FIRST_COMMAND: contextvars.ContextVar[Callable[[], None] | None] = contextvars.ContextVar(
    "jobtables_first_command", default=None)
"""Called, when set in the context a :class:`FoldStack` is made in, as that stack starts: its
cluster's first command is out. ``bot.preload`` waits for it before importing rendering."""


class FoldStack:
    """:func:`load_fold_stack` in a task of the running loop, begun by :meth:`start` (the
    request is out: the sweep only waits for the cluster from then on). The SSH handshake
    is not slowed by the imports that way: each of its round trips would wait for the
    import step under way. :attr:`ready` is set once the task has ended; the task is never
    cancelled by the sweep (a fold waiting on it would otherwise go on over a half-imported
    stack while the loop's thread imports the rest). Use :func:`fold_stack_loading`."""

    def __init__(self) -> None:
        self.ready = threading.Event()
        self._loop = asyncio.get_running_loop()
        self._go = asyncio.Event()
        self._hook = FIRST_COMMAND.get()
        self.task = self._loop.create_task(self._load(), name="fold-stack")
        # A callback, not a finally: a task cancelled before its first step never runs
        # (asyncio.run cancels what is left when its loop ends).
        self.task.add_done_callback(lambda _: self.ready.set())

    def start(self) -> None:
        """Begin the imports (idempotent; on the loop's thread)."""
        if not self._go.is_set():
            self._go.set()
            if self._hook is not None:
                self._hook()

    def wait(self) -> None:
        """From a worker thread, before a fold: start the imports if nothing has (a runner
        that never called its hook), then wait until they have ended."""
        if self.ready.is_set():
            return
        try:
            self._loop.call_soon_threadsafe(self.start)
        except RuntimeError:  # the loop is closed: nothing imports beside this thread now
            return
        self.ready.wait()

    async def _load(self) -> None:
        await self._go.wait()
        await load_fold_stack()


@contextlib.asynccontextmanager
async def fold_stack_loading(runner: object = None) -> AsyncIterator[FoldStack]:
    """A :class:`FoldStack` beside the block, started as ``runner`` starts its first command
    (its ``on_command``, the transports' hook), at once for a runner without that hook, and
    by the first fold that waits for it (:meth:`FoldStack.wait`) otherwise. On the way out
    the block starts the stack if nothing did and, when it ended well, waits for the rest of
    the imports (its folds come next); when it raised, the imports go on in the background."""
    stack = FoldStack()
    if hasattr(runner, "on_command"):
        runner.on_command = stack.start
    else:
        stack.start()
    try:
        yield stack
    finally:
        stack.start()
    await stack.task


def folder(prior: Mapping[str, LogState] | None, *, aliases: Mapping[str, str],
           benign_patterns: Sequence[str], wait: Callable[[], None] | None = None) -> Fold:
    """One job's fold as ``fold_jobs`` does it: cold (``job_facts``, no state) without
    ``prior``, else resumed from the job's prior state (``fold_job``). With ``wait`` (a
    :meth:`FoldStack.wait`), a fold first calls it: the fold stack is imported by then."""
    if prior is None:
        def cold(r: SchedulerRecord, entry: Mapping[str, Any] | None,
                 ) -> tuple[JobFacts, LogState | None]:
            if wait is not None:
                wait()
            from probes.slurm.assemble import job_facts  # (the fold stack)

            return job_facts(r, entry, aliases=aliases, benign_patterns=benign_patterns), None
        return cold

    def resumed(r: SchedulerRecord, entry: Mapping[str, Any] | None,
                ) -> tuple[JobFacts, LogState | None]:
        if wait is not None:
            wait()
        from probes.slurm.cursors import fold_job  # (the fold stack)

        return fold_job(r, entry, prior.get(r.job_id), aliases=aliases,
                        benign_patterns=benign_patterns)
    return resumed


HEAD_CANDIDATES = 4
"""Lines starting ``{`` kept as they arrive (the head, and any login-banner line before it)."""


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
        self._arrived: list[bytes] = []
        self.restore: Callable[[dict[str, Any]], None] | None = None
        """What the snapshot does to a head before reading it (a held document restored)."""

    def expect(self, records: Sequence[SchedulerRecord]) -> None:
        """Fold these records' jobs as their lines arrive (a run for known records)."""
        self.records.update({r.job_id: r for r in records})

    def head(self, head: Mapping[str, Any]) -> None:
        """The one-trip answer's head: its squeue document's records, as the snapshot reads
        them (``records_from_squeue``, the users' jobs, expanded, recent)."""
        got = self._read_head(head)
        if got is None:
            return  # nothing to fold against (the probe judges the document itself)
        self.parsed, self._expanded = got[0], got[1]
        self.records.update(got[2])

    def _read_head(self, head: Mapping[str, Any]) -> tuple[
            tuple[Any, list[SchedulerRecord]], dict[str, tuple[SchedulerRecord, SchedulerRecord]],
            dict[str, SchedulerRecord]] | None:
        """``(parsed, expanded, recent records)`` of a head, or ``None`` (no document)."""
        out = head.get("squeue")
        document = out.get("json") if isinstance(out, dict) else None
        if not isinstance(document, dict) or self._now is None or document.get("errors"):
            return None
        try:
            parsed = records_from_squeue(document, cluster=self._cluster, now=self._now,
                                         users=self._users, since=self._since)
        except Exception:
            return None
        by_id = {r.job_id: r for r in parsed
                 if self._users is None or r.user in self._users}
        expanded = {k: (r, expand_stdout(r)) for k, r in by_id.items()}
        return ((document, parsed), expanded,
                {k: x for k, (r, x) in expanded.items() if self._recent(r)})

    def arrived(self, raw: bytes) -> None:
        """A line that may be the answer's head, as it arrives (on the event loop's thread,
        before the worker reads it: lines before it may hold the worker for a while)."""
        if len(self._arrived) < HEAD_CANDIDATES:
            self._arrived.append(raw)

    def queued(self) -> list[SchedulerRecord] | None:
        """The jobs squeue's document lists (as :meth:`head` selects them), for a sweep past
        its deadline (``probes.slurm.partial``): the worker's, or, when the worker had not
        reached the head yet, read from the head's line as it arrived (``restore`` first: a
        held document); ``None`` when no document came."""
        if self.parsed is not None:
            return list(self.records.values())
        for raw in self._arrived:
            try:
                head = loads(raw)
            except (ValueError, RecursionError):
                continue
            if not isinstance(head, dict) or head.get("part") != "head":
                continue
            if self.restore is not None:
                self.restore(head)
            got = self._read_head(head)
            return None if got is None else list(got[2].values())
        return None

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
        is known yet, so it is folded against a stand-in (:meth:`stand_in`); a fold's log
        part reads the record for nothing but its id (``tests/probes/slurm/test_early_listing.py``
        holds it to that), and :meth:`take` puts the sweep's own record in its place (its
        trial tree assembled again with the record's start time)."""
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
            return _with_record(facts, record, entry), state
        return None

    def folded_as(self, record: SchedulerRecord) -> tuple[JobFacts, LogState | None] | None:
        """This record's job as folded early, from the entry its line brought (a sweep cut
        short by its deadline has no other: ``probes.slurm.partial``); as :meth:`take`."""
        got = self._done.get(record.job_id)
        return None if got is None else self.take(record, got[1])

    @property
    def folded(self) -> int:
        """Jobs folded early so far (tests and benchmarks read it)."""
        return len(self._done)


def _with_record(facts: JobFacts, record: SchedulerRecord,
                 entry: Mapping[str, Any]) -> JobFacts:
    """A stand-in's facts given the sweep's record: the trial tree, the one part of a fold
    that reads more than the id (which Harbor job dirs of a shared ``jobs/`` are the job's
    goes by its start time, ``assemble._own_jobs``), is assembled again with it; the log's
    fold, the costly part, stands."""
    update: dict[str, Any] = {"record": record}
    trials = entry.get("trials")
    if trials and record.start_time is not None:
        from probes.slurm.assemble import run_span, trial_tree  # (the fold stack: loaded)

        update["trials"] = trial_tree(trials, **run_span(record))
    return facts.model_copy(update=update)


class FoldsAbandoned(Exception):
    """The sweep gave up (its deadline passed, or it was cancelled): no more jobs folded."""


def fold_all(records: Sequence[SchedulerRecord], collected: Mapping[str, Any],
             early: EarlyFolds | None, fold: Fold, *, stateful: bool,
             stop: threading.Event | None = None,
             done: dict[str, tuple[JobFacts, LogState | None]] | None = None,
             ) -> tuple[tuple[JobFacts, ...], dict[str, LogState]]:
    """``fold_jobs``' result: every record's facts (early ones where they stand), and the
    states of the jobs that have one when ``stateful``. Once ``stop`` is set no further job
    is folded (:class:`FoldsAbandoned`): the fold under way is the last. ``done`` gets each
    job's result as it is made (what a sweep past its deadline reports, read in part)."""
    jobs: list[JobFacts] = []
    states: dict[str, LogState] = {}
    for r in records:
        if stop is not None and stop.is_set():
            raise FoldsAbandoned(f"{len(records) - len(jobs)} of {len(records)} jobs not folded")
        entry = collected.get(r.job_id)
        got = early.take(r, entry) if early is not None and entry is not None else None
        facts, state = got if got is not None else fold(r, entry)
        if done is not None:
            done[r.job_id] = (facts, state)
        jobs.append(facts)
        if stateful and state is not None:
            states[r.job_id] = state
    return tuple(jobs), states


_T = TypeVar("_T")


async def off_loop(work: Callable[[threading.Event], _T]) -> _T:
    """``work(stop)`` in a worker thread (parsing is CPU work: the event loop stays free). A
    thread cannot be interrupted, so when the awaiting task is cancelled (the sweep's
    ``timeout_s``) ``stop`` is set, and ``work`` starts no more jobs: a sweep that gave up
    leaves no parsing behind it."""
    stop = threading.Event()
    try:
        return await asyncio.to_thread(work, stop)
    except BaseException:
        stop.set()
        raise
