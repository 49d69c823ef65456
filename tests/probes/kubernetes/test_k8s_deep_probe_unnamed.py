"""``jobtables probe ID`` with no cluster named, in a config of several clusters (the contract's
own example: a SLURM ``alpha`` beside a Kubernetes ``beta``): the probe finds the cluster that
holds the job, as ``jobtables job ID`` does, instead of refusing the command.

CONTRACT §1 gives ``probe ID [--cluster NAME]`` the same optional cluster as ``job``; the probe
answered every unnamed id with 'name the job's cluster ... 2 SLURM and Kubernetes clusters are
configured' (exit 2), even a Kubernetes name no SLURM cluster can hold. Through the real CLI,
the API stand-in for ``beta`` and an ``alpha`` whose SSH port refuses connections.
"""

from __future__ import annotations

from pathlib import Path

from tests.probes.kubernetes.standin import KubeStandIn
from tests.probes.kubernetes.test_k8s_deep_probe import _config, _probe, _run

DOWN = ('[[clusters]]\nname = "alpha"\nkind = "slurm"\nhost = "127.0.0.1"\nport = 1\n'
        'user = "mlops"\nknown_hosts = "/etc/jobtables-test/known_hosts"\n'
        'client_keys = ["/etc/jobtables-test/client_ed25519"]\nconnect_timeout_s = 2\n\n')
"""A SLURM cluster whose login node refuses the connection (unreachable)."""


def _two_clusters(standin: KubeStandIn, tmp_path: Path) -> Path:
    toml = _config(standin, tmp_path)
    toml.write_text(DOWN + toml.read_text())
    return toml


async def test_an_unnamed_id_is_probed_on_the_cluster_that_holds_it(
        standin: KubeStandIn, tmp_path: Path) -> None:
    """A Kubernetes run's name, no cluster named: beta's run is probed (KILL, its evidence)."""
    _run(standin, "grpo-corrupt", "corrupt")
    code, job, err = await _probe(_two_clusters(standin, tmp_path), "grpo-corrupt")
    assert code == 0, err
    assert job is not None and (job["cluster"], job["job_id"]) == ("beta", "grpo-corrupt")
    assert job["deep_probe"]["verdict"] == "KILL"


async def test_an_id_no_cluster_holds_is_bad_usage(standin: KubeStandIn,
                                                   tmp_path: Path) -> None:
    """Near miss: a name on no cluster (alpha cannot hold a name) is still exit 2, one line."""
    _run(standin, "grpo-corrupt", "corrupt")
    code, job, err = await _probe(_two_clusters(standin, tmp_path), "no-such-run")
    assert code == 2 and job is None
    assert "no-such-run" in err and "not found" in err and "Traceback" not in err


async def test_an_id_an_unreachable_cluster_may_hold_is_reported(
        standin: KubeStandIn, tmp_path: Path) -> None:
    """A SLURM id beta does not have, alpha unreachable: the answer says alpha could not be
    read (exit 0, the report object with alpha unreachable and no job), as ``job`` answers."""
    _run(standin, "grpo-corrupt", "corrupt")
    code, report, err = await _probe(_two_clusters(standin, tmp_path), "4242")
    assert code == 0, err
    assert report is not None and report["jobs"] == []
    assert [(c["name"], c["status"]) for c in report["clusters"]] == [("alpha", "unreachable")]


async def test_an_inactive_cluster_is_not_counted(standin: KubeStandIn, tmp_path: Path) -> None:
    """``active = false`` on alpha: beta is the only cluster swept, so the unnamed id is beta's
    (it read '2 SLURM and Kubernetes clusters are configured', exit 2)."""
    _run(standin, "grpo-corrupt", "corrupt")
    toml = _two_clusters(standin, tmp_path)
    toml.write_text(toml.read_text().replace('name = "alpha"\n',
                                             'name = "alpha"\nactive = false\n'))
    code, job, err = await _probe(toml, "grpo-corrupt")
    assert code == 0, err
    assert job is not None and job["deep_probe"]["verdict"] == "KILL"


async def test_an_id_on_two_clusters_is_asked_about_never_picked(
        standin: KubeStandIn, tmp_path: Path) -> None:
    """Two clusters both holding the name (two entries on one API server): exit 2 naming both,
    as ``jobtables job`` answers, no verdict."""
    _run(standin, "grpo-corrupt", "corrupt")
    toml = _config(standin, tmp_path)
    text = toml.read_text()
    toml.write_text(text + "\n" + text.replace('name = "beta"', 'name = "gamma"'))
    code, job, err = await _probe(toml, "grpo-corrupt")
    assert code == 2 and job is None
    assert "several clusters (beta, gamma)" in err and "Traceback" not in err


async def test_a_cluster_not_read_beside_the_holder_is_said(standin: KubeStandIn,
                                                            tmp_path: Path) -> None:
    """Found on beta while gamma (a second Kubernetes cluster, its API server down) could not
    be read: the verdict is beta's, and stderr says gamma may hold another job of that name
    (as ``jobtables job`` notes it), naming the command that would probe that one."""
    _run(standin, "grpo-corrupt", "corrupt")
    toml = _config(standin, tmp_path)
    text = toml.read_text()
    down = tmp_path / "down-kubeconfig"
    down.write_text((tmp_path / "kubeconfig").read_text().replace(standin.url,
                                                                  "http://127.0.0.1:1"))
    toml.write_text(text + "\n" + text.replace('name = "beta"', 'name = "gamma"').replace(
        str(tmp_path / "kubeconfig"), str(down)))
    code, job, err = await _probe(toml, "grpo-corrupt")
    assert code == 0, err
    assert job is not None and job["cluster"] == "beta" and job["deep_probe"]["verdict"] == "KILL"
    assert "could not read 'gamma'" in err and "jobtables probe gamma:grpo-corrupt" in err, err
