"""Hostile job names and workdirs from squeue travel as data only, never into a command line.

A job's name and working directory are chosen by whoever submitted it. On the one-trip path
they never leave the login node (the collector reads them from the squeue it runs and expands
paths there); on the two-step path they flow from ``squeue --json`` into the collector request
(log path expansion, checkpoint and trial roots). This checks, through SlurmProbe with a
recording runner and the real collector run locally (a stand-in ``squeue`` first on its PATH),
that the argv sent is the fixed command set and the request rides in the script as one string
literal that decodes back to the exact hostile text.
"""

from __future__ import annotations

import ast
import getpass
import json
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path

import pytest

from probes.config import SlurmCluster
from probes.remote.stdio_pattern import SQUEUE_JOB_KEYS
from probes.slurm.probe import SlurmProbe
from probes.slurm.transport import CommandResult, Runner
from tests.probes.slurm.conftest import fake_squeue_bin, run_with_path

NOW = datetime(2026, 11, 30, 16, 0, tzinfo=UTC)
USER = getpass.getuser()
"""The job's owner: the collector reads only files its user owns, and the test wrote them."""


class RecordingCluster:
    """Serves a fixed ``squeue --json``; records every argv and stdin; runs python3 locally."""

    def __init__(self, squeue: str, tmp: Path, *, one_trip_fails: bool = False) -> None:
        self.squeue = squeue
        self.bin = fake_squeue_bin(tmp, squeue)
        self.one_trip_fails = one_trip_fails
        self.calls: list[tuple[tuple[str, ...], str | None]] = []

    def factory(self, cluster: SlurmCluster) -> Runner:
        return _Runner(self, cluster)


class _Runner:
    target = "recorder:22"
    login_user = USER

    def __init__(self, world: RecordingCluster, cluster: SlurmCluster) -> None:
        self._world = world

    @property
    def commands_sent(self) -> int:
        return len(self._world.calls)

    async def run(self, argv: Sequence[str], *, stdin: str | None = None,
                  check: bool = True) -> CommandResult:
        args = tuple(argv)
        self._world.calls.append((args, stdin))
        if args == ("squeue", "--json"):
            return CommandResult(args, 0, self._world.squeue, "")
        if args[0] == "python3":
            if self._world.one_trip_fails and '"squeue"' in (stdin or "").splitlines()[-1]:
                return CommandResult(args, 1, "", "Killed")  # -> squeue, then the collector
            return await run_with_path(args, stdin or "", self._world.bin)
        return CommandResult(args, 1, "", "Slurm accounting storage is disabled")

    async def aclose(self) -> None:
        return None


def _request_in(script: str) -> dict[str, object]:
    """The collector request: the script's last statement must be ``main(<one str literal>)``."""
    last = ast.parse(script).body[-1]
    assert isinstance(last, ast.Expr) and isinstance(last.value, ast.Call)
    assert isinstance(last.value.func, ast.Name) and last.value.func.id == "main"
    (arg,) = last.value.args
    assert isinstance(arg, ast.Constant) and isinstance(arg.value, str)
    request: dict[str, object] = json.loads(arg.value)
    return request


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    """A scratch directory with a short path: the log's file name holds it three times, and
    pytest's own (longer under xdist: ``.../popen-gw1/...``) made that name too long (255)."""
    path = Path(tempfile.mkdtemp(prefix="jt-", dir="/tmp"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.mark.parametrize("one_trip", [True, False])
async def test_hostile_name_and_workdir_stay_data(short_tmp: Path, one_trip: bool) -> None:
    """A name and workdir full of quotes, `$()`, `;` and newlines reach no argv and no shell."""
    tmp_path = short_tmp
    marker = tmp_path / "p"  # short: the log file name holds this path three times
    name = f"x'; rm -rf ~; touch {marker}; echo '\n$(touch {marker})`touch {marker}`"
    workdir = tmp_path / f"w'; touch {marker} #" / f"$(touch {marker})\nnext line"
    workdir.mkdir(parents=True)
    log = workdir / f"{name.replace('/', '_')}-77.out"
    log.write_text("step 1\nstep 2\n")
    squeue = json.dumps({"jobs": [{
        "job_id": 77, "name": name, "user_name": USER, "job_state": "RUNNING",
        "start_time": int(NOW.timestamp()) - 60, "current_working_directory": str(workdir),
        "standard_output": f"{workdir}/" + name.replace("/", "_") + "-%j.out",
    }]})
    world = RecordingCluster(squeue, tmp_path / "fake", one_trip_fails=not one_trip)
    cluster = SlurmCluster(name="c", host="h", known_hosts="/dev/null",
                           checkpoint_roots=("{workdir}/ckpt", "{workdir}/ckpt/{name}"),
                           trial_roots=("/scratch/{user}/{name}",))
    facts = await SlurmProbe(cluster, clock=lambda: NOW, runner_factory=world.factory).collect()

    argvs = [argv for argv, _ in world.calls]
    expected = {"sacct", "python3"} | (set() if one_trip else {"squeue"})
    assert {a[0] for a in argvs} == expected
    for argv in argvs:
        assert not any(part in el for el in argv for part in ("touch", "rm -rf", "$(", "'"))
    script = [stdin for argv, stdin in world.calls if argv == ("python3", "-I", "-")][-1]
    assert script is not None
    request = _request_in(script)
    if one_trip:  # only the users and the root templates travel; the login node fills them
        assert isinstance(request["squeue"].pop("since"), float)
        assert request["jobs"] == [] and request["squeue"] == {
            "argv": ["squeue", "--json"], "users": [USER], "listing": True,
            "keys": list(SQUEUE_JOB_KEYS)}
        assert request["roots"] == {"checkpoint": ["{workdir}/ckpt", "{workdir}/ckpt/{name}"],
                                    "trial": ["/scratch/{user}/{name}"]}
    else:
        (job,) = request["jobs"]  # type: ignore[misc]
        assert job["workdir"] == str(workdir) and job["stdout"] == str(log)
        # The workdir's hostile text travels as data; the name holds a `/`, so it cannot be
        # one path component and the {name} root is not filled (it could leave its root).
        assert job["checkpoint_roots"] == [f"{workdir}/ckpt"]
    assert facts.status == "ok"
    (fetched,) = facts.jobs
    assert fetched.record.name == name
    assert fetched.log is not None and fetched.log.status == "ok"
    assert fetched.log.path == str(log) and "step 2" in fetched.log.text
    assert not marker.exists()
