"""``jobtables job <CANCELLED>`` reads the restart its cancel released, as the sweep does.

Replayed on the real SLURM as jtuser: a SkyRL run (1386) that collapsed, with its restart 1387
queued ``afterany:1386``, then ``scancel 1386``: SLURM released and started 1387. The sweep
named 1387 the restart to cancel (the collapsed policy goes on in it), but ``jobtables job
1386`` listed none of the user's other jobs for a CANCELLED one and read 'Cancelled;
COLLAPSE: ...', diagnose: the restart went unnamed. A stand-in ``squeue`` answers as 22.05
does, through the real collector (as ``test_onejob_ran_successor``).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from probes.config import SlurmCluster
from probes.slurm.probe import SlurmProbe
from tests.probes.slurm import test_onejob_ran_successor as ran
from tests.probes.slurm.test_onejob import LocalCollector

T0 = ran.T0
QUEUE = [
    ("1386", "jtuser", "CANCELLED", "None", str(T0), str(T0 + 10), str(T0 + 70), "1:00:00",
     "(null)", "1:00", "rl-skyrl-grpo-cc", "/w/cc", "/w/cc/rl_1386.out", str(T0)),
    ("1387", "jtuser", "RUNNING", "None", str(T0 + 1), str(T0 + 71), "0", "1:00:00",
     "(null)", "0:30", "rl-skyrl-grpo-cc", "/w/cc", "/w/cc/rl_1387.out", str(T0 + 71)),
]


def test_job_of_a_cancelled_run_lists_its_released_restart(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ran, "QUEUE", QUEUE)
    runner = LocalCollector(ran._bin(tmp_path))
    cluster = SlurmCluster(name="c", local=True, users=("jtuser",))
    facts = asyncio.run(SlurmProbe(cluster, runner_factory=lambda _c: runner)
                        .collect_one("1386"))
    assert facts.status == "ok", facts.detail
    listed = {j.record.job_id: j.record for j in facts.jobs}
    assert "1387" in listed, sorted(listed)
    assert listed["1387"].eligible_time is not None
