"""A configured checkpoint root naming the run (``{name}`` or ``{job_id}``) is the run's own
save folder, trusted whoever the file system says owns its steps.

41ac31e/50acbb9 count another owner's step directories only in a folder the run's log names:
a job run with ``--chdir`` into a teammate's workdir banks none of the teammate's saves. But a
root such as ``/scratch/ckpt/{name}`` or ``{workdir}/checkpoints/{job_id}`` is specific to the
run already, as a logged folder is; on an object-store FUSE mount (every file owned by the
mount's uid) or written by a launcher's service account, its steps were dropped when the log
did not print the folder (banked_step null; a TIMEOUT said nothing to resume from). A root
with neither placeholder (``{workdir}/checkpoints``) stays under the owner rule.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from probes.config import SlurmCluster
from probes.models import JobState
from probes.remote.collector import _collect_one
from probes.remote.guard import Guard
from probes.remote.stdio_pattern import run_templates
from probes.remote.tree import collect_checkpoints
from probes.slurm.request import collector_request
from tests.report.factories import record

OTHER = os.geteuid() + 4242  # the job's uid as the login node sees it; the tree is not its


@pytest.fixture
def tmp_path(reachable_tmp: Path) -> Path:
    """The trees below are reachable by the job's user (OTHER), as a shared mount is."""
    return reachable_tmp


def _steps(root: Path, *steps: int) -> None:
    for step in steps:
        (root / f"global_step_{step}").mkdir(parents=True)


def test_a_run_root_banks_under_another_owner(tmp_path: Path) -> None:
    """The run's own root: its steps count though another uid owns them, with no log."""
    root = tmp_path / "ckpt" / "rl-run"
    _steps(root, 10, 20)
    out = collect_checkpoints([str(root)], Guard(OTHER, 5.0, user="u"), None, str(tmp_path),
                              memo=False, run_roots=[str(root)])
    assert out["listings"] == {str(root): ["global_step_10", "global_step_20"]}


def test_a_shared_root_of_another_owner_still_banks_nothing(tmp_path: Path) -> None:
    """The same tree under a root that does not name the run: nothing (41ac31e)."""
    root = tmp_path / "checkpoints"
    _steps(root, 10, 20)
    out = collect_checkpoints([str(root)], Guard(OTHER, 5.0, user="u"), None, str(tmp_path),
                              memo=False, run_roots=[])
    assert out["listings"] == {}


def test_run_templates_are_those_naming_the_run() -> None:
    """``{name}`` or ``{job_id}`` make a template the run's; ``{workdir}``/``{user}`` do not."""
    templates = ["{workdir}/checkpoints", "/scratch/{user}/ckpt", "/scratch/ckpt/{name}",
                 "{workdir}/out/{job_id}/save", "{bad"]
    assert run_templates(templates) == ["/scratch/ckpt/{name}", "{workdir}/out/{job_id}/save"]


def test_the_request_and_the_collector_carry_the_run_roots(tmp_path: Path) -> None:
    """The sweep's request names the run roots filled for the job, and the collector trusts
    them: a foreign-owned step under ``{workdir}/ckpt/{name}`` banks, one under
    ``{workdir}/checkpoints`` does not."""
    workdir = tmp_path / "w"
    _steps(workdir / "ckpt" / "rl-run", 30)
    _steps(workdir / "checkpoints", 40)
    cluster = SlurmCluster(name="alpha", kind="slurm", host="h", user="u",
                           known_hosts="/dev/null", checkpoint_roots=[
                               "{workdir}/checkpoints", "{workdir}/ckpt/{name}"])
    rec = record("rl-run", "100", JobState.TIMEOUT, workdir=str(workdir),
                 stdout_path=str(workdir / "100.out"))
    [job] = collector_request([rec], cluster)["jobs"]
    assert job["run_checkpoint_roots"] == [str(workdir / "ckpt" / "rl-run")]
    job.pop("user")  # read in process; the guard's uid stands for the job's below
    entry = _collect_one(job, {"tail_bytes": 1000}, Guard(OTHER, 5.0, user="u"))
    assert entry["checkpoints"]["listings"] == {str(workdir / "ckpt" / "rl-run"):
                                                ["global_step_30"]}


def test_the_collectors_own_queue_specs_carry_the_run_roots() -> None:
    """A one-trip sweep's collector fills the roots itself from squeue's job objects: the
    run roots ride in its specs too."""
    from probes.remote.collector import _queue_specs

    job = {"job_id": 100, "name": "rl-run", "user_name": "alice", "job_state": ["TIMEOUT"],
           "current_working_directory": "/w", "standard_output": "/w/%j.out"}
    request = {"roots": {"checkpoint": ["{workdir}/checkpoints", "/s/{job_id}"], "trial": []}}
    [spec], _ = _queue_specs([job], request)
    assert spec["checkpoint_roots"] == ["/w/checkpoints", "/s/100"]
    assert spec["run_checkpoint_roots"] == ["/s/100"]
