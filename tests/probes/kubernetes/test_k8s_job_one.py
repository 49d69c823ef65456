"""``jobtables job NAME`` on Kubernetes reads that job's pod log only.

Found through the CLI against the API stand-in: ``jobtables job sft-oom`` collected the whole
namespace, one log read per job; with two other jobs' kubelets silent (``request_timeout_s``
3) the sweep's log reads stopped before ``sft-oom``'s and the job asked for read
``fetch-failed`` although its own log answered. The one-job path reads the job's own log,
and a job this probe saw active that is gone since still reads vanished (not used up).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

from probes.kubernetes.probe import KubernetesProbe
from probes.models import JobState
from tests.probes.kubernetes.builders import make_job, make_pod
from tests.probes.kubernetes.standin import KubeStandIn

ROOT = Path(__file__).parents[3]
LOG = "".join(f"step:{s} - actor/entropy:0.5 - actor/grad_norm:0.2\n" for s in (1, 2, 3))


def _cluster(standin: KubeStandIn) -> None:
    for name in ("rl-a", "rl-b", "rl-c"):
        standin.jobs[name] = make_job(name, active=1)
        standin.pods[f"{name}-0"] = make_pod(f"{name}-0", name)
        standin.logs[f"{name}-0"] = LOG
    standin.faults["log:rl-a-0"] = "hang"  # two silent kubelets before the job asked for
    standin.faults["log:rl-b-0"] = "hang"


async def test_job_reads_only_its_own_log(standin: KubeStandIn,
                                          probe: KubernetesProbe) -> None:
    """Other pods' hung log reads neither stop nor delay the job's own."""
    _cluster(standin)
    facts = await probe.collect_one("rl-c")
    assert facts.status == "ok"
    (job,) = facts.jobs
    assert job.record.job_id == "rl-c"
    assert job.log is not None and job.log.status == "ok"
    logs = [r.path for r in standin.calls("GET", "/log")]
    assert logs == ["/api/v1/namespaces/ml/pods/rl-c-0/log"]


async def test_a_vanished_job_reads_vanished_and_the_sweep_still_reports_it(
        standin: KubeStandIn, probe: KubernetesProbe) -> None:
    """Gone since the last sweep: FAILED vanished in the job view, and once in the next sweep."""
    standin.jobs["rl-v"] = make_job("rl-v", active=1)
    standin.pods["rl-v-0"] = make_pod("rl-v-0", "rl-v")
    standin.logs["rl-v-0"] = LOG
    await probe.collect()
    del standin.jobs["rl-v"], standin.pods["rl-v-0"]
    (job,) = (await probe.collect_one("rl-v")).jobs
    assert (job.record.state, job.record.reason) == (JobState.FAILED, "vanished")
    swept = [j for j in (await probe.collect()).jobs if j.record.job_id == "rl-v"]
    assert [j.record.reason for j in swept] == ["vanished"]


async def test_an_unknown_job_is_none(standin: KubeStandIn, probe: KubernetesProbe) -> None:
    """A name the namespace does not list answers no job, the cluster ok."""
    _cluster(standin)
    facts = await probe.collect_one("rl-zz")
    assert (facts.status, facts.jobs) == ("ok", ())


async def test_the_job_command_reads_the_job_whatever_other_pods_do(
        standin: KubeStandIn, tmp_path: Path) -> None:
    """Through the CLI: the job's row has its own log's steps, no ``fetch-failed``."""
    _cluster(standin)
    kubeconfig = standin.write_kubeconfig(tmp_path / "kubeconfig")
    toml = tmp_path / "jobtables.toml"
    toml.write_text(f'[[clusters]]\nname = "beta"\nkind = "kubernetes"\n'
                    f'kubeconfig = "{kubeconfig}"\ncontext = "standin"\nnamespace = "ml"\n'
                    'label_selector = "team=post-training"\nrequest_timeout_s = 3\n')
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bot.cli", "job", "rl-c", "--config", str(toml), "--format",
        "json", stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, cwd=ROOT,
        env={**os.environ, "JOBTABLES_CONFIG": ""})
    async with asyncio.timeout(60):
        out, err = await process.communicate()
    assert process.returncode == 0, err.decode()
    job = json.loads(out)
    assert job["step"] == 3
    assert "fetch-failed" not in job["flags"]
