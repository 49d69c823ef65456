"""The SLURM backend: one sweep of a cluster over SSH (or locally) in a fixed number of commands.

Policy:

* A sweep sends the same few commands whatever the number of jobs, over one connection:
  ``squeue --json`` (``squeue -h -t all -o`` with epoch times when ``--json`` is unsupported)
  and ``sacct --json`` for recently finished jobs where accounting exists, run concurrently;
  ``scontrol show job -o`` only when a log path cannot be expanded from squeue's own fields
  (22.05 leaves ``--output`` patterns raw; ``expand_stdout`` applies slurmctld's rules); then
  ONE collector run (``python3 -``, script on stdin) that locates, stats and
  tails every job's log and lists its checkpoints and trial trees. ``round_trips`` counts the
  commands sent.
* An unsupported ``--json`` or a cluster without accounting is remembered per probe instance,
  so later sweeps do not pay for the failed command again.
* Jobs are those of the configured ``users`` (default: the login user) that are active or
  ended within ``recent_hours``. Pending jobs have no log yet and are not sent to the collector.
* ``collect`` never raises for a cluster problem: it returns ``status="unreachable"`` with the
  reason (naming ``host:port``). A failed collector run (after one retry) is not an unreachable
  cluster: every job's log is reported ``failed`` (-> fetch-failed, never "dead").
* Every command is an argv; job ids are validated before any command is built.
"""

from __future__ import annotations

import asyncio
import functools
import json
import re
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from probes.assemble import collector_request, job_facts
from probes.config import SlurmCluster
from probes.errors import InvalidJobIdError, ProbeError
from probes.ids import SLURM_ID, validate_job_id
from probes.models import ACTIVE_STATES, ClusterFacts, JobFacts, JobState, SchedulerRecord
from probes.slurm_parse import (
    PLAIN_FORMAT,
    expand_stdout,
    merge_scontrol,
    needs_scontrol,
    parse_scontrol_all,
    parse_squeue_json,
    parse_squeue_plain,
)
from probes.ssh import Runner, RunnerFactory, make_runner

_HERE = Path(__file__).resolve().parent
_FUTURE = re.compile(r"^from __future__ import [^\n]*\n", re.MULTILINE)
_REDUCER_IMPORT = re.compile(r"^([ \t]*)from probes\.harbor_reduce import [^\n]*$", re.MULTILINE)
_NO_JSON = ("unrecognized option", "invalid option", "unknown option", "serializer", "plugin")
_NO_SACCT = ("accounting storage is disabled", "unrecognized option", "invalid option",
             "could not start", "command not found", "not found")


@functools.cache
def collector_source() -> str:
    """harbor_reduce + collector as one script body (without the final ``main(...)`` call)."""
    reducer = (_HERE / "harbor_reduce.py").read_text(encoding="utf-8")
    collector = (_HERE / "collector.py").read_text(encoding="utf-8")
    collector, count = _REDUCER_IMPORT.subn(r"\1pass  # reducer source prepended above", collector)
    if count != 1:
        raise ProbeError("probes/collector.py: expected exactly one harbor_reduce import line")
    body = _FUTURE.sub("", reducer) + "\n\n" + _FUTURE.sub("", collector)
    # One __future__ line, first: it is only legal before any other statement.
    return "from __future__ import annotations\n" + body


def build_collector_script(request: Mapping[str, Any]) -> str:
    """The script run by ``python3 -``: the request rides inside it as a string literal."""
    return f"{collector_source()}\n\nmain({json.dumps(request)!r})\n"


@dataclass(frozen=True)
class Snapshot:
    """What the scheduler commands printed in one sweep, verbatim, and the merged records."""

    squeue: str
    squeue_format: str
    """``json`` or ``plain``."""
    scontrol: str
    sacct: str | None
    records: tuple[SchedulerRecord, ...]
    """The jobs asked for (all, or the users'), merged, before the recency filter."""
    slurm_version: str | None


class SlurmProbe:
    """A SLURM cluster reached over SSH (or locally); see the module docstring."""

    def __init__(
        self,
        cluster: SlurmCluster,
        *,
        aliases: Mapping[str, str] | None = None,
        clock: Callable[[], datetime] | None = None,
        runner_factory: RunnerFactory | None = None,
        **_: Any,
    ) -> None:
        self._cluster = cluster
        self._aliases = dict(aliases or {})
        self._clock = clock or (lambda: datetime.now(UTC))
        self._runner_factory = runner_factory or make_runner
        self.json_supported = True
        self.sacct_available = True

    @property
    def cluster(self) -> SlurmCluster:
        return self._cluster

    async def collect(self, *, offsets: Mapping[str, int] | None = None) -> ClusterFacts:
        """One sweep; never raises for an unreachable or failing cluster."""
        now = self._clock()
        runner: Runner | None = None
        try:
            runner = self._runner_factory(self._cluster)
            async with asyncio.timeout(self._cluster.timeout_s):
                snap = await self.snapshot(runner, now, self._users(runner))
                selected = self.select(snap.records, runner, now)
                collected = await self.collect_files(runner, selected, offsets)
        except ProbeError as exc:
            return self._unreachable(now, str(exc), runner)
        except TimeoutError:
            where = runner.target if runner else self._cluster.name
            reason = f"{where}: sweep took longer than {self._cluster.timeout_s:g}s"
            return self._unreachable(now, reason, runner)
        finally:
            if runner is not None:
                await runner.aclose()
        return ClusterFacts(
            name=self._cluster.name, kind="slurm", status="ok", collected_at=now,
            jobs=self._facts(selected, collected), round_trips=runner.commands_sent,
        )

    async def collect_job(self, job_id: str) -> JobFacts | None:
        """One job in depth, whoever owns it and however old (``None`` if SLURM forgot it)."""
        job_id = _slurm_id(job_id)
        now = self._clock()
        runner = self._runner_factory(self._cluster)
        try:
            snap = await self.snapshot(runner, now)
            found = [r for r in snap.records if r.job_id == job_id]
            collected = await self.collect_files(runner, found, None)
        finally:
            await runner.aclose()
        facts = self._facts(found, collected)
        return facts[0] if facts else None

    async def cancel(self, job_id: str) -> None:
        """``scancel <id>``; the id is validated before anything connects."""
        job_id = _slurm_id(job_id)
        runner = self._runner_factory(self._cluster)
        try:
            await runner.run(["scancel", job_id])
        finally:
            await runner.aclose()

    async def aclose(self) -> None:
        """Nothing to release: each sweep closes its own connection."""
        return None

    # -- the fixed command set ---------------------------------------------------------

    async def snapshot(
        self, runner: Runner, now: datetime, users: Collection[str] | None = None,
        *, with_scontrol: bool = False,
    ) -> Snapshot:
        """Run squeue and sacct concurrently over the runner's one connection.

        ``scontrol show job -o`` runs only when a log path cannot be expanded from squeue's
        own fields (see ``expand_stdout``) or when ``with_scontrol`` asks for it (``record``
        keeps it verbatim): on every supported version that leaves one command per sweep for
        the queue. With ``users``, only their jobs are parsed into records.
        """
        try:
            async with asyncio.TaskGroup() as group:
                squeue = group.create_task(self._squeue(runner))
                sacct = group.create_task(self._sacct(runner))
        except BaseExceptionGroup as failed:
            # Re-raise the member itself: it already chains the library's original error.
            raise _first_probe_error(failed)  # noqa: B904
        (squeue_format, squeue_text), sacct_text = squeue.result(), sacct.result()
        name = self._cluster.name
        if squeue_format == "json":
            parsed = parse_squeue_json(squeue_text, cluster=name, now=now, users=users)
        else:
            parsed = parse_squeue_plain(squeue_text, cluster=name, now=now)
        records = {r.job_id: r for r in parsed if users is None or r.user in users}
        if sacct_text:
            for r in parse_squeue_json(sacct_text, cluster=name, now=now, users=users):
                records.setdefault(r.job_id, r)
        records = {k: expand_stdout(r) for k, r in records.items()}
        scontrol_text = ""
        if with_scontrol or any(needs_scontrol(r) for r in records.values()):
            scontrol_text = await self._scontrol(runner)
            fields = parse_scontrol_all(scontrol_text, wanted=records.keys())
            records = {k: merge_scontrol(r, fields.get(k)) for k, r in records.items()}
        version = _slurm_version(squeue_text) if squeue_format == "json" else None
        return Snapshot(squeue_text, squeue_format, scontrol_text, sacct_text,
                        tuple(records.values()), version)

    async def _squeue(self, runner: Runner) -> tuple[str, str]:
        if self.json_supported:
            res = await runner.run(["squeue", "--json"], check=False)
            if res.exit_status == 0 and res.stdout.lstrip().startswith("{"):
                return "json", res.stdout
            if res.exit_status != 0 and not _mentions(res.stderr, _NO_JSON):
                raise res.failure(runner.target)
            self.json_supported = False
        plain = ["env", "SLURM_TIME_FORMAT=%s", "squeue", "-h", "-t", "all", "-o", PLAIN_FORMAT]
        res = await runner.run(plain)
        return "plain", res.stdout

    async def _scontrol(self, runner: Runner) -> str:
        # Optional enrichment: a failure leaves squeue's fields as they are.
        res = await runner.run(["scontrol", "show", "job", "-o"], check=False)
        return res.stdout if res.exit_status == 0 else ""

    async def _sacct(self, runner: Runner) -> str | None:
        if not self.sacct_available:
            return None
        seconds = max(60, int(self._cluster.recent_hours * 3600))
        users = ",".join(self._users(runner))
        res = await runner.run(
            ["sacct", "--json", "-X", "-S", f"now-{seconds}", "-u", users], check=False,
        )
        if res.exit_status == 0 and res.stdout.lstrip().startswith("{"):
            return res.stdout
        if res.exit_status == 127 or _mentions(res.stderr, _NO_SACCT):
            self.sacct_available = False  # a cluster without accounting stays without it
        return None

    async def collect_files(
        self, runner: Runner, records: Sequence[SchedulerRecord],
        offsets: Mapping[str, int] | None,
    ) -> dict[str, Any]:
        """The collector's answer per job id; one run, retried once, else logs ``failed``."""
        started = [r for r in records if r.state is not JobState.PENDING]
        if not started:
            return {}
        script = build_collector_script(collector_request(started, self._cluster,
                                                          offsets=offsets))
        error = "collector did not run"
        for _attempt in (1, 2):
            res = await runner.run(["python3", "-"], stdin=script, check=False)
            if res.exit_status != 0:
                error = str(res.failure(runner.target))
                continue
            try:
                answer = json.loads(res.stdout)
            except ValueError as exc:
                error = f"collector printed unreadable output on {runner.target}: {exc}"
                continue
            jobs = answer.get("jobs") if isinstance(answer, dict) else None
            if isinstance(jobs, dict):
                return jobs
            error = f"collector answer on {runner.target} has no jobs"
        return {r.job_id: {"log": {"requested": r.stdout_path, "status": "failed",
                                   "error": error, "attempts": 2}} for r in started}

    # -- selection and assembly --------------------------------------------------------

    def select(self, records: Sequence[SchedulerRecord], runner: Runner, now: datetime,
               ) -> list[SchedulerRecord]:
        """The configured users' jobs that are active or ended within ``recent_hours``."""
        users = set(self._users(runner))
        cutoff = now - timedelta(hours=self._cluster.recent_hours)
        return [
            r for r in records
            if r.user in users and (
                r.state in ACTIVE_STATES or r.end_time is None or r.end_time >= cutoff
            )
        ]

    def _users(self, runner: Runner) -> tuple[str, ...]:
        return self._cluster.users or (runner.login_user,)

    def _facts(self, records: Sequence[SchedulerRecord], collected: Mapping[str, Any],
               ) -> tuple[JobFacts, ...]:
        patterns = self._cluster.benign_patterns
        return tuple(
            job_facts(r, collected.get(r.job_id), aliases=self._aliases, benign_patterns=patterns)
            for r in records
        )

    def _unreachable(self, now: datetime, reason: str, runner: Runner | None) -> ClusterFacts:
        return ClusterFacts(
            name=self._cluster.name, kind="slurm", status="unreachable", detail=reason,
            collected_at=now, round_trips=runner.commands_sent if runner else 0,
        )


def _slurm_id(job_id: str) -> str:
    validate_job_id(job_id)
    if not SLURM_ID.match(job_id):
        raise InvalidJobIdError(f"{job_id!r} is not a SLURM job id (digits, optionally _N or +N)")
    return job_id


def _first_probe_error(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """The first ProbeError of a failed fan-out (one reason is enough for the report)."""
    for exc in group.exceptions:
        if isinstance(exc, BaseExceptionGroup):
            return _first_probe_error(exc)
        if isinstance(exc, ProbeError):
            return exc
    return group


def _mentions(text: str, needles: Sequence[str]) -> bool:
    low = text.lower()
    return any(n in low for n in needles)


def _slurm_version(squeue_json: str) -> str | None:
    try:
        meta = json.loads(squeue_json).get("meta") or {}
    except (ValueError, AttributeError):
        return None
    slurm = meta.get("Slurm") or meta.get("slurm") or {}
    release = slurm.get("release") if isinstance(slurm, dict) else None
    return str(release) if release else None


# -- recording ---------------------------------------------------------------------------


async def record(
    cluster: SlurmCluster,
    dest: Path,
    *,
    aliases: Mapping[str, str] | None = None,
    clock: Callable[[], datetime] | None = None,
    runner_factory: RunnerFactory | None = None,
) -> Path:
    """Capture a live cluster into a replay directory (format: ``probes/replay.py``).

    Only the selected jobs (configured users, active or recent) are written, each job object
    and scontrol line verbatim, so a recording carries no other user's jobs. Raises
    ``ProbeError`` when the cluster cannot be read.
    """
    probe = SlurmProbe(cluster, aliases=aliases, clock=clock, runner_factory=runner_factory)
    now = probe._clock()
    runner = probe._runner_factory(cluster)
    try:
        snap = await probe.snapshot(runner, now, probe._users(runner), with_scontrol=True)
        selected = probe.select(snap.records, runner, now)
        collected = await probe.collect_files(runner, selected, None)
        users = list(probe._users(runner))
    finally:
        await runner.aclose()
    keep = {r.job_id for r in selected}
    meta = {"format": 1, "name": cluster.name, "kind": "slurm",
            "recorded_at": now.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"), "users": users,
            "slurm_version": snap.slurm_version}
    await asyncio.to_thread(_write_recording, dest, meta, snap, keep, collected)
    return dest


def _write_recording(dest: Path, meta: dict[str, Any], snap: Snapshot, keep: set[str],
                     collected: dict[str, Any]) -> None:
    dest.mkdir(parents=True, exist_ok=True)
    name = str(meta["name"])
    now = datetime.fromisoformat(str(meta["recorded_at"]).replace("Z", "+00:00"))
    _write_json(dest / "cluster.json", meta)
    if snap.squeue_format == "json":
        squeue = _only_jobs(snap.squeue, keep, name, now)
    else:
        squeue = _synthesized_squeue([r for r in snap.records if r.job_id in keep])
    _write_json(dest / "squeue.json", squeue)
    if snap.sacct:
        _write_json(dest / "sacct.json", _only_jobs(snap.sacct, keep, name, now))
    lines = [ln for ln in snap.scontrol.splitlines() if parse_scontrol_all(ln).keys() & keep]
    (dest / "scontrol.txt").write_text("".join(f"{ln}\n" for ln in lines), encoding="utf-8")
    _write_json(dest / "collected.json", {"protocol": 1, "jobs": collected})


def _write_json(path: Path, data: Any) -> None:
    path.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")


def _only_jobs(text: str, keep: set[str], cluster: str, now: datetime) -> dict[str, Any]:
    """The scheduler's JSON with only the kept jobs' objects (each verbatim)."""
    data = json.loads(text)
    jobs = []
    for job in data.get("jobs") or []:
        parsed = parse_squeue_json(json.dumps({"jobs": [job]}), cluster=cluster, now=now)
        if parsed and parsed[0].job_id in keep:
            jobs.append(job)
    return {**data, "jobs": jobs}


def _synthesized_squeue(records: Sequence[SchedulerRecord]) -> dict[str, Any]:
    """A v0.0.38-shaped ``squeue --json`` for clusters that only speak ``squeue -o``."""
    def epoch(at: datetime | None) -> int:
        return int(at.timestamp()) if at else 0

    jobs = [{
        "job_id": int(r.job_id.split("_")[0].split("+")[0]), "name": r.name,
        "user_name": r.user, "job_state": r.state.value, "state_reason": r.reason or "None",
        "submit_time": epoch(r.submit_time), "start_time": epoch(r.start_time),
        "end_time": epoch(r.end_time),
        "time_limit": r.time_limit_s // 60 if r.time_limit_s is not None else None,
        "current_working_directory": r.workdir or "", "standard_output": r.stdout_path or "",
        "dependency": r.dependency or "", "command": r.command or "",
    } for r in records]
    return {"meta": {"plugin": {"type": "jobtables", "name": "synthesized from squeue -o"}},
            "errors": [], "jobs": jobs}
