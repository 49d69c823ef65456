"""``jobtables job <array id>`` shows the task that needs a human, as the sweep's group row does.

Replayed on the real SLURM 22.05 as jtuser: an RL array (``--array=0-3%3``, job 2002) whose
task 1 printed SkyRL's collapsing console while tasks 0 and 2 printed TRL's healthy GRPO log.
``jobtables sweep`` rendered the group 'rl-lc-arr [3 running] [COLLAPSE] 2002_1: COLLAPSE:
grad_norm 6.16 ...', but ``jobtables job 2002`` answered task 2002_0 alone, 'healthy', no
recommendation: it read one task (running, lowest index) and never saw the collapse. Likewise
an SFT array (1700, ``0-5%2``) whose task 1 had FAILED on a CUDA OOM answered 1700_0,
'healthy'. The one-job read now reads the array's started tasks in its second command and
shows the worst, its id the one to act on.
"""

from __future__ import annotations

import asyncio
import secrets
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from probes.slurm.probe import SlurmProbe
from tests.probes.slurm.conftest import SlurmEnv, cli_json

FIX = Path(__file__).resolve().parents[2] / "fixtures"
COLLAPSE = FIX / "skyrl-rebuilt" / "console_v03_collapse.log"
HEALTHY = FIX / "trl-1.16.0" / "grpo_healthy.out"
SFT = FIX / "hf-transformers-5.24.0" / "sft_healthy.out"
OOM = ("Traceback (most recent call last):\n  File \"train.py\", line 9, in <module>\n"
       "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n")
RL = ('if [ "$SLURM_ARRAY_TASK_ID" -eq 1 ]; then cat collapse.log; else cat healthy.log; fi\n'
      'touch "rl_$SLURM_ARRAY_TASK_ID.mark"\nsleep 300\n')
SFT_BODY = ('head -c 4000 sft.log\necho\n'
            'if [ "$SLURM_ARRAY_TASK_ID" -eq 1 ]; then cat oom.txt >&2;'
            ' touch "sft_1.mark"; exit 1; fi\ntouch "sft_$SLURM_ARRAY_TASK_ID.mark"\nsleep 300\n')


def _as_user(env: SlurmEnv, *argv: str, stdin: str | None = None) -> str:
    return subprocess.run(["runuser", "-u", env.other_user, "--", *argv], check=True,
                          input=stdin, capture_output=True, text=True, timeout=60).stdout


@pytest.fixture(scope="module")
def arrays(slurm_env: SlurmEnv,
           tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dict[str, str]]]:
    env = slurm_env
    tag = secrets.token_hex(3)
    run = Path(env.other_scratch) / f"arrworst-{tag}"
    _as_user(env, "mkdir", "-p", str(run))
    for name, text in (("collapse.log", COLLAPSE.read_text()), ("healthy.log", HEALTHY.read_text()),
                       ("sft.log", SFT.read_text()), ("oom.txt", OOM)):
        _as_user(env, "tee", str(run / name), stdin=text)
    ids: dict[str, str] = {}
    try:
        ids["rl"] = _as_user(env, "sbatch", "--parsable", f"--chdir={run}", "--array=0-3%3",
                             f"--job-name=rl-arrworst-{tag}", "-o", "%x_%A_%a.out",
                             "--wrap", RL).strip()
        ids["sft"] = _as_user(env, "sbatch", "--parsable", f"--chdir={run}", "--array=0-4%2",
                              f"--job-name=sft-arrworst-{tag}", "-o", "%x_%A_%a.out",
                              "--wrap", SFT_BODY).strip()
        marks = [run / f"rl_{i}.mark" for i in range(3)] + [run / "sft_0.mark",
                                                            run / "sft_1.mark"]
        deadline = time.monotonic() + 90
        while not all(m.exists() for m in marks):
            if time.monotonic() > deadline:
                pytest.fail(f"the arrays' tasks did not start: {ids}")
            time.sleep(1)
        time.sleep(2)  # sft task 1 leaves RUNNING
        config = env.config_toml(tmp_path_factory.mktemp("arrworst"), users=[env.other_user],
                                 timeout_s=200, command_timeout_s=180)
        yield config, ids
    finally:
        if ids:
            subprocess.run(["scancel", *ids.values()], check=False, timeout=30)
            deadline = time.monotonic() + 30  # no log written after the rm
            while time.monotonic() < deadline and subprocess.run(
                    ["squeue", "-h", "-t", "RUNNING,COMPLETING", "-j", ",".join(ids.values())],
                    capture_output=True, text=True, check=False).stdout.strip():
                time.sleep(0.5)
        subprocess.run(["rm", "-rf", str(run)], check=False, timeout=30)


def test_an_arrays_own_id_shows_its_collapsing_task(arrays: tuple[Path, dict[str, str]]) -> None:
    config, ids = arrays
    row: dict[str, Any] = cli_json(config, "job", ids["rl"])
    assert row["job_id"] == f"{ids['rl']}_1", row["trend"]
    assert row["verdict"] == "collapse" and "collapse" in row["flags"]
    # the cancel is the task's (scancel of the array's id would stop the healthy tasks too)
    assert row["recommendation"]["action"] == "cancel_and_salvage"


def test_an_arrays_own_id_shows_its_failed_task_beside_running_ones(
        arrays: tuple[Path, dict[str, str]]) -> None:
    config, ids = arrays
    row = cli_json(config, "job", ids["sft"])
    assert (row["job_id"], row["state"], row["verdict"]) == (f"{ids['sft']}_1", "FAILED",
                                                             "failed"), row["trend"]
    assert "oom" in row["flags"]


def test_a_tasks_own_id_still_shows_that_task(arrays: tuple[Path, dict[str, str]]) -> None:
    """Near miss: ``123_0`` asked is ``123_0``, healthy, whatever its siblings do."""
    config, ids = arrays
    row = cli_json(config, "job", f"{ids['rl']}_0")
    assert (row["job_id"], row["verdict"]) == (f"{ids['rl']}_0", "healthy")


def test_the_tasks_are_read_in_two_commands(slurm_env: SlurmEnv,
                                           arrays: tuple[Path, dict[str, str]]) -> None:
    _, ids = arrays
    cluster = slurm_env.cluster(users=(slurm_env.other_user,))
    facts = asyncio.run(SlurmProbe(cluster).collect_one(ids["rl"]))
    assert facts.status == "ok", facts.detail
    assert facts.round_trips <= 2
    read = {j.record.job_id for j in facts.jobs if j.summary is not None}
    assert {f"{ids['rl']}_{i}" for i in range(3)} <= read, read
