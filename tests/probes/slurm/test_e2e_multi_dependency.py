"""End to end on the real SLURM 22.05 cluster: a restart waiting on several jobs continues each.

SLURM prints ``-d afterany:A:B`` as ``afterany:A(unfulfilled),afterany:B(unfulfilled)`` and
deletes each met element: once A timed out the successor reads ``afterany:B(unfulfilled)``,
and once B did too ``(null)``, eligible at B's end. An OR list ``afterany:A?afterany:B`` is
cleared at the first end: the successor runs beside B. Before, only the predecessor whose end
released the successor was linked: A (AND) and B (OR) read 'Walltime TIMEOUT; no successor
queued', failed, in a sweep with no memory (``jobtables sweep``).

Real ``--time=1`` jobs (their TIMEOUT brought forward with ``end_now``), each case in its own
workdir, read through ``jobtables sweep --format json`` at both stages: A ended with B still
running, then both ended (and then each predecessor through ``jobtables job ID``). A lone
TIMEOUT beside another run whose own restart (named as that run's) waits on it stays failed.
Only this module's ids are cancelled.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from probes.models import JobState
from probes.slurm.transport import SshRunner
from tests.probes.slurm.conftest import SlurmEnv
from tests.probes.slurm.test_e2e import (
    ROOT,
    _cleanup,
    _cli_sweep,
    _config_toml,
    _wait_for,
    end_now,
)

BODY = "#!/bin/bash\necho 'step 1'\nsleep 600\n"

JOBS: tuple[tuple[str, str, str, str], ...] = (
    # key, name (tag appended), workdir, dependency (keys put back as ids)
    ("and_a", "rl-trainer", "and", ""),
    ("and_b", "rl-prep", "and", ""),
    ("and_c", "rl-resume", "and", "afterany:{and_a}:{and_b}"),
    ("or_a", "rl-arm-one", "or", ""),
    ("or_b", "rl-arm-two", "or", ""),
    ("or_c", "rl-next", "or", "afterany:{or_a}?afterany:{or_b}"),
    ("lone", "rl-lone", "other", ""),
    ("other", "rl-other", "other", ""),
    ("other_r2", "rl-other", "other", "afterany:{other}"),
)


@dataclass
class Sweeps:
    ids: dict[str, str]
    first: dict[str, dict[str, Any]]
    """Rows by key once A, the OR list's first and the lone job ended (B still running)."""
    second: dict[str, dict[str, Any]]
    """Rows by key once every predecessor ended."""
    one: dict[str, dict[str, Any]]
    """The predecessors' rows as ``jobtables job ID`` reads each then."""


async def _submit(env: SlurmEnv, run_dir: str, tag: str) -> dict[str, str]:
    ids: dict[str, str] = {}
    runner = SshRunner(env.cluster())
    try:
        await runner.run(["mkdir", "-p", *(f"{run_dir}/{d}" for d in ("and", "or", "other"))])
        await runner.run(["sh", "-c", f"cat > {run_dir}/job.sbatch"], stdin=BODY)
        for key, name, sub, dependency in JOBS:
            suffix = "-r2" if key.endswith("_r2") else ""
            dep = [f"--dependency={dependency.format(**ids)}"] if dependency else []
            res = await runner.run(["sbatch", "--parsable", "--time=1", "-J",
                                    f"{name}-{tag}{suffix}", "--chdir", f"{run_dir}/{sub}",
                                    "-o", f"{run_dir}/{sub}/slurm-%j.out", *dep,
                                    f"{run_dir}/job.sbatch"])
            ids[key] = res.stdout.strip().split(";")[0]
    finally:
        await runner.aclose()
    return ids


def _job_row(config: Path, job_id: str) -> dict[str, Any]:
    run = subprocess.run([sys.executable, "-m", "bot.cli", "job", job_id, "--format", "json",
                          "--config", str(config)], capture_output=True, text=True, cwd=ROOT,
                         timeout=240, check=False)
    assert run.returncode == 0, run.stderr
    row: dict[str, Any] = json.loads(run.stdout)  # the job's contract object, and more
    return row


def _rows(config: Path, ids: dict[str, str]) -> dict[str, dict[str, Any]]:
    by_id = {j["job_id"]: j for j in _cli_sweep(config)["jobs"]}
    return {key: by_id[job_id] for key, job_id in ids.items() if job_id in by_id}


@pytest.fixture(scope="module")
def sweeps(slurm_env: SlurmEnv, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sweeps]:
    tag = f"m{secrets.token_hex(3)}"
    run_dir = f"{slurm_env.scratch}/multi-{tag}"
    config = _config_toml(slurm_env, tmp_path_factory.mktemp("multi"))
    ids: dict[str, str] = {}
    try:
        ids.update(asyncio.run(_submit(slurm_env, run_dir, tag)))
        running = {JobState.RUNNING}
        asyncio.run(_wait_for(slurm_env, ids, {k: running for k in (
            "and_a", "and_b", "or_a", "or_b", "lone", "other")}, bound_s=120, settle_s=0))
        end_now([ids["and_a"], ids["or_a"], ids["lone"]])
        asyncio.run(_wait_for(slurm_env, ids, {
            "and_a": {JobState.TIMEOUT}, "or_a": {JobState.TIMEOUT},
            "lone": {JobState.TIMEOUT}, "and_c": {JobState.PENDING}, "or_c": running,
            "and_b": running, "or_b": running, "other_r2": {JobState.PENDING},
        }, bound_s=120, settle_s=1))
        first = _rows(config, ids)
        end_now([ids["and_b"], ids["or_b"], ids["other"]])
        asyncio.run(_wait_for(slurm_env, ids, {
            "and_b": {JobState.TIMEOUT}, "or_b": {JobState.TIMEOUT},
            "and_c": running, "or_c": running | {JobState.TIMEOUT},
        }, bound_s=120, settle_s=1))
        second = _rows(config, ids)
        one = {key: _job_row(config, ids[key]) for key in ("and_a", "and_b", "or_b", "lone")}
        yield Sweeps(ids, first, second, one)
    finally:
        asyncio.run(_cleanup(slurm_env, ids, run_dir))


def _continued(row: dict[str, Any], successor: str) -> None:
    assert row["successor"] == successor, (row["job_id"], row["trend"])
    assert "chain-restart" in row["flags"] and row["verdict"] == "restarting", row
    assert f"normal chain restart → {successor}" in row["trend"], row["trend"]


def test_slurm_drops_a_met_element_of_an_and_list(sweeps: Sweeps) -> None:
    """The real format: once A ended its successor names B only."""
    first = sweeps.first
    assert first["and_a"]["state"] == "TIMEOUT" and first["and_c"]["state"] == "PENDING"


def test_each_predecessor_of_an_and_list_is_continued(sweeps: Sweeps) -> None:
    """``afterany:A:B``: A while the successor still waits on B, and both once it runs."""
    c = sweeps.ids["and_c"]
    _continued(sweeps.first["and_a"], c)
    _continued(sweeps.second["and_a"], c)
    _continued(sweeps.second["and_b"], c)
    _continued(sweeps.one["and_a"], c)
    _continued(sweeps.one["and_b"], c)


def test_each_predecessor_of_an_or_list_is_continued(sweeps: Sweeps) -> None:
    """``afterany:A?afterany:B``: released at A's end, it runs beside B, and continues both."""
    c = sweeps.ids["or_c"]
    _continued(sweeps.first["or_a"], c)
    _continued(sweeps.second["or_a"], c)
    _continued(sweeps.second["or_b"], c)
    _continued(sweeps.one["or_b"], c)


def test_another_run_s_restart_continues_no_lone_timeout(sweeps: Sweeps) -> None:
    """The lone TIMEOUT's workdir holds another run's restart, named as that run's: no
    restart of this one, failed; the other run's own TIMEOUT is continued by it."""
    for lone in (sweeps.first["lone"], sweeps.second["lone"], sweeps.one["lone"]):
        assert lone["successor"] is None and lone["verdict"] == "failed", lone["trend"]
    _continued(sweeps.second["other"], sweeps.ids["other_r2"])
