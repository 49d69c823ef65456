"""SlurmProbe's sweep logic behind the runner seam: fallbacks, memory of absent commands,
selection, the collector retry, and a constant number of round trips.

The scheduler commands are served from the real 22.05.8 captures; `python3 -` (the collector)
really runs, locally, with a stand-in `squeue` first on its PATH that prints the same capture
(the one-trip sweep runs squeue inside the collector).
"""

from __future__ import annotations

import ast
import json
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from probes.config import SlurmCluster
from probes.models import JobState
from probes.remote.stdio_pattern import SQUEUE_JOB_KEYS
from probes.slurm.probe import SlurmProbe
from probes.slurm.scontrol import parse_scontrol_all
from probes.slurm.transport import CommandResult, LocalRunner, Runner
from tests.probes.slurm.conftest import as_plain_format, fake_squeue_bin, run_with_path

REAL = Path(__file__).resolve().parents[2] / "fixtures" / "slurm-22.05.8"
IDS = dict(line.split("=", 1) for line in (REAL / "jobs.txt").read_text().split())
NOW = datetime.fromtimestamp(1796059000, tz=UTC)


class ScriptedCluster:
    """Answers scheduler commands like a 22.05 cluster without --json/accounting as told."""

    def __init__(self, tmp: Path, *, json_ok: bool = True, squeue: str | None = None,
                 collector_fails: bool = False) -> None:
        self.json_ok = json_ok
        self.squeue = squeue if squeue is not None else (REAL / "squeue_early.json").read_text()
        self.collector_fails = collector_fails
        self.calls: list[tuple[str, ...]] = []
        self.scripts: list[str] = []
        self.bin = fake_squeue_bin(
            tmp, self.squeue, error=None if json_ok else "squeue: unrecognized option '--json'")
        self.squeue_calls = tmp / "squeue.calls"

    def factory(self, cluster: SlurmCluster) -> Runner:
        return _Runner(self, cluster)


class _Runner:
    def __init__(self, world: ScriptedCluster, cluster: SlurmCluster) -> None:
        self._world = world
        self._local = LocalRunner(cluster)
        self._sent = 0

    target = "scripted:22"
    login_user = "jobtables"

    @property
    def commands_sent(self) -> int:
        return self._sent

    async def run(self, argv: Sequence[str], *, stdin: str | None = None,
                  check: bool = True) -> CommandResult:
        self._sent += 1
        args = tuple(argv)
        self._world.calls.append(args)
        w = self._world
        if args == ("squeue", "--json"):
            if not w.json_ok:
                return CommandResult(args, 1, "", "squeue: unrecognized option '--json'")
            return CommandResult(args, 0, w.squeue, "")
        if "squeue" in args:
            plain = as_plain_format((REAL / "squeue_plain_early.txt").read_text(), args[-1])
            return CommandResult(args, 0, plain, "")
        if args[0] == "scontrol":
            return CommandResult(args, 0, (REAL / "scontrol_early.txt").read_text(), "")
        if args[0] == "sacct":
            return CommandResult(args, 1, "", "Slurm accounting storage is disabled")
        if args[0] == "python3" and w.collector_fails:
            return CommandResult(args, 1, "", "Killed")
        if args[0] == "python3":
            w.scripts.append(stdin or "")
            return await run_with_path(args, stdin or "", w.bin)
        return await self._local.run(argv, stdin=stdin, check=check)

    async def aclose(self) -> None:
        return None


def _json_calls(calls: Path) -> list[str]:
    """The stand-in squeue's ``--json`` runs (not the collector's fast listings)."""
    return [c for c in calls.read_text().splitlines() if "--json" in c]


def _cluster(**over: object) -> SlurmCluster:
    fields: dict[str, object] = {"name": "c", "host": "h", "known_hosts": "/dev/null",
                                 "recent_hours": 1.0}
    fields.update(over)
    return SlurmCluster(**fields)  # type: ignore[arg-type]


async def test_sacct_absence_is_remembered(tmp_path: Path) -> None:
    """Accounting disabled: tried once, then never again by the same probe."""
    world = ScriptedCluster(tmp_path)
    probe = SlurmProbe(_cluster(), clock=lambda: NOW, runner_factory=world.factory)
    first = await probe.collect()
    second = await probe.collect()
    assert (first.status, second.status) == ("ok", "ok")
    # collector (running squeue inside) + sacct, then the collector alone
    assert (first.round_trips, second.round_trips) == (2, 1)
    assert sum(c[0] == "sacct" for c in world.calls) == 1 and not probe.sacct_available
    assert _json_calls(world.squeue_calls) == ["--json", "--json"]


async def test_plain_squeue_fallback_is_remembered(tmp_path: Path) -> None:
    """No --json: the plain format with epoch times is used now and on later sweeps."""
    world = ScriptedCluster(tmp_path, json_ok=False)
    probe = SlurmProbe(_cluster(), clock=lambda: NOW, runner_factory=world.factory)
    first = await probe.collect()
    second = await probe.collect()
    assert first.status == "ok" and not probe.json_supported
    # --json was tried once, inside the first collector run; then the two-step path.
    assert _json_calls(world.squeue_calls) == ["--json"]
    # first: collector (squeue --json inside), squeue --json alone, squeue -o, scontrol (squeue
    # -o has no StdOut), the collector; later: squeue -o, scontrol, the collector.
    assert (first.round_trips, second.round_trips) == (5, 3)
    assert sum(c[0] == "scontrol" for c in world.calls) == 2
    plain = [c for c in world.calls if "squeue" in c and "--json" not in c]
    assert plain[0][:2] == ("env", "SLURM_TIME_FORMAT=%s")
    jobs = {j.record.job_id: j.record for j in first.jobs}
    assert jobs[IDS["successor"]].depends_on == (IDS["timeout"],)
    assert jobs[IDS["ok"]].stdout_path is not None  # from scontrol, squeue -o has none


async def test_pending_jobs_are_not_sent_to_the_collector(tmp_path: Path) -> None:
    """A PENDING job has no log yet: no LogFetch, so never log-missing."""
    world = ScriptedCluster(tmp_path)
    facts = await SlurmProbe(_cluster(), clock=lambda: NOW,
                             runner_factory=world.factory).collect()
    succ = next(j for j in facts.jobs if j.record.job_id == IDS["successor"])
    assert succ.record.state is JobState.PENDING and succ.log is None
    ran = next(j for j in facts.jobs if j.record.job_id == IDS["running"])
    assert ran.log is not None
    assert ran.log.requested_path == f"{ran.record.workdir}/slurm-{IDS['running']}.out"


async def test_failed_collector_is_fetch_failed_not_unreachable(tmp_path: Path) -> None:
    """The collector failing every time leaves the cluster ok and every started job's log failed.

    The one-trip run fails first: squeue then runs on its own and the collector is tried
    twice more for the selected jobs.
    """
    world = ScriptedCluster(tmp_path, collector_fails=True)
    facts = await SlurmProbe(_cluster(), clock=lambda: NOW,
                             runner_factory=world.factory).collect()
    assert facts.status == "ok"
    assert sum(c[0] == "python3" for c in world.calls) == 3
    assert world.calls.count(("squeue", "--json")) == 1
    started = [j for j in facts.jobs if j.record.state is not JobState.PENDING]
    assert started and all(j.log is not None and j.log.status == "failed"
                           and j.log.attempts == 2 for j in started)


async def test_selection_by_user_and_recency(tmp_path: Path) -> None:
    """Only the configured users' jobs, active or ended within recent_hours, are reported."""
    world = ScriptedCluster(tmp_path)
    later = NOW + timedelta(hours=2)
    nobody = await SlurmProbe(_cluster(users=("alice",)), clock=lambda: NOW,
                              runner_factory=world.factory).collect()
    assert nobody.jobs == ()
    late = await SlurmProbe(_cluster(), clock=lambda: later,
                            runner_factory=world.factory).collect()
    states = {j.record.state for j in late.jobs}
    assert states <= {JobState.RUNNING, JobState.PENDING}


async def test_round_trips_do_not_grow_with_jobs(tmp_path: Path) -> None:
    """1 job or 300 jobs: the same commands are sent."""
    base = json.loads((REAL / "squeue_early.json").read_text())
    template = next(j for j in base["jobs"] if j["job_state"] == "RUNNING")
    trips = []
    for count in (1, 300):
        jobs = [dict(template, job_id=900000 + i) for i in range(count)]
        world = ScriptedCluster(tmp_path / str(count), squeue=json.dumps({**base, "jobs": jobs}))
        facts = await SlurmProbe(_cluster(), clock=lambda: NOW,
                                 runner_factory=world.factory).collect()
        assert len(facts.jobs) == count
        trips.append(facts.round_trips)
    assert trips[0] == trips[1] == 2  # fresh probe: the collector, and sacct tried once


def _request_of(script: str) -> dict[str, Any]:
    """The request a built collector script carries (its last line is ``main('<json>')``)."""
    last = script.rstrip().splitlines()[-1]
    assert last.startswith("main(")
    request: dict[str, Any] = json.loads(ast.literal_eval(last[len("main("):-1]))
    return request


async def test_warm_sweep_is_one_command(tmp_path: Path) -> None:
    """A warm sweep sends only the collector; squeue runs inside it and logs come back."""
    world = ScriptedCluster(tmp_path)
    probe = SlurmProbe(_cluster(), clock=lambda: NOW, runner_factory=world.factory)
    await probe.collect()
    world.calls.clear()
    facts = await probe.collect()
    assert world.calls == [("python3", "-I", "-")] and facts.round_trips == 1
    request = _request_of(world.scripts[-1])
    since = request["squeue"].pop("since")  # the recent_hours cutoff, as an epoch
    assert since == (NOW - timedelta(hours=probe.cluster.recent_hours)).timestamp()
    assert request["squeue"] == {"argv": ["squeue", "--json"], "users": ["jobtables"],
                                 "listing": True, "keys": list(SQUEUE_JOB_KEYS)}
    scontrol = parse_scontrol_all((REAL / "scontrol_early.txt").read_text())
    started = [j for j in facts.jobs if j.record.state is not JobState.PENDING]
    assert started and all(j.log is not None for j in started)
    for job in started:
        assert job.log is not None
        assert job.log.requested_path == scontrol[job.record.job_id]["StdOut"]


async def test_unexpandable_pattern_falls_back_to_scontrol(tmp_path: Path) -> None:
    """A log pattern with a token 22.05 does not know (`%b`): scontrol, then a second
    collector run for that job only."""
    base = json.loads((REAL / "squeue_early.json").read_text())
    for job in base["jobs"]:
        if str(job["job_id"]) == IDS["running"]:
            job["standard_output"] = "%b_%j.out"  # not a 22.05 token: scontrol's word
    world = ScriptedCluster(tmp_path, squeue=json.dumps(base))
    probe = SlurmProbe(_cluster(), clock=lambda: NOW, runner_factory=world.factory)
    await probe.collect()
    world.calls.clear()
    world.scripts.clear()
    facts = await probe.collect()
    assert [c[0] for c in world.calls] == ["python3", "scontrol", "python3"]
    assert facts.round_trips == 3
    second = _request_of(world.scripts[1])
    assert "squeue" not in second
    assert [j["id"] for j in second["jobs"]] == [IDS["running"]]
    ran = next(j for j in facts.jobs if j.record.job_id == IDS["running"])
    expected = parse_scontrol_all((REAL / "scontrol_early.txt").read_text())[IDS["running"]]
    assert ran.log is not None and ran.log.requested_path == expected["StdOut"]
    others = [j for j in facts.jobs if j.record.job_id != IDS["running"]
              and j.record.state is not JobState.PENDING]
    assert others and all(j.log is not None for j in others)


async def test_old_unexpandable_job_costs_no_round_trip(tmp_path: Path) -> None:
    """An unexpandable (`%b`) job that ended before `recent_hours` is not reported, so it
    asks no scontrol."""
    base = json.loads((REAL / "squeue_early.json").read_text())
    for job in base["jobs"]:
        if str(job["job_id"]) == IDS["ok"]:
            job["standard_output"] = "%b_%j.out"
    world = ScriptedCluster(tmp_path, squeue=json.dumps(base))
    later = NOW + timedelta(hours=2)
    probe = SlurmProbe(_cluster(), clock=lambda: later, runner_factory=world.factory)
    await probe.collect()
    world.calls.clear()
    facts = await probe.collect()
    assert world.calls == [("python3", "-I", "-")] and facts.round_trips == 1
    assert IDS["ok"] not in {j.record.job_id for j in facts.jobs}


async def test_capabilities_are_reprobed_after_a_failure(tmp_path: Path) -> None:
    """A failed --json (stderr mentioning a plugin) and absent accounting are believed for an
    hour, then probed again: a fixed cluster gets --json back, never off for good."""
    world = ScriptedCluster(tmp_path / "a", json_ok=False)
    world.bin = fake_squeue_bin(tmp_path / "b", world.squeue,
                                error="squeue: error: cannot load serializer plugin")
    clock = [NOW]
    probe = SlurmProbe(_cluster(), clock=lambda: clock[0], runner_factory=world.factory)
    first = await probe.collect()
    assert first.status == "ok" and not probe.json_supported and not probe.sacct_available
    clock[0] += timedelta(minutes=30)
    await probe.collect()  # within the hour: neither is tried again
    assert _json_calls(tmp_path / "b" / "squeue.calls") == ["--json"]
    assert sum(c[0] == "sacct" for c in world.calls) == 1
    world.json_ok = True
    world.bin = fake_squeue_bin(tmp_path / "c", world.squeue)  # the cluster got fixed
    clock[0] += timedelta(minutes=31)
    again = await probe.collect()
    assert again.status == "ok" and probe.json_supported
    assert _json_calls(tmp_path / "c" / "squeue.calls") == ["--json"]
    assert sum(c[0] == "sacct" for c in world.calls) == 2  # re-probed too (still absent)
    assert again.round_trips == 2
