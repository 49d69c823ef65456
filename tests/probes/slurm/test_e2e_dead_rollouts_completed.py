"""End to end on the real SLURM 22.05 cluster: a standard RL run that reached its total with its
rollouts dead over the last window is ``dead-rollouts`` with verdict ``warning`` and
recommendation ``deep_probe`` (CONTRACT §6), not "done" with its cleanup.

Two verl 0.9.1 GRPO consoles (``verl-0.9.1/console.log``'s step line, the values rewritten per
step: score, response length, entropy, grad norm) run to their printed total of 40 and exit 0.
In one, a weight-sync fault from step 32 on makes every response end at once: 1 token, score
0 (the rulebook's "a row can read healthy on a silently dead run"). ``jobtables sweep`` read it
``done``, ``rl-standard-job-cleanup``: the routine that consolidates and uploads the run's
model, for a model that had stopped learning. Near miss: the healthy one is done, cleanup.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from probes.slurm.transport import SshRunner
from tests.probes.slurm.completed_jobs import completed_jobs, sbatch_in
from tests.probes.slurm.conftest import SlurmEnv, cli_json

CONSOLE = (Path(__file__).resolve().parents[2] / "fixtures" / "verl-0.9.1" /
           "console.log").read_text().splitlines()
TOTAL = 40


def _step_line(step: int, score: float, length: float, entropy: float, grad: float) -> str:
    """verl's step line for ``step`` (its console's step 1, values rewritten)."""
    line = next(x for x in CONSOLE if " step:1 " in x)
    line = line.replace(" step:1 ", f" step:{step} ").replace(
        "training/global_step:1 ", f"training/global_step:{step} ")
    for key, value in (("critic/score/mean", score), ("critic/rewards/mean", score),
                       ("actor/entropy", entropy), ("actor/grad_norm", grad)):
        line = re.sub(rf"{re.escape(key)}:np\.float64\([^)]*\)", f"{key}:np.float64({value!r})",
                      line)
    return re.sub(r"response_length/mean:[0-9.]+", f"response_length/mean:{length!r}", line)


def _console(dead_from: int | None) -> str:
    head = [x for x in CONSOLE if " step:" not in x][:3]  # the dataloader sizes and total
    assert any(f"Total training steps: {TOTAL}" in x for x in head), head
    lines = list(head)
    for step in range(1, TOTAL + 1):
        score = 0.19 + 0.01 * step + 0.003 * (step % 3)
        length = 470.0 + 3 * step + 0.25 * (step % 4)
        entropy = 0.61 - 0.002 * step + 0.0007 * (step % 3)
        grad = 0.19 + 0.004 * (step % 5)
        if dead_from is not None and step >= dead_from:
            score, length = 0.0, 1.0
        lines.append(_step_line(step, score, length, entropy, grad))
    return "\n".join(lines) + "\n"


async def _submit(runner: SshRunner, tag: str, run_dir: str) -> dict[str, str]:
    ids = {}
    for key, dead_from in (("dead", 32), ("alive", None)):
        log = base64.b64encode(_console(dead_from).encode()).decode()
        ids[key] = await sbatch_in(runner, f"{run_dir}/{key}",
                                   f"#!/bin/bash\necho '{log}' | base64 -d\n",
                                   f"rl-grpo-qwen-{key}-{tag}")
    return ids


@pytest.fixture(scope="module")
def rows(slurm_env: SlurmEnv, tmp_path_factory: pytest.TempPathFactory,
         ) -> Iterator[dict[str, dict[str, Any]]]:
    """Both runs COMPLETED, read by ``jobtables sweep --format json``."""
    config = slurm_env.config_toml(tmp_path_factory.mktemp("dead"), recent_hours=1,
                                   timeout_s=120, command_timeout_s=60)
    with completed_jobs(slurm_env, _submit) as ids:
        swept = {job["job_id"]: job for job in cli_json(config, "sweep")["jobs"]}
        yield {key: swept[job_id] for key, job_id in ids.items()}


def test_a_completed_run_that_died_is_a_warning_to_deep_probe(
        rows: dict[str, dict[str, Any]]) -> None:
    dead = rows["dead"]
    assert (dead["state"], dead["step"], dead["total_steps"]) == ("COMPLETED", TOTAL, TOTAL)
    assert "dead-rollouts" in dead["flags"]
    assert dead["verdict"] == "warning", (dead["verdict"], dead["trend"])
    assert dead["recommendation"]["action"] == "deep_probe", dead["recommendation"]
    assert "responses ~1.00 token for 9 steps" in dead["recommendation"]["why"]


def test_a_completed_healthy_run_is_cleanup(rows: dict[str, dict[str, Any]]) -> None:
    alive = rows["alive"]
    assert alive["state"] == "COMPLETED" and "dead-rollouts" not in alive["flags"]
    assert alive["verdict"] == "done"
    assert alive["recommendation"] == {"action": "cleanup", "why": "rl-standard-job-cleanup"}
