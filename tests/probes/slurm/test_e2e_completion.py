"""End to end on the real SLURM 22.05 cluster: the SFT completion check before cleanup.

Two real sbatch SFT jobs print the real HF Trainer log (``hf-transformers-5.24.0``, the stopped
one only up to its step 60) plus the
LLaMA-Factory-style save line naming their output dir, leave a ``trainer_state.json``
(``hf-trainer-state-rebuilt``) under ``out/checkpoint-N`` and exit 0 (COMPLETED). One stopped at
60 of 95 steps, one reached 95. The real probe (collector over SSH) reads the files; the judge
routes the finished one to ``sft-job-cleanup`` and flags the other ``incomplete-run``.
"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from probes.models import ClusterFacts, JobState
from probes.slurm.probe import SlurmProbe
from probes.slurm.transport import SshRunner
from report.judge import build_report
from report.models import JobReport
from report.settings import ReportSettings
from tests.probes.slurm.completed_jobs import completed_jobs, sbatch_in
from tests.probes.slurm.conftest import SlurmEnv

FIX = Path(__file__).resolve().parents[2] / "fixtures"
HF_LOG = (FIX / "hf-transformers-5.24.0" / "sft_healthy.out").read_bytes()
STOPPED_LOG = b"".join(HF_LOG.splitlines(keepends=True)[:75])
"""The same log as printed by a run that stopped at step 60 (its bar at 60/95, no train_runtime
dict): a log that says it finished overrules a checkpoint's snapshot (report.cleanup)."""
STATES = FIX / "hf-trainer-state-rebuilt"


def _script(state: str, step: int) -> str:
    log = base64.b64encode(STOPPED_LOG if step < 95 else HF_LOG).decode()
    blob = base64.b64encode((STATES / state).read_bytes()).decode()
    return (
        "#!/bin/bash\n"
        f"echo '{log}' | base64 -d\n"
        f"echo '[INFO|trainer.py:3984] 2026-11-30 15:00:00,000 >> Saving model checkpoint to "
        f"out/checkpoint-{step}'\n"
        f"mkdir -p out/checkpoint-{step}\n"
        f"echo '{blob}' | base64 -d > out/checkpoint-{step}/trainer_state.json\n"
    )


async def _submit(runner: SshRunner, tag: str, run_dir: str) -> dict[str, str]:
    return {key: await sbatch_in(runner, f"{run_dir}/{key}", _script(state, step),
                                 f"sft-qwen-{key}-{tag}")
            for key, state, step in (("stopped", "trainer_state_stopped.json", 60),
                                     ("finished", "trainer_state_finished.json", 95))}


Swept = tuple[ClusterFacts, dict[str, JobReport], dict[str, str]]


@pytest.fixture(scope="module")
def swept(slurm_env: SlurmEnv) -> Iterator[Swept]:
    """Submit both SFT jobs, wait for them to complete, sweep and judge once."""
    with completed_jobs(slurm_env, _submit) as ids:
        facts = asyncio.run(SlurmProbe(slurm_env.cluster()).collect())
        report, _ = build_report([facts], settings=ReportSettings(), now=datetime.now(UTC))
        rows = {j.job_id: j for j in report.jobs}
        yield facts, {key: rows[job_id] for key, job_id in ids.items()}, ids


def test_collector_reads_the_completion_files(
    swept: Swept,
) -> None:
    """Over real SSH, the COMPLETED job's trainer_state.json is found in the logged output dir."""
    facts, _, ids = swept
    job = next(j for j in facts.jobs if j.record.job_id == ids["stopped"])
    assert job.completion is not None and job.completion.reached is not None
    reached = job.completion.reached
    assert (reached.current_steps, reached.total_steps, reached.finished) == (60, 95, False)
    assert reached.path.endswith("/stopped/out/checkpoint-60/trainer_state.json")


def test_stopped_short_is_incomplete_and_finished_is_cleanup(
    swept: Swept,
) -> None:
    """incomplete-run + diagnose for 60/95; sft-job-cleanup for 95/95."""
    _, rows, _ = swept
    stopped, finished = rows["stopped"], rows["finished"]
    assert stopped.state is JobState.COMPLETED and finished.state is JobState.COMPLETED
    assert "incomplete-run" in stopped.flags
    assert stopped.recommendation is not None and stopped.recommendation.action == "diagnose"
    assert "incomplete-run" not in finished.flags
    assert finished.recommendation is not None
    assert (finished.recommendation.action, finished.recommendation.why) == (
        "cleanup", "sft-job-cleanup")
