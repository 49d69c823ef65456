"""One job in depth (``jobtables job ID``, ``/job``): that job only, whatever the cluster's size.

Policy: at most TWO remote commands (a third for a failed job's earlier attempts), each the
collector (``python3 -``, script on stdin):

1. ``squeue -h -t all -j ID -o <nonce format>`` and ``scontrol show job -o ID`` run inside the
   collector (argvs, no shell); ``sacct --json -X -j ID`` runs there too, but only when squeue
   printed no record (a job SLURM's controller already forgot). Nothing asks for the whole
   queue: ``squeue --json`` ignores ``-j`` on 22.05 and would cost the cluster's size.
2. The job's files (log tail, listings, trees) through the same collector request a sweep uses
   (for an array's or hetjob's own id, those of up to 16 of its other started tasks too: the
   worst is shown, as the sweep's group row), and,
   for a RUNNING job, its user's jobs of its name (``squeue -t all -u USER --name=NAME``: its
   earlier attempts, which decide whether it is a first launch to deep-probe as they do in a
   sweep; the run's attempts, not the user's whole queue) and its user's jobs of other names
   in its workdir with, under the default checkpoint roots, the logs of up to 16 of them, read
   by the collector in this same command (``probes.slurm.neighbours``: their progress, never
   their saves), and the logs of its latest two ended attempts (the setting they printed: a
   relaunch in a new one is deep-probed); for a job pending on a dependency, the jobs it
   waits on (``squeue -t all -j DEP,...``: a queued resume's attempt, whatever either is
   named, ``report.holds``); and for a TIMEOUT or COMPLETED
   job the successor query: the same ``squeue -t all -u USER`` (with each job's eligible time) for
   the job's own user (a COMPLETED run whose trainer stopped itself ahead of the walltime is a chain
   restart too, ``report.planned_stop``, which only its log, read in the same command, tells). Every
   successor rule in ``report.chain`` looks at a job of the same user (its ``afterany`` dependency,
   or the same name/user/workdir), live, or ended after having started once the job ended (a restart
   that already ran), so the jobs SLURM holds of that user are a bounded set that still holds any
   successor. A FAILED (or OUT_OF_MEMORY, NODE_FAIL, PREEMPTED) job lists the same, for its
   earlier attempts: a restart's name may gain ``-r2``. A PENDING job has no files, and a job
   that is neither started nor TIMEOUT nor waiting on a dependency costs one command only.
3. Only for a failed job with failed jobs just before it in its workdir: their log tails
   (:func:`earlier_failures`), so that ``jobtables job`` calls a failure ``recurring-failure``
   as the sweep does (``report.memory``; the CLI has no sweep memory).

Records are read by the sweep's forgery-proof parsers (nonce-delimited squeue, scontrol read
with what squeue said). A hetjob component ``123+1`` keeps the id squeue prints for it;
scontrol names it by its own job id, so its record is matched by HetJobId/HetJobOffset
(``probes.slurm.onejob_records``). A collector that does not run (no python3) falls back to
running the commands one by one.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from probes.config import DEFAULT_CHECKPOINT_ROOTS, SlurmCluster
from probes.errors import CommandError
from probes.models import ACTIVE_STATES, JobState, SchedulerRecord
from probes.remote.script import COLLECTOR_ARGV, build_collector_script
from probes.remote.stdio_pattern import expand_pattern
from probes.slurm.neighbours import (
    neighbour_argv,
    neighbour_request,
    parse_attempts,
    parse_neighbours,
)
from probes.slurm.onejob_records import _merged, _raw_outputs, _stdout_argv
from probes.slurm.parse import epoch, parse_squeue_json, past_banner
from probes.slurm.plain import new_nonce, parse_squeue_plain, plain_format
from probes.slurm.request import collector_request
from probes.slurm.runner import NO_EXIT_STATUS
from probes.slurm.transport import Runner

_USER = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$")
"""A login name safe as an argv value (no leading ``-`` to read as an option)."""


def _squeue_argv(nonce: str, *selection: str) -> list[str]:
    return ["env", "SLURM_TIME_FORMAT=%s", "squeue", "-h", *selection, "-o",
            plain_format(nonce)]


async def _run(runner: Runner, request: Mapping[str, Any]) -> dict[str, Any] | None:
    """The collector's answer (``None`` if it did not run or printed no answer), tried twice."""
    script = build_collector_script(request)
    for _attempt in (1, 2):
        res = await runner.run(list(COLLECTOR_ARGV), stdin=script, check=False)
        if res.exit_status not in (0, NO_EXIT_STATUS):  # none: a reader stuck on a hung
            continue  # mount; its answer, written before, stands if it parses whole
        try:
            answer = json.loads(past_banner(res.stdout))
        except (ValueError, RecursionError):  # RecursionError: nested past the parser
            continue
        if isinstance(answer, dict) and isinstance(answer.get("jobs"), dict):
            return answer
    return None


async def _scheduler(runner: Runner, cluster: SlurmCluster, commands: list[dict[str, Any]],
                     jobs: Sequence[SchedulerRecord] = (),
                     neighbours: Mapping[str, Any] | None = None,
                     ) -> tuple[list[str], dict[str, Any], str]:
    """Each command's stdout ("" if it failed or was skipped), the files of ``jobs`` (and of
    the ``neighbours`` the collector found, ``probes.slurm.neighbours``), and what the first
    command said on stderr when it failed ("" when it worked)."""
    request = {**collector_request(jobs, cluster), "scheduler": commands}
    if neighbours is not None:
        request["neighbours"] = neighbours
    answer = await _run(runner, request)
    if answer is None:  # no collector: the commands on their own (files are then failed)
        texts: list[str] = []
        said = ""
        for command in commands:
            if (command.get("unless") and any(command["unless"] in t for t in texts)) or (
                    command.get("when") and not any(command["when"] in t for t in texts)):
                texts.append("")
                continue
            res = await runner.run(command["argv"], check=False)
            texts.append(res.stdout if res.exit_status == 0 else "")
            if res.exit_status != 0 and len(texts) == 1:
                said = res.stderr.strip() or f"exit status {res.exit_status}"
        failed = {r.job_id: {"log": {"requested": r.stdout_path, "status": "failed",
                                     "error": "collector did not run", "attempts": 2}}
                  for r in jobs}
        return texts, failed, said
    ran = answer.get("scheduler") or []
    texts = [str(r.get("stdout") or "") if isinstance(r, dict) and r.get("exit") == 0 else ""
             for r in ran]
    first = ran[0] if ran and isinstance(ran[0], dict) else {}
    said = "" if first.get("exit") == 0 else (str(first.get("stderr") or "").strip()
                                              or f"exit status {first.get('exit')}")
    return texts + [""] * (len(commands) - len(texts)), answer["jobs"], said


async def find_job(runner: Runner, cluster: SlurmCluster, job_id: str, now: datetime,
                   ) -> tuple[SchedulerRecord | None, list[SchedulerRecord]]:
    """Command 1: the job's record from squeue and scontrol (sacct if squeue forgot it); for
    an array's (hetjob's) own id, also its other tasks that started (:func:`started_tasks`)."""
    nonce = new_nonce()
    commands: list[dict[str, Any]] = [
        {"argv": _squeue_argv(nonce, "-t", "all", "-j", job_id)},
        {"argv": ["scontrol", "show", "job", "-o", job_id]},
        {"argv": ["sacct", "--json", "-X", "-j", job_id], "unless": f"<R:{nonce}>"},
        # Only for a path holding a backslash or a % (scontrol's StdOut may then be wrong):
        # rarely run, and once (the second is skipped when the first ran).
        {"argv": _stdout_argv(nonce, job_id), "when": "\\"},
        {"argv": _stdout_argv(nonce, job_id), "when": "%", "unless": f"<O:{nonce}>"},
    ]
    (squeue, scontrol, sacct, escaped, outputs), _, said = await _scheduler(
        runner, cluster, commands)
    if not squeue and said and "invalid job id" not in said.lower():
        # slurmctld down or squeue broken: the cluster's problem, not an unknown job.
        raise CommandError(f"`squeue -j {job_id}` on {runner.target} failed: {said}"[:600])
    records = parse_squeue_plain(squeue, cluster=cluster.name, now=now, nonce=nonce)
    if not records and sacct.lstrip().startswith("{"):
        records = parse_squeue_json(sacct, cluster=cluster.name, now=now)
    records = _merged(records, scontrol, _raw_outputs(escaped or outputs, nonce))
    exact = [r for r in records if r.job_id == job_id]
    if exact or not records:
        return (exact[0] if exact else None), []
    # ``-j 123`` of an array names its tasks ``123_N`` (a hetjob its components ``123+N``):
    # one stands for it, a running one first, else one still to run, else the lowest. squeue
    # prints a task-limited array's pending remainder ``123_[5-9%2]`` first, ahead of the tasks
    # running, and (``-t all``) of those already ended.
    picked = min(records, key=_task_pick)
    return _as_asked(picked, job_id), started_tasks(records, picked)


ARRAY_TASKS_READ = 16
"""An array's started tasks read beside the one standing for its own id: the one shown is the
worst (``bot.sweep_lookup.array_tasks``), as the sweep's group row carries the worst member's
judgement. Reading only the picked task answered a collapsing or failed task's array
'healthy'."""


def started_tasks(records: Sequence[SchedulerRecord],
                  picked: SchedulerRecord) -> list[SchedulerRecord]:
    """The array's tasks other than ``picked`` that started (running first, then the latest
    ended), at most :data:`ARRAY_TASKS_READ`: their files ride in command 2."""
    started = [r for r in records if r is not picked and r.state is not JobState.PENDING
               and _UNSPLIT.match(r.job_id) is None]
    started.sort(key=lambda r: (r.state is not JobState.RUNNING,
                                -(r.end_time.timestamp() if r.end_time else 0.0), r.job_id))
    return started[:ARRAY_TASKS_READ]


_UNSPLIT = re.compile(r"\A(\d+)_\[([^\]]+)\]\Z")


def _as_asked(record: SchedulerRecord, job_id: str) -> SchedulerRecord:
    """The array's unsplit pending remainder under the id asked for and the sweep reports
    (``123``, its tasks as the ``array_tasks`` label, as squeue --json gives them), not
    squeue -o's ``123_[5-9%2]``, which no command or button takes as a job id."""
    found = _UNSPLIT.match(record.job_id)
    if found is None or found[1] != job_id:
        return record
    return record.model_copy(update={"job_id": job_id,
                                     "labels": {**record.labels, "array_tasks": found[2]}})


def _task_pick(record: SchedulerRecord) -> tuple[bool, bool, int, str]:
    """Running first, then the tasks still to run (a finished task does not stand for an
    array with tasks left: it would read as done), then by task index (``_10`` after ``_9``);
    an unsplit remainder after the split tasks of its kind."""
    tail = re.split(r"[_+]", record.job_id, maxsplit=1)[-1]
    index = int(tail) if tail.isdigit() else 1 << 62
    return (record.state is not JobState.RUNNING, record.state not in ACTIVE_STATES, index,
            record.job_id)


async def job_files(
    runner: Runner, cluster: SlurmCluster, record: SchedulerRecord, now: datetime,
    tasks: Sequence[SchedulerRecord] = (),
) -> tuple[dict[str, Any], list[SchedulerRecord], list[SchedulerRecord], list[SchedulerRecord]]:
    """Command 2 (when needed): the job's files and, for a TIMEOUT, COMPLETED or RUNNING job,
    the jobs SLURM still holds of its user (successor candidates: live ones, and ended ones, a
    restart that already ran being the successor too, ``report.chain``; a running run's
    earlier attempts, ``report.fingerprint``); and, for a RUNNING one, the user's jobs of
    other names in its workdir (``probes.slurm.neighbours``: read only to keep its banked
    step to its own saves, as the sweep does, which lists them all), under the default
    roots with their logs, and its latest ended attempts with theirs, read in this same trip
    (their entries in the files returned; the attempts read are the fourth list). ``tasks``:
    an array's other started tasks (:func:`started_tasks`), their files read too."""
    started = [record] if record.state is not JobState.PENDING else []
    started += tasks
    commands: list[dict[str, Any]] = []
    nonce = new_nonce()
    beside: dict[str, Any] | None = None
    awaited = _awaited(record)
    if awaited:
        # A job pending on a dependency: the jobs it waits on, whatever their names (a
        # chain's resume may be renamed, ``-r2``), by id: the attempt it may resume.
        commands.append({"argv": _squeue_argv(nonce, "-t", "all", "-j", ",".join(awaited))})
    elif _lists_related(record):
        selection: tuple[str, ...] = ("-t", "all", "-u", str(record.user))
        named = record.state not in _ALL_OF_USER and not _ending(record)
        if named:
            # A running run's earlier attempts carry its name: the user's jobs of that name
            # only, so the read costs the run's attempts, not the user's whole queue.
            selection += (f"--name={record.name}",)
        commands.append({"argv": _squeue_argv(nonce, *selection)})
        if named and record.workdir:  # and a running run's neighbours' ids, names, workdirs
            # and logs
            commands.append({"argv": neighbour_argv(nonce, str(record.user))})
            # Their progress counts under the default roots; the attempts' settings always.
            beside = neighbour_request(
                len(commands) - 1, nonce, record,
                neighbours=cluster.checkpoint_roots == DEFAULT_CHECKPOINT_ROOTS)
        if record.state in _CHAINED or _ending(record):
            # squeue -o has no eligible time; -O has, beside the id only (no user text to
            # forge).
            commands.append({"argv": ["env", "SLURM_TIME_FORMAT=%s", "squeue", "-h",
                                      *selection, "-O", "JobID:64,EligibleTime:24"]})
    if not started and not commands:
        return {}, [], [], []
    texts, collected, _ = await _scheduler(runner, cluster, commands, started, beside)
    live = parse_squeue_plain(texts[0], cluster=cluster.name, now=now,
                              nonce=nonce) if commands else []
    chained = record.state in _CHAINED or _ending(record)
    eligible = parse_eligible(texts[1]) if chained and len(texts) > 1 else {}
    listed = not chained and len(texts) > 1
    neighbours = parse_neighbours(texts[1], nonce, record) if listed and beside and (
        beside["read"]) else []
    attempts = parse_attempts(texts[1], nonce, record) if listed else []
    live = [r.model_copy(update={"eligible_time": eligible[r.job_id]})
            if r.eligible_time is None and r.job_id in eligible else r for r in live]
    return collected, [r for r in live if r.job_id != record.job_id], neighbours, attempts


def earlier_failures(record: SchedulerRecord,
                     related: Sequence[SchedulerRecord]) -> list[SchedulerRecord]:
    """The failed jobs just before failed ``record`` in its workdir (the latest
    :data:`EARLIER_READ`), each with its log path: ``record``'s StdOut with its id and name
    put back as ``%j``/``%x``, filled for it (a restart keeps its ``--output`` template, its
    name may gain ``-r2``). The judge compares their failures; a wrong path only leaves the
    log missing, so no failure is called recurring on a guess."""
    if record.state not in _FAILED_ENDS or record.submit_time is None or "_" in record.job_id:
        return []
    pattern = record.stdout_path or ""
    for value, token in ((record.job_id, "%j"), (record.name, "%x")):
        if len(value) >= 2:
            pattern = pattern.replace(value, token)
    if "%j" not in pattern:
        return []  # one log for every attempt (or none known): no other attempt's to read
    before = sorted((r for r in related
                     if r.state in _FAILED_ENDS and r.job_id != record.job_id
                     and "_" not in r.job_id and "+" not in r.job_id
                     and r.user == record.user and r.workdir == record.workdir
                     and r.submit_time is not None and r.submit_time <= record.submit_time),
                    key=lambda r: (r.submit_time, int(r.job_id) if r.job_id.isdigit() else 0),
                    reverse=True)[:EARLIER_READ]
    return [r.model_copy(update={"stdout_path": expand_pattern(
        pattern, job_id=r.job_id, array_job_id=None, array_task_id=None, user=r.user,
        name=r.name, workdir=r.workdir, node=r.nodes)}) for r in before]


async def attempt_files(runner: Runner, cluster: SlurmCluster,
                        records: Sequence[SchedulerRecord]) -> dict[str, Any]:
    """Command 3 (a failed job with earlier failed attempts only): their files."""
    _, collected, _ = await _scheduler(runner, cluster, [], records)
    return collected


def _lists_related(record: SchedulerRecord) -> bool:
    """Whether command 2 lists the user's related jobs: a TIMEOUT or COMPLETED job's
    successor candidates (all the user's jobs SLURM holds), a RUNNING job's earlier attempts
    (the user's jobs of its name: a name squeue's ``--name`` list can hold, no comma)."""
    if (record.state not in _RELATED and not _ending(record)) \
            or not record.user or not _USER.match(record.user):
        return False
    name = record.name
    return record.state in _ALL_OF_USER or _ending(record) or (
        bool(name) and "," not in name and name.isprintable() and len(name) <= 1024)


def _awaited(record: SchedulerRecord) -> tuple[str, ...]:
    """The ids a job pending on a dependency waits on (a restart chain's resume queued behind
    its attempt, ``report.holds.resumed_attempt``, under its name or a new one such as
    ``-r2``), at most :data:`AWAITED_READ`, each as squeue's ``-j`` takes it (an array task
    ``12_3``; ``12_*`` as its array ``12``); none for any other job."""
    if record.state is not JobState.PENDING or record.reason != "Dependency":
        return ()
    ids = (_AWAITED_ID.match(job) for job in record.depends_on)
    return tuple(dict.fromkeys(found[0] for found in ids if found))[:AWAITED_READ]


_AWAITED_ID = re.compile(r"\d+(?:_\d+(?![\d*]))?")
AWAITED_READ = 64
"""Dependency ids a pending job's command 2 asks squeue for (one ``-j`` list)."""


def _ending(record: SchedulerRecord) -> bool:
    """COMPLETING at its walltime: the TIMEOUT it is becoming, its successor looked for as a
    TIMEOUT's (``report.holds.walltime_ending``)."""
    return record.state is JobState.COMPLETING and record.reason == "TimeLimit"


_CHAINED = frozenset({JobState.TIMEOUT, JobState.COMPLETED, JobState.CANCELLED})
"""The ended states a chain successor may continue (``report.chain.chain_link``; a CANCELLED
run's ``afterany`` restart, released by the cancel, ``report.judge``)."""
_FAILED_ENDS = frozenset({JobState.FAILED, JobState.OUT_OF_MEMORY, JobState.NODE_FAIL,
                          JobState.PREEMPTED})
"""Failed ends, whose earlier attempts (any name: ``-r2`` suffixes) decide whether the failure
recurs (``report.memory``), as the sweep reads them."""
_ALL_OF_USER = _CHAINED | _FAILED_ENDS
_RELATED = _ALL_OF_USER | {JobState.RUNNING}
EARLIER_READ = 2
"""How many earlier failed attempts of a failed job ``jobtables job`` reads the logs of."""
"""States whose row reads the user's other jobs: a chain's successor candidates, and a running
run's earlier attempts (same name stem, or the chain predecessor it restarts), which stand in
for memory in the first-launch rule (``report.fingerprint``) as they do in the sweep."""
_ELIGIBLE_LINE = re.compile(r"^\s*(\d+(?:_\d+)?)\s+(\d+)\s*$", re.MULTILINE)


def parse_eligible(text: str) -> dict[str, datetime]:
    """``squeue -O JobID,EligibleTime`` with epoch times -> job id -> eligible time (lines
    that are not an id and an epoch, such as a pending array's ``12_[0-3]``, are skipped)."""
    out: dict[str, datetime] = {}
    for match in _ELIGIBLE_LINE.finditer(text):
        when = epoch(int(match.group(2)))
        if when is not None:
            out.setdefault(match.group(1), when)
    return out
