"""Issue 5 end to end: one sweep over a real SLURM cluster (over SSH) and a Kubernetes cluster.

The SLURM side is the local 22.05 cluster: a real ``sbatch`` job (user ``jobtables``) prints a
verl 0.9.1 console log and sleeps. The Kubernetes side is the API stand-in of ``tests/k8s``
(real HTTP, real kubeconfig, real ``kubernetes_asyncio`` client) holding a running RL Job whose
pod log is the healthy first 19 steps of a SkyRL run. Both clusters are in one config TOML; the
real :class:`bot.sweep.Sweeper` and the ``jobtables sweep`` CLI read it.

Only this module's two jobs are in the RL bucket (``[buckets] rl``), so the RL table holds
exactly them even though the test user has other jobs on the shared SLURM cluster.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import sys
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from bot.config_file import load_config
from bot.sweep import Sweeper
from bot.sweep_result import SweepResult
from probes.models import JobState
from probes.slurm.transport import SshRunner
from report.render import render_tables
from report.tables import RenderedTable
from tests.probes.kubernetes.standin import KubeStandIn
from tests.probes.kubernetes.test_k8s_probe import add_running
from tests.probes.slurm.conftest import SlurmEnv
from tests.probes.slurm.test_e2e import _cleanup, _config_toml, _wait_for

ROOT = Path(__file__).resolve().parents[2]
FIX = ROOT / "tests" / "fixtures"
VERL_LOG = FIX / "verl-0.9.1" / "console.log"
SKYRL_LOG = FIX / "skyrl-rebuilt" / "console_v03_collapse.log"
K8S = "beta"
SLURM_SCRIPT = """#!/bin/bash
cat "{log}"
exec sleep 600
"""


def skyrl_healthy_steps() -> str:
    """The SkyRL log up to the end of step 19 (its collapse starts at step 20)."""
    lines = SKYRL_LOG.read_text().splitlines(keepends=True)
    step19 = next(i for i, line in enumerate(lines) if "Step 19:" in line)
    end = next(i for i in range(step19, len(lines)) if "Started: 'step'" in lines[i])
    return "".join(lines[:end])


@dataclass(frozen=True)
class SlurmRun:
    """The module's SLURM job."""

    env: SlurmEnv
    tag: str
    job_id: str
    name: str


async def _submit(env: SlurmEnv, name: str, run_dir: str) -> str:
    runner = SshRunner(env.cluster())
    try:
        await runner.run(["sh", "-c", 'mkdir -p "$1" && cat > "$1/verl.log"', "sh", run_dir],
                         stdin=VERL_LOG.read_text())
        res = await runner.run(
            ["sbatch", "--parsable", "--time=15", "-J", name, "--chdir", run_dir],
            stdin=SLURM_SCRIPT.format(log=f"{run_dir}/verl.log"))
    finally:
        await runner.aclose()
    return res.stdout.strip().split(";")[0]


@pytest.fixture(scope="module")
def slurm_run(slurm_env: SlurmEnv) -> Iterator[SlurmRun]:
    """One running verl job on the real cluster; scancelled afterwards."""
    tag = f"mix{secrets.token_hex(3)}"
    run_dir = f"{slurm_env.scratch}/mixed-{tag}"
    ids: dict[str, str] = {}
    try:
        ids["verl"] = asyncio.run(_submit(slurm_env, f"rl-verl-{tag}", run_dir))
        asyncio.run(_wait_for(slurm_env, ids, {"verl": {JobState.RUNNING}}, bound_s=90,
                              settle_s=1))
        yield SlurmRun(slurm_env, tag, ids["verl"], f"rl-verl-{tag}")
    finally:
        asyncio.run(_cleanup(slurm_env, ids, run_dir))


@dataclass(frozen=True)
class Mixed:
    """Both clusters configured in one TOML."""

    config: Path
    slurm: SlurmRun
    k8s_job: str


@pytest.fixture
async def mixed(slurm_run: SlurmRun, tmp_path: Path) -> AsyncIterator[Mixed]:
    """The stand-in serving a running SkyRL job, and the two-cluster config."""
    standin = KubeStandIn(jobsets={})
    await standin.start()
    try:
        k8s_job = f"rl-grpo-{slurm_run.tag}"
        add_running(standin, k8s_job, skyrl_healthy_steps(), labels={"user": "alice"})
        kubeconfig = standin.write_kubeconfig(tmp_path / "kubeconfig")
        config = _config_toml(slurm_run.env, tmp_path)
        config.write_text(config.read_text() + f"""
[[clusters]]
name = "{K8S}"
kind = "kubernetes"
kubeconfig = "{kubeconfig}"
context = "standin"
namespace = "ml"
label_selector = "team=post-training"

[buckets]
rl = ["^{slurm_run.name}$", "^{k8s_job}$"]
""")
        yield Mixed(config, slurm_run, k8s_job)
    finally:
        await standin.stop()


def job_cells(table: RenderedTable) -> list[str]:
    """The Job column, one entry per row, with a cell wrapped over several lines joined."""
    lines = [line.split("│")[1].strip() for line in table.text.splitlines()
             if line.startswith("│")][table.header_lines:]
    cells, at = [], 0
    for height in table.row_heights:
        cells.append("".join(lines[at:at + height]))
        at += height
    return cells


async def sweep_once(config: Path) -> SweepResult:
    sweeper = Sweeper(lambda: load_config(config))
    try:
        return await sweeper.sweep()
    finally:
        await sweeper.aclose()


async def test_one_rl_table_holds_both_clusters(mixed: Mixed) -> None:
    """One sweep: both clusters ok, one RL table with each run's cell prefixed by its cluster."""
    result = await sweep_once(mixed.config)
    assert {(c.name, c.status) for c in result.report.clusters} == {
        ("local22", "ok"), (K8S, "ok")}
    rl = [t for t in render_tables(result.report, result.details, width=140) if t.bucket == "rl"]
    (table,) = rl
    assert sorted(job_cells(table)) == sorted([f"local22/{mixed.slurm.name}",
                                               f"{K8S}/{mixed.k8s_job}"])
    rows = {(j.cluster, j.job_id): j for j in result.report.jobs if j.bucket == "rl"}
    assert set(rows) == {("local22", mixed.slurm.job_id), (K8S, mixed.k8s_job)}
    slurm_row, k8s_row = rows[("local22", mixed.slurm.job_id)], rows[(K8S, mixed.k8s_job)]
    assert slurm_row.step == 40 and "entropy" in slurm_row.metrics
    assert k8s_row.step == 19 and "entropy" in k8s_row.metrics
    assert k8s_row.verdict == "healthy" and "collapse" not in k8s_row.flags


async def test_cli_json_lists_both_runs_as_rl(mixed: Mixed) -> None:
    """`jobtables sweep --format json` over the same config lists both runs with bucket rl."""
    # A child process (bot.cli.main, as the console script runs it), awaited without blocking
    # this loop, which keeps serving the stand-in; in-process main() would also reconfigure
    # logging for every later test.
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bot.cli", "sweep", "--format", "json", "--config",
        str(mixed.config), cwd=ROOT, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE)
    async with asyncio.timeout(240):
        stdout, stderr = await proc.communicate()
    assert proc.returncode == 0, stderr.decode()
    out = stdout.decode()
    report = json.loads(out)
    assert {c["name"]: c["status"] for c in report["clusters"]} == {"local22": "ok", K8S: "ok"}
    rl = {(j["cluster"], j["job_id"]): j for j in report["jobs"] if j["bucket"] == "rl"}
    assert set(rl) == {("local22", mixed.slurm.job_id), (K8S, mixed.k8s_job)}
    assert rl[("local22", mixed.slurm.job_id)]["name"] == mixed.slurm.name
    assert rl[("local22", mixed.slurm.job_id)]["state"] == "RUNNING"
    assert rl[(K8S, mixed.k8s_job)]["state"] == "RUNNING"
