"""``jobtables probe`` on a run whose log could not be read says so.

Found through the CLI against the API stand-in: a RUNNING RL job whose pod log held a kubelet
error instead of its lines (the row: ``fetch-failed``) was probed NO-KILL with 'log
pod/... (0 logged steps)', as if its log had been read and held nothing, and the cost line
read 'None s on the login node' (a Kubernetes probe runs nothing on a login node).
"""

from __future__ import annotations

from pathlib import Path

from tests.probes.kubernetes.builders import make_job, make_pod
from tests.probes.kubernetes.standin import KubeStandIn
from tests.probes.kubernetes.test_k8s_deep_probe import _config, _probe

KUBELET_ERROR = ('failed to try resolving symlinks in path "/var/log/pods/ml_rl-x-0_uid/trainer/'
                 '0.log": lstat /var/log/pods/ml_rl-x-0_uid/trainer/0.log: no such file or '
                 'directory\n')


async def test_a_failed_log_fetch_is_named_in_what_the_probe_skipped(
        standin: KubeStandIn, tmp_path: Path) -> None:
    """The probe's ``skipped`` names the failed fetch and its reason."""
    standin.jobs["rl-x"] = make_job("rl-x", active=1)
    standin.pods["rl-x-0"] = make_pod("rl-x-0", "rl-x")
    standin.logs["rl-x-0"] = KUBELET_ERROR
    code, out, err = await _probe(_config(standin, tmp_path), "rl-x")
    assert code == 0, err
    assert out is not None
    assert "fetch-failed" in out["flags"]
    skipped = out["deep_probe"]["read"]["skipped"]
    assert skipped[0].startswith("log fetch failed: API error in the log stream: failed to try")
    assert skipped[0].endswith("(pod/rl-x-0): its printed completions and metrics are unread")
