"""A Kubernetes job deleted between two `jobtables sweep` runs is a silent wedge (CONTRACT §6:
the job record disappeared), though each run is a new process.

Found driving the CLI against the API stand-in: a running Job listed by one `jobtables sweep`
and deleted (Job and pod) before the next was simply absent from the second report, and
`jobtables job NAME` said it was in no report: the probe's memory of the jobs it saw live died
with the process (the bot keeps it in Redis; the CLI kept none). The CLI now keeps it in a file
per cluster (``bot.cli_memory``), named by the API server and selection, so another server
behind the same config path starts afresh.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from tests.probes.kubernetes.builders import make_job, make_pod
from tests.probes.kubernetes.standin import KubeStandIn

ROOT = Path(__file__).resolve().parents[2]
STEPS = "step:1 - actor/entropy:0.5 - actor/grad_norm:0.2 - critic/score/mean:0.4\n"


def _config(tmp_path: Path, standin: KubeStandIn) -> Path:
    kubeconfig = standin.write_kubeconfig(tmp_path / "kubeconfig")
    path = tmp_path / "jobtables.toml"
    path.write_text(f'[[clusters]]\nname = "beta"\nkind = "kubernetes"\n'
                    f'kubeconfig = "{kubeconfig}"\ncontext = "standin"\nnamespace = "ml"\n'
                    'request_timeout_s = 5\nrecent_hours = 87600\n')
    return path


def _add_running(standin: KubeStandIn, name: str) -> None:
    standin.jobs[name] = make_job(name, active=1)
    standin.pods[f"{name}-0"] = make_pod(f"{name}-0", name)
    standin.logs[f"{name}-0"] = STEPS


async def _cli(tmp_path: Path, *argv: str) -> Any:
    """``jobtables ARGV --format json`` in a child process (this loop keeps serving the
    stand-in), its memory under ``tmp_path``; the parsed JSON."""
    env = {**os.environ, "JOBTABLES_STATE_DIR": str(tmp_path / "state")}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bot.cli", *argv, "--format", "json", "--config",
        str(tmp_path / "jobtables.toml"), cwd=ROOT, env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    async with asyncio.timeout(120):
        stdout, stderr = await proc.communicate()
    assert proc.returncode == 0, stderr.decode()
    return json.loads(stdout)


def _rows(report: Any) -> dict[str, tuple[str, list[str]]]:
    return {job["job_id"]: (job["state"], job["flags"]) for job in report["jobs"]}


async def test_a_job_deleted_between_two_cli_sweeps_is_a_silent_wedge(tmp_path: Path) -> None:
    """Sweep, delete the running Job and its pod, sweep again: the job is FAILED
    ``silent-wedge`` (and stays so at the sweep after); `job NAME` answers it the same."""
    standin = KubeStandIn(jobsets={})
    await standin.start()
    try:
        _config(tmp_path, standin)
        _add_running(standin, "rl-gone")
        _add_running(standin, "rl-stays")
        first = _rows(await _cli(tmp_path, "sweep"))
        assert first["rl-gone"][0] == "RUNNING"
        del standin.jobs["rl-gone"], standin.pods["rl-gone-0"]
        second = _rows(await _cli(tmp_path, "sweep"))
        assert second["rl-gone"] == ("FAILED", ["silent-wedge"]), second
        assert second["rl-stays"][0] == "RUNNING"
        assert _rows(await _cli(tmp_path, "sweep"))["rl-gone"] == ("FAILED", ["silent-wedge"])
        job = await _cli(tmp_path, "job", "rl-gone")
        assert (job["state"], job["flags"]) == ("FAILED", ["silent-wedge"]), job
    finally:
        await standin.stop()


async def test_a_memory_older_than_an_hour_is_not_compared_with(tmp_path: Path) -> None:
    """Sweep, then two hours pass (the memory's mtime set back) and the Job is gone: it may
    have completed and been garbage-collected (``ttlSecondsAfterFinished``) in the gap, so it
    is not reported vanished (a false FAILED would say resubmit)."""
    standin = KubeStandIn(jobsets={})
    await standin.start()
    try:
        _config(tmp_path, standin)
        _add_running(standin, "rl-ttl")
        assert "rl-ttl" in _rows(await _cli(tmp_path, "sweep"))
        del standin.jobs["rl-ttl"], standin.pods["rl-ttl-0"]
        (memory,) = (tmp_path / "state").iterdir()
        old = time.time() - 2 * 3600
        os.utime(memory, (old, old))
        assert _rows(await _cli(tmp_path, "sweep")) == {}
    finally:
        await standin.stop()


async def test_another_api_server_behind_the_same_config_starts_afresh(tmp_path: Path) -> None:
    """The same cluster name and kubeconfig path, now naming another API server without the
    job: nothing is reported vanished (that server never had it)."""
    first = KubeStandIn(jobsets={})
    await first.start()
    try:
        _config(tmp_path, first)
        _add_running(first, "rl-elsewhere")
        assert "rl-elsewhere" in _rows(await _cli(tmp_path, "sweep"))
    finally:
        await first.stop()
    second = KubeStandIn(jobsets={})
    await second.start()
    try:
        _config(tmp_path, second)
        assert _rows(await _cli(tmp_path, "sweep")) == {}
    finally:
        await second.stop()


async def test_a_memory_that_is_no_json_object_is_no_memory(tmp_path: Path) -> None:
    """A memory file holding valid JSON that is no object (a list, a string: a hand edit, or
    another tool's file under the state dir's name) is no memory: the cluster is still read,
    not 'probe error: AttributeError', and the next sweep writes a good memory over it."""
    standin = KubeStandIn(jobsets={})
    await standin.start()
    try:
        _config(tmp_path, standin)
        _add_running(standin, "rl-live")
        assert "rl-live" in _rows(await _cli(tmp_path, "sweep"))
        (memory,) = (tmp_path / "state").iterdir()
        for text in ("[]", '"seen"'):
            memory.write_text(text)
            report = await _cli(tmp_path, "sweep")
            assert [c["status"] for c in report["clusters"]] == ["ok"], report["clusters"]
            assert _rows(report)["rl-live"][0] == "RUNNING"
            assert isinstance(json.loads(memory.read_text()), dict)
    finally:
        await standin.stop()
