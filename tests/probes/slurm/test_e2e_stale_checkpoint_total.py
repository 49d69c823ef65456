"""End to end on the real SLURM 22.05 cluster: an earlier run's checkpoint at the total does not
say a rerun got there.

A verl GRPO experiment is run again from scratch into the same save folder (verl's default
``checkpoints/<project>/<experiment>``; ``trainer.resume_mode=disable``): the earlier run's
``global_step_40`` (its total, written three hours before) is still there. The rerun prints
verl's console to step 20 of 40, saves ``global_step_10`` and ``global_step_20`` (its
``local_global_step_folder:`` lines) and its wrapper exits 0 (COMPLETED). ``jobtables job ID
--format json`` read it "Completed", ``rl-standard-job-cleanup``: a durable step at the total
stands in for a log that stops short (report.cleanup), and the old directory was taken for the
rerun's. Now a step directory last written before the job started is no evidence the job got
there: ``incomplete-run``, ``diagnose``. Near miss: the run that did write ``global_step_40``
itself while its console stopped at 20 (the case the durable evidence is there for) stays done.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Any

import pytest

from probes.slurm.transport import SshRunner
from tests.probes.slurm.completed_jobs import completed_jobs, sbatch_in
from tests.probes.slurm.conftest import SlurmEnv, cli_json
from tests.probes.slurm.test_e2e_dead_rollouts_completed import CONSOLE, _step_line

SAVES = "checkpoints/proj/exp"


def _console() -> str:
    """verl 0.9.1's console to step 20 of 40, with its save lines at 10 and 20."""
    lines = [x for x in CONSOLE if " step:" not in x][:3]
    for step in range(1, 21):
        lines.append(_step_line(step, 0.2 + 0.01 * step, 480.0 + step, 0.6, 0.2))
        if step % 10 == 0:
            lines.append(f"(TaskRunnerV1 pid=247607) local_global_step_folder: "
                         f"{SAVES}/global_step_{step}")
    return "\n".join(lines) + "\n"


def _script(writes_total: bool) -> str:
    log = base64.b64encode(_console().encode()).decode()
    steps = (10, 20, 40) if writes_total else (10, 20)
    saves = " ".join(f"{SAVES}/global_step_{s}/actor" for s in steps)
    return f"#!/bin/bash\necho '{log}' | base64 -d\nmkdir -p {saves}\necho 'wrapper: done'\n"


async def _submit(runner: SshRunner, tag: str, run_dir: str) -> dict[str, str]:
    ids = {}
    for key, writes_total in (("rerun", False), ("silent", True)):
        workdir = f"{run_dir}/{key}"
        if not writes_total:  # the earlier run's final save, three hours old
            old = f"{workdir}/{SAVES}/global_step_40"
            await runner.run(["sh", "-c", f"mkdir -p {old}/actor && touch -d '3 hours ago' "
                              f"{old}/actor {old}"])
        ids[key] = await sbatch_in(runner, workdir, _script(writes_total),
                                   f"rl-grpo-exp-{key}-{tag}")
    return ids


@pytest.fixture(scope="module")
def answers(slurm_env: SlurmEnv, tmp_path_factory: pytest.TempPathFactory,
            ) -> Iterator[dict[str, dict[str, Any]]]:
    """Both runs COMPLETED, each read by ``jobtables job ID --format json`` and by one
    ``jobtables sweep --format json`` (``swept-<key>``)."""
    config = slurm_env.config_toml(tmp_path_factory.mktemp("stale-ckpt"), recent_hours=1,
                                   timeout_s=120, command_timeout_s=60)
    with completed_jobs(slurm_env, _submit) as ids:
        answers = {key: cli_json(config, "job", job_id) for key, job_id in ids.items()}
        swept = {job["job_id"]: job for job in cli_json(config, "sweep")["jobs"]}
        answers.update({f"swept-{key}": swept[job_id] for key, job_id in ids.items()})
        yield answers


@pytest.mark.parametrize("read", ["job", "sweep"])
def test_an_earlier_runs_save_at_the_total_does_not_complete_a_rerun(
        answers: dict[str, dict[str, Any]], read: str) -> None:
    """The same row from ``jobtables job`` and ``jobtables sweep`` (its shared checkpoint memo)."""
    rerun = answers["rerun" if read == "job" else "swept-rerun"]
    assert (rerun["state"], rerun["step"], rerun["total_steps"]) == ("COMPLETED", 20, 40)
    assert "incomplete-run" in rerun["flags"], (rerun["trend"], rerun["recommendation"])
    assert rerun["recommendation"]["action"] == "diagnose"


def test_a_save_at_the_total_written_by_the_run_still_completes_it(
        answers: dict[str, dict[str, Any]]) -> None:
    """Near miss: global_step_40 written by the job itself: the durable evidence stands."""
    silent = answers["silent"]
    assert "incomplete-run" not in answers["swept-silent"]["flags"]
    assert silent["state"] == "COMPLETED" and "incomplete-run" not in silent["flags"]
    assert silent["recommendation"] == {"action": "cleanup", "why": "rl-standard-job-cleanup"}
