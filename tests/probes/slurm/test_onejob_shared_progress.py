"""``jobtables job ID`` banks a shared-workdir run's saves placed by progress, as the sweep
does, on the real SLURM 22.05 over SSH.

Two jobs of one user run from one directory: a torchtitan run at step 210 whose saves
(``outputs/checkpoint/step-100``, ``step-200``) its log announces without a step (``Saving the
checkpoint``), and an EasyR1 replay at step 20. Only the torchtitan run's progress reaches
those steps, and the other run is known to be below them (``probes.slurm.shared_roots``): the
sweep banks 200 for it. ``jobtables job`` listed the neighbour (52eee3e) but did not read its
log, so the neighbour's progress was unknown and the saves banked for neither (null). The
neighbour's saves are never listed for it. The module cancels only its own jobs and removes
its directory.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from probes.config import SlurmCluster
from probes.slurm.probe import SlurmProbe
from tests.probes.logs.test_easyr1_console import easyr1_log
from tests.probes.logs.test_torchtitan_lines import _run as titan_log
from tests.probes.slurm.conftest import SlurmEnv, cli_json
from tests.probes.slurm.test_e2e_easyr1_console import _wait_logged
from tests.probes.slurm.test_onejob import CountingRunner, _ssh

TITAN = titan_log(210, total=1000)


async def _wait_replayed(env: SlurmEnv, job: str, log: str, text: str, bound_s: float) -> None:
    """Until the job runs and its log holds the whole of ``text`` (bounded)."""
    deadline = time.monotonic() + bound_s
    state = ""
    while time.monotonic() < deadline:
        state = (await _ssh(env, ["squeue", "-h", "-t", "all", "-j", job, "-o", "%T"])).strip()
        if state == "RUNNING":
            size = await _ssh(env, ["sh", "-c", f"cat {log} 2>/dev/null | wc -c"])
            if int(size.strip() or 0) == len(text.encode()):
                return
        await asyncio.sleep(1)
    pytest.fail(f"job {job} did not log its replay within {bound_s}s: {state!r}")


async def _submit(env: SlurmEnv, run_dir: str, tag: str) -> dict[str, str]:
    saves = f"{run_dir}/outputs/checkpoint"
    await _ssh(env, ["mkdir", "-p", f"{saves}/step-100", f"{saves}/step-200"])
    await _ssh(env, ["touch", f"{saves}/step-100/.metadata", f"{saves}/step-200/.metadata"])
    ids = {}
    for key, text in (("easyr1", easyr1_log(20)), ("titan", TITAN)):
        await _ssh(env, ["tee", f"{run_dir}/{key}.log"], stdin=text)
        await _ssh(env, ["tee", f"{run_dir}/{key}.sh"],
                   stdin=f"#!/bin/sh\ncat {run_dir}/{key}.log\nsleep 600\n")
        argv = ["sbatch", "--parsable", "-J", f"rl-{key}-{tag}", "--chdir", run_dir,
                "-o", f"{run_dir}/%x-%j.out", f"{run_dir}/{key}.sh"]
        ids[key] = (await _ssh(env, argv)).strip().split(";")[0]
    return ids


@pytest.fixture(scope="module")
def jobs(slurm_env: SlurmEnv) -> Iterator[dict[str, str]]:
    tag = secrets.token_hex(3)
    run_dir = f"{slurm_env.scratch}/shared-progress-{tag}"
    ids: dict[str, str] = {}
    try:
        ids = asyncio.run(_submit(slurm_env, run_dir, tag))
        log = f"{run_dir}/rl-easyr1-{tag}-{ids['easyr1']}.out"
        asyncio.run(_wait_logged(slurm_env, ids["easyr1"], log, bound_s=120))
        # The torchtitan run too (a busy node may start it after the other).
        log = f"{run_dir}/rl-titan-{tag}-{ids['titan']}.out"
        asyncio.run(_wait_replayed(slurm_env, ids["titan"], log, TITAN, bound_s=120))
        yield ids
    finally:
        asyncio.run(_ssh(slurm_env, ["scancel", *ids.values()]) if ids else asyncio.sleep(0))
        asyncio.run(_ssh(slurm_env, ["rm", "-rf", "--", run_dir]))


def test_the_job_read_banks_what_the_sweep_banks(
    slurm_env: SlurmEnv, jobs: dict[str, str], tmp_path: Path,
) -> None:
    """The torchtitan run banks 200 in ``jobtables job`` as in the sweep; the EasyR1 run banks
    none in either."""
    config = slurm_env.config_toml(tmp_path, recent_hours=1)
    swept = {j["job_id"]: j for j in cli_json(config, "sweep")["jobs"]}
    assert swept[jobs["titan"]]["step"] == 210
    assert swept[jobs["titan"]]["banked_step"] == 200
    assert swept[jobs["easyr1"]]["banked_step"] is None
    titan = cli_json(config, "job", jobs["titan"])
    assert titan["step"] == 210
    assert titan["banked_step"] == 200
    easyr1 = cli_json(config, "job", jobs["easyr1"])
    assert easyr1["step"] == 20 and easyr1["banked_step"] is None


def test_the_neighbours_logs_ride_in_the_second_command(
    slurm_env: SlurmEnv, jobs: dict[str, str],
) -> None:
    """Issue 12: that job only, in at most two commands whatever the cluster's size. The
    neighbour's log is read in command 2 (its listing's own collector run), not a third."""
    runners: list[CountingRunner] = []

    def factory(cluster: SlurmCluster) -> CountingRunner:
        runners.append(CountingRunner(cluster))
        return runners[-1]

    probe = SlurmProbe(slurm_env.cluster(), runner_factory=factory)
    facts = asyncio.run(probe.collect_one(jobs["titan"]))
    (runner,) = runners
    (job,) = facts.jobs
    assert job.checkpoints is not None and job.checkpoints.banked_step == 200
    assert runner.calls == [("python3", "-I", "-")] * 2
    assert facts.round_trips == 2
