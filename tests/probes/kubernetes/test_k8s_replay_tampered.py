"""A tampered Kubernetes recording: each is the replay cluster's clear error, nothing outside
DIR is read, and the replay never crashes or hangs.

A recording travels (bug reports): its files are data from someone else. A symlink planted in
it is refused, never followed; a file that is no regular file or larger than a recording file
can be is refused before it is read; malformed JSON, shapes the client's models refuse, a log
file named outside the recording's own names: each names its file in the ``unreachable``
detail.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from probes.config import KubernetesCluster, ReplayCluster
from probes.kubernetes.recording import record
from probes.kubernetes.replay import MAX_FILE_BYTES
from probes.replay import META_BYTES, ReplayProbe
from tests.probes.kubernetes.builders import NOW, make_job, make_jobset, make_pod
from tests.probes.kubernetes.standin import KubeStandIn
from tests.probes.kubernetes.test_k8s_recording import cli

Tamper = Callable[[Path, Path], None]


async def recorded(standin: KubeStandIn, cluster: KubernetesCluster, tmp_path: Path) -> Path:
    """A recording of a running Job (one log read) and a JobSet."""
    assert standin.jobsets is not None
    standin.jobs["rl-a"] = make_job("rl-a", active=1)
    standin.pods["rl-a-0"] = make_pod("rl-a-0", "rl-a")
    standin.logs["rl-a-0"] = "step:1 - actor/entropy:0.5 - critic/score/mean:0.4\n"
    standin.jobsets["rl-js"] = make_jobset("rl-js")
    return await record(cluster, tmp_path / "rec", clock=lambda: NOW)


def link_to(name: str, target: str | None = None) -> Tamper:
    """``name`` replaced by a link: to ``target``, else to a copy of it outside DIR."""
    def tamper(rec: Path, tmp_path: Path) -> None:
        outside = tmp_path / f"outside-{name}"
        outside.write_bytes((rec / name).read_bytes())
        (rec / name).unlink()
        (rec / name).symlink_to(target or outside)
    return tamper


def write(name: str, data: bytes) -> Tamper:
    def tamper(rec: Path, tmp_path: Path) -> None:
        (rec / name).write_bytes(data)
    return tamper


def edit(name: str, change: Callable[[Any], None]) -> Tamper:
    def tamper(rec: Path, tmp_path: Path) -> None:
        data = json.loads((rec / name).read_text())
        change(data)
        (rec / name).write_text(json.dumps(data))
    return tamper


def a_fifo(rec: Path, tmp_path: Path) -> None:
    (rec / "log-0001.txt").unlink()
    os.mkfifo(rec / "log-0001.txt")


def huge(rec: Path, tmp_path: Path) -> None:
    """A sparse jobs.json one byte past the bound: refused by its size, never read."""
    os.truncate(rec / "jobs.json", MAX_FILE_BYTES + 1)


def padded_meta(rec: Path, tmp_path: Path) -> None:
    """A cluster.json past the bound of what is read to learn the kind (valid JSON, padded)."""
    meta = (rec / "cluster.json").read_text()
    (rec / "cluster.json").write_text(meta + " " * META_BYTES)


def _first_read(data: Any, **entry: Any) -> None:
    data["reads"][0] = {"pod": "rl-a-0", "container": "trainer", **entry}


def _nameless_container(data: Any) -> None:
    data["items"][0]["spec"]["containers"][0].pop("name")


def _jobset_spec(data: Any) -> None:
    data["items"][0]["spec"] = 5


@pytest.mark.parametrize(("tamper", "says"), [
    (link_to("pods.json"), "recording file pods.json is a symbolic link"),
    (link_to("log-0001.txt", "/etc/shadow"), "recording file log-0001.txt is a symbolic link"),
    (link_to("cluster.json"), "cluster.json is a symbolic link"),
    (a_fifo, "recording file log-0001.txt is not a regular file"),
    (huge, f"recording file jobs.json is {MAX_FILE_BYTES + 1} bytes, over the"),
    (write("jobs.json", b'{"items": [{"metadata": '),
     "recording file jobs.json is unreadable"),
    (write("log-0001.txt", b"\xff\xfe step:1\n"), "recording file log-0001.txt is not UTF-8"),
    (write("pods.json", b'{"items": [7, null]}'), "recording file pods.json: not a Kubernetes"),
    (write("logs.json", b'{"reads": 5}'), "recording file logs.json: not a recording's log"),
    (edit("pods.json", _nameless_container), "recording file pods.json: an item is no V1Pod"),
    (edit("jobsets.json", _jobset_spec), "an object is malformed: AttributeError"),
    (edit("logs.json", lambda d: _first_read(d, file="../../etc/passwd")),
     "'../../etc/passwd' is no log file name"),
    (edit("logs.json", lambda d: _first_read(d, file="log-0999.txt")),
     "recording is missing log-0999.txt"),
    (edit("logs.json", lambda d: _first_read(d, error={"type": "SystemExit", "message": "x"})),
     "'SystemExit' is no recorded error"),
    (edit("logs.json", lambda d: _first_read(d, cut="yes", file="log-0001.txt")),
     "recording file logs.json: a read is malformed"),
    (edit("cluster.json", lambda d: d.update(recorded_at="yesterday")),
     "recording file cluster.json is malformed"),
    (edit("cluster.json", lambda d: d.update(kind="nomad")),
     "'nomad' is no recorded cluster kind"),
    (padded_meta, "recording file cluster.json is"),
])
async def test_a_tampered_recording_is_the_clusters_clear_error(
        standin: KubeStandIn, cluster: KubernetesCluster, tmp_path: Path, tamper: Tamper,
        says: str) -> None:
    """Each was read through (a link), read whole (a huge file), or would have crashed the
    probe; now the replay cluster is unreachable, its detail naming the file."""
    rec = await recorded(standin, cluster, tmp_path)
    whole = await ReplayProbe(ReplayCluster(name="r", path=str(rec))).collect()
    assert whole.status == "ok" and {j.record.job_id for j in whole.jobs} == {"rl-a", "rl-js"}
    tamper(rec, tmp_path)
    facts = await ReplayProbe(ReplayCluster(name="r", path=str(rec))).collect()
    assert (facts.status, facts.kind, facts.jobs) == ("unreachable", "replay", ())
    assert facts.detail is not None and says in facts.detail, facts.detail


async def test_a_tampered_recording_swept_through_the_cli(
        standin: KubeStandIn, cluster: KubernetesCluster, tmp_path: Path) -> None:
    """Through ``jobtables sweep``: garbage JSON is the cluster's unreachable detail, exit 0
    (a bad cluster never hides the others, nor is it an internal error)."""
    rec = await recorded(standin, cluster, tmp_path)
    (rec / "pods.json").write_text("<html>502 Bad Gateway</html>")
    config = tmp_path / "c.toml"
    config.write_text(f'[[clusters]]\nname = "r"\nkind = "replay"\npath = "{rec}"\n')
    code, out, err = await cli("sweep", "--config", str(config), "--format", "json")
    assert code == 0, err
    swept = json.loads(out)
    [said] = swept["clusters"]
    assert said["status"] == "unreachable" and swept["jobs"] == []
    assert "recording file pods.json is unreadable" in said["detail"], said
