"""End to end on the real SLURM 22.05 cluster: a grid's numbered cells, ``--begin`` and an
array's ``N_*`` in a restart chain, read through ``jobtables sweep --format json``.

- A cell ``...-1`` timing out beside its sibling ``...-2`` (running, its own restart
  ``...-2-r2`` queued ``afterany`` on it): one name stem, no restart of ``-1``. Before,
  the fallback took ``-2-r2`` (same stem, queued while ``-1`` ran): 'normal chain restart'.
- A numbered resume (``...-1`` then ``...-2`` queued ``afterany`` on it) still continues it.
- ``-d afterany:X:N_*`` with array N still running: once X timed out SLURM prints
  ``afterany:N_*(unfulfilled)``, naming X no more. Before, nothing linked X to it.
- The run's own copy queued with ``--begin=now+10minutes`` (pending ``BeginTime``, eligible
  at that time already): its restart.

Real ``--time=1`` jobs (their TIMEOUT brought forward with ``end_now``), each case in its own
workdir so that no other job's end there explains a release; the sibling and the array's
cases through ``jobtables job ID`` too. Only this module's ids are cancelled.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from probes.models import JobState
from probes.slurm.transport import SshRunner
from tests.probes.slurm.conftest import SlurmEnv
from tests.probes.slurm.test_e2e import _cleanup, _cli_sweep, _config_toml, _wait_for, end_now
from tests.probes.slurm.test_e2e_multi_dependency import _job_row

BODY = "#!/bin/bash\necho 'step 1'\nsleep 600\n"

JOBS: tuple[tuple[str, str, str, tuple[str, ...]], ...] = (
    # key, name ({t}: the tag), workdir, extra sbatch options (keys put back as ids)
    ("cell1", "rl-exp-{t}-1", "grid", ()),
    ("cell2", "rl-exp-{t}-2", "grid", ("--time=5",)),
    ("cell2_r2", "rl-exp-{t}-2-r2", "grid", ("--dependency=afterany:{cell2}",)),
    ("train1", "rl-train-{t}-1", "seq", ()),
    ("train2", "rl-train-{t}-2", "seq", ("--dependency=afterany:{train1}",)),
    ("shards", "rl-shards-{t}", "arr", ("--array=0-1", "--time=5")),
    ("trainer", "rl-trainer-{t}", "arr", ()),
    ("resume", "rl-resume-{t}", "arr", ("--dependency=afterany:{trainer}:{shards}_*",)),
    ("beg", "rl-beg-{t}", "begin", ()),
    ("beg_next", "rl-beg-{t}", "begin", ("--begin=now+10minutes",)),
)


@dataclass
class Swept:
    ids: dict[str, str]
    rows: dict[str, dict[str, Any]]
    """Rows by key once cell1, train1, trainer and beg timed out."""
    dependency: str | None
    """``resume``'s Dependency as squeue printed it then."""
    begin_reason: str | None
    one: dict[str, dict[str, Any]]
    """cell1's and trainer's rows as ``jobtables job ID`` reads each then."""


async def _submit(env: SlurmEnv, run_dir: str, tag: str) -> dict[str, str]:
    ids: dict[str, str] = {}
    runner = SshRunner(env.cluster())
    try:
        await runner.run(["mkdir", "-p", *(f"{run_dir}/{d}" for d in
                                           ("grid", "seq", "arr", "begin"))])
        await runner.run(["sh", "-c", f"cat > {run_dir}/job.sbatch"], stdin=BODY)
        for key, name, sub, extra in JOBS:
            opts = [o.format(**ids) for o in extra]
            res = await runner.run(["sbatch", "--parsable", "--time=1", "-J", name.format(t=tag),
                                    "--chdir", f"{run_dir}/{sub}",
                                    "-o", f"{run_dir}/{sub}/%x-%j.out", *opts,
                                    f"{run_dir}/job.sbatch"])
            ids[key] = res.stdout.strip().split(";")[0]
    finally:
        await runner.aclose()
    return ids


async def _squeue(env: SlurmEnv, job_id: str, field: str) -> str | None:
    runner = SshRunner(env.cluster())
    try:
        res = await runner.run(["squeue", "-h", "-j", job_id, "-O", f"{field}:200"])
    finally:
        await runner.aclose()
    return res.stdout.strip() or None


@pytest.fixture(scope="module")
def swept(slurm_env: SlurmEnv, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Swept]:
    tag = f"s{secrets.token_hex(3)}"
    run_dir = f"{slurm_env.scratch}/siblings-{tag}"
    config = _config_toml(slurm_env, tmp_path_factory.mktemp("siblings"))
    ids: dict[str, str] = {}
    try:
        ids.update(asyncio.run(_submit(slurm_env, run_dir, tag)))
        running = {JobState.RUNNING}
        asyncio.run(_wait_for(slurm_env, ids, {k: running for k in (
            "cell1", "cell2", "train1", "trainer", "beg")}, bound_s=120, settle_s=0))
        end_now([ids[k] for k in ("cell1", "train1", "trainer", "beg")])
        timeout = {JobState.TIMEOUT}
        asyncio.run(_wait_for(slurm_env, ids, {
            "cell1": timeout, "train1": timeout, "trainer": timeout, "beg": timeout,
            "cell2": running, "cell2_r2": {JobState.PENDING}, "resume": {JobState.PENDING},
            "beg_next": {JobState.PENDING},
        }, bound_s=120, settle_s=1))
        by_id = {j["job_id"]: j for j in _cli_sweep(config)["jobs"]}
        dependency = asyncio.run(_squeue(slurm_env, ids["resume"], "Dependency"))
        reason = asyncio.run(_squeue(slurm_env, ids["beg_next"], "Reason"))
        one = {key: _job_row(config, ids[key]) for key in ("cell1", "trainer")}
        yield Swept(ids, {k: by_id[i] for k, i in ids.items() if i in by_id}, dependency,
                    reason, one)
    finally:
        asyncio.run(_cleanup(slurm_env, ids, run_dir))


def _continued(row: dict[str, Any], successor: str) -> None:
    assert row["successor"] == successor, (row["job_id"], row["trend"])
    assert "chain-restart" in row["flags"] and row["verdict"] == "restarting", row
    assert f"normal chain restart → {successor}" in row["trend"], row["trend"]


def test_a_sibling_cell_s_restart_continues_no_timeout_of_another_cell(swept: Swept) -> None:
    for row in (swept.rows["cell1"], swept.one["cell1"]):
        assert row["state"] == "TIMEOUT" and row["successor"] is None, row["trend"]
        assert row["verdict"] == "failed" and "chain-restart" not in row["flags"], row


def test_a_numbered_resume_queued_afterany_continues_its_run(swept: Swept) -> None:
    _continued(swept.rows["train1"], swept.ids["train2"])


def test_a_job_left_waiting_on_an_array_continues_the_timeout(swept: Swept) -> None:
    """SLURM dropped the met element: the resume names the array only."""
    assert swept.dependency == f"afterany:{swept.ids['shards']}_*(unfulfilled)"
    _continued(swept.rows["trainer"], swept.ids["resume"])
    _continued(swept.one["trainer"], swept.ids["resume"])


def test_the_run_s_copy_queued_with_begin_continues_it(swept: Swept) -> None:
    assert swept.begin_reason == "BeginTime"
    _continued(swept.rows["beg"], swept.ids["beg_next"])
