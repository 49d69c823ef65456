"""A job whose StdErr is its own file (``sbatch -e``) has its faults, or its whole log, there.

Replayed on the real SLURM 22.05 as jtuser (jobs 1694-1696): an SFT job printing HF Trainer's
per-step dicts to stdout (``-o out_%j.log``) while Python wrote its traceback (CUDA out of
memory) to stderr (``-e err_%j.log``). ``jobtables sweep`` read StdOut only: the job still
running after the fault (a rank died, the others wait on it) read ``healthy``, 'Loss
descending', and the one that exited read 'FAILED exit 1' with no cause. A job logging only to
stderr (``-o /dev/null -e train_%j.err``, as Python's logging and tqdm do) read ``log-missing``,
verdict unknown, though SLURM wrote its log exactly where it asked. Tracebacks, CUDA OOMs,
NCCL errors and tqdm bars go to stderr: the scheduler's StdErr is read as well.
"""

from __future__ import annotations

import secrets
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.probes.slurm.conftest import SlurmEnv, cli_json

DICTS = """#!/bin/bash
# print N HF Trainer per-step dicts (with the tqdm bar before each) to fd $2
n=$1; fd=$2
for i in $(seq 1 "$n"); do
  printf "%3d%%|          | %d/95 [00:0%d<00:11,  8.10it/s]{'loss': '%s', 'grad_norm': '1.4', \
'learning_rate': '0.0006', 'epoch': '0.0%d'}\\n" "$i" "$i" "$i" "5.$((70 - i * 5))" "$i" >&"$fd"
done
"""
TRACEBACK = """import sys
def forward():
    raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 79.15 GiB total"
                       " capacity; 77.10 GiB already allocated)")
forward()
"""
JOBS = {
    # stdout the dicts, stderr the traceback; the job hangs on (the other ranks wait)
    "hang": ("-o out_%j.log -e err_%j.log",
             'bash dicts.sh 5 1\npython3 tb.py\necho done > "hang_$SLURM_JOB_ID.mark"\n'
             "sleep 300\n"),
    "fail": ("-o out_%j.log -e err_%j.log",
             'bash dicts.sh 5 1\npython3 tb.py\nrc=$?\necho done > "fail_$SLURM_JOB_ID.mark"\n'
             "exit $rc\n"),
    # everything on stderr, stdout discarded
    "only": ("-o /dev/null -e train_%j.err",
             'bash dicts.sh 6 2\necho done > "only_$SLURM_JOB_ID.mark"\nsleep 300\n'),
    # near miss: a split log whose stderr holds nothing but the bars stays healthy
    "clean": ("-o out_%j.log -e err_%j.log",
              'bash dicts.sh 5 1\nfor i in 1 2 3; do echo "$i/95 [00:01<00:11, 8.10it/s]" >&2;'
              ' done\necho done > "clean_$SLURM_JOB_ID.mark"\nsleep 300\n'),
}


def _as_user(env: SlurmEnv, *argv: str) -> str:
    return subprocess.run(["runuser", "-u", env.other_user, "--", *argv], check=True,
                          capture_output=True, text=True, timeout=60).stdout


@pytest.fixture(scope="module")
def submitted(slurm_env: SlurmEnv) -> Iterator[tuple[Path, dict[str, str]]]:
    env = slurm_env
    tag = secrets.token_hex(3)
    run = Path(env.other_scratch) / f"stderr-{tag}"
    _as_user(env, "mkdir", "-p", str(run))
    for name, body in (("dicts.sh", DICTS), ("tb.py", TRACEBACK)):
        subprocess.run(["runuser", "-u", env.other_user, "--", "tee", str(run / name)],
                       input=body, check=True, capture_output=True, text=True)
    ids: dict[str, str] = {}
    try:
        for key, (opts, body) in JOBS.items():
            ids[key] = _as_user(env, "sbatch", "--parsable", f"--chdir={run}",
                                f"--job-name=sft-se-{key}-{tag}", *opts.split(),
                                "--wrap", body).strip()
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            if all((run / f"{key}_{job_id}.mark").exists() for key, job_id in ids.items()):
                break
            time.sleep(1)
        else:
            pytest.fail(f"the jobs did not print their logs: {ids}")
        time.sleep(1)  # let the failing job leave RUNNING
        yield run, ids
    finally:
        if ids:
            subprocess.run(["scancel", *ids.values()], check=False, timeout=30)
        _gone(ids)
        subprocess.run(["rm", "-rf", str(run)], check=False, timeout=30)


def _gone(ids: dict[str, str]) -> None:
    """Wait (bounded) for the jobs to leave RUNNING, so no log is written after the rm."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and subprocess.run(
            ["squeue", "-h", "-t", "RUNNING,COMPLETING", "-j", ",".join(ids.values())],
            capture_output=True, text=True, check=False).stdout.strip():
        time.sleep(0.5)


@pytest.fixture(scope="module")
def sweep(slurm_env: SlurmEnv, submitted: tuple[Path, dict[str, str]],
          tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, dict[str, Any]]]:
    # A loaded test cluster (hundreds of recent jobs) may need more than the 60 s default.
    config = slurm_env.config_toml(tmp_path_factory.mktemp("stderr"), recent_hours=1,
                                   users=[slurm_env.other_user], timeout_s=200,
                                   command_timeout_s=180)
    _, ids = submitted
    rows = {j["job_id"]: j for j in cli_json(config, "sweep")["jobs"]}
    return config, {key: rows[job_id] for key, job_id in ids.items()}


def test_a_running_jobs_fault_on_stderr_is_no_healthy_row(
        sweep: tuple[Path, dict[str, dict[str, Any]]]) -> None:
    row = sweep[1]["hang"]
    assert row["state"] == "RUNNING"
    assert row["step"] == 5  # stdout's dicts are still read
    assert "oom" in row["flags"], row
    assert row["verdict"] != "healthy", row


def test_a_failed_jobs_cause_on_stderr_is_quoted(
        submitted: tuple[Path, dict[str, str]],
        sweep: tuple[Path, dict[str, dict[str, Any]]]) -> None:
    # The one-job read (a loaded cluster's sweep may leave an ended job's log unread by its
    # deadline: 'read in part'); the sweep reads the same files through the same collector.
    row = cli_json(sweep[0], "job", submitted[1]["fail"])
    assert row["state"] == "FAILED"
    assert "oom" in row["flags"], row
    assert "CUDA out of memory" in row["trend"], row
    assert "CUDA out of memory" in row["recommendation"]["why"], row


def test_a_log_written_to_stderr_only_is_read_there(
        submitted: tuple[Path, dict[str, str]],
        sweep: tuple[Path, dict[str, dict[str, Any]]]) -> None:
    run, ids = submitted
    row = sweep[1]["only"]
    assert row["log_path"] == f"{run}/train_{ids['only']}.err", row
    assert "log-missing" not in row["flags"] and "log-path-mismatch" not in row["flags"], row
    assert row["step"] == 6 and row["verdict"] == "healthy", row


def test_a_stderr_of_bars_only_leaves_a_healthy_row_healthy(
        sweep: tuple[Path, dict[str, dict[str, Any]]]) -> None:
    row = sweep[1]["clean"]
    assert row["verdict"] == "healthy" and row["flags"] == [], row
    assert row["step"] == 5


def test_jobtables_job_reads_the_stderr_as_the_sweep_does(
        submitted: tuple[Path, dict[str, str]],
        sweep: tuple[Path, dict[str, dict[str, Any]]]) -> None:
    config, _ = sweep
    _, ids = submitted
    for key in ("hang", "only"):
        row = cli_json(config, "job", ids[key])
        assert row["flags"] == sweep[1][key]["flags"], (key, row)
        assert row["verdict"] == sweep[1][key]["verdict"], (key, row)
        assert row["log_path"] == sweep[1][key]["log_path"], (key, row)
