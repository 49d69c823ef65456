"""A restart appending to its predecessor's log is timed from its own start, on the real SLURM.

As replayed by hand for f1dccfa: jtuser's eval and datagen runs (umask 077, so their Harbor
``jobs/`` tree is unreadable to the ``jobtables`` SSH user) whose walltime TIMEOUT ended the
shared ``logs/run.log`` (``--open-mode=append``) with slurmstepd's end line, the log and tree
set back 5 hours with ``touch -d`` (the restart queued that long), then the restart started
with no line of its own yet. ``jobtables sweep --format json`` and ``jobtables job`` read
``STALL: no new log line for 5h00m`` (eval) and ``HUNG: no log line for 5h00m (trial tree
unreadable)`` (datagen) seconds after the start; both are bring-up.
"""

from __future__ import annotations

import secrets
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.probes.slurm.conftest import SlurmEnv, cli_json

MAKE = Path(__file__).parents[2] / "fixtures" / "harbor-dryrun" / "make_tree.py"
PREDECESSOR = (
    "$(date -u -d -5hours +%Y-%m-%dT%H:%M:%SZ) INF Registered tunnel connection connIndex=0 "
    "event=0 ip=198.41.192.7 location=sjc06 protocol=quic\n"
    "⠋  30/300 Mean: 0.333 ━━━━━━━━━━━━━━━━━━━ 0:12:31 0:20:02\n"
    "slurmstepd-vm: error: *** JOB 1 ON vm CANCELLED AT $(date -u -d -5hours +%Y-%m-%dT%H:%M:%S)"
    " DUE TO TIME LIMIT ***\n"
)
"""The predecessor's part of the log: Harbor's row, then slurmstepd's end of an earlier job."""
SETUP = ('(umask 077; python3 make_tree.py "jobs/$(date -u -d -5hours +%Y-%m-%d__%H-%M-%S)" '
         "--mix pass=10,fail=20,inflight=16 --total 300 --seed 41 --minutes-ago 330)\n"
         f'mkdir -p logs && printf "%s" "{PREDECESSOR}" > logs/run.log\n'
         "find jobs logs -exec touch -h -d '-5 hours' {} +\n")


def _as_user(env: SlurmEnv, *argv: str, stdin: str | None = None) -> str:
    return subprocess.run(["runuser", "-u", env.other_user, "--", *argv], input=stdin,
                          check=True, capture_output=True, text=True, timeout=60).stdout


@pytest.fixture(scope="module")
def rows(slurm_env: SlurmEnv, tmp_path_factory: pytest.TempPathFactory
         ) -> Iterator[tuple[Path, dict[str, dict[str, Any]]]]:
    env, tag = slurm_env, secrets.token_hex(3)
    base = Path(env.other_scratch) / f"append-{tag}"
    ids: dict[str, str] = {}
    try:
        for key in ("eval-qwen3-x-tbench", "datagen-tb"):
            run = base / key
            _as_user(env, "mkdir", "-p", str(run))
            _as_user(env, "tee", str(run / "make_tree.py"), stdin=MAKE.read_text())
            _as_user(env, "bash", "-c", f"cd {run} && " + SETUP.replace("\n", " && ")[:-4])
            ids[key] = _as_user(
                env, "sbatch", "--parsable", f"--chdir={run}", "--time=5",
                f"--job-name={key}-append-{tag}", "--open-mode=append", "-o", "logs/run.log",
                "--wrap", "umask 077; sleep 300").strip()
        deadline = time.monotonic() + 90
        while subprocess.run(["squeue", "-h", "-t", "PENDING", "-j", ",".join(ids.values())],
                             capture_output=True, text=True, check=False).stdout.strip():
            if time.monotonic() > deadline:
                pytest.fail(f"the restarts did not start: {ids}")
            time.sleep(1)
        config = env.config_toml(tmp_path_factory.mktemp("append"), recent_hours=1,
                                 users=[env.other_user], timeout_s=200, command_timeout_s=180)
        by_id = {j["job_id"]: j for j in cli_json(config, "sweep")["jobs"]}
        rows = {key: by_id[job_id] for key, job_id in ids.items()}
        rows["eval-job"] = cli_json(config, "job", ids["eval-qwen3-x-tbench"])
        yield config, rows
    finally:
        if ids:
            subprocess.run(["scancel", *ids.values()], check=False, timeout=30)
        shutil.rmtree(base, ignore_errors=True)


@pytest.mark.parametrize("key", ["eval-qwen3-x-tbench", "datagen-tb"])
def test_a_restart_under_its_predecessors_old_log_is_bring_up(
        rows: tuple[Path, dict[str, dict[str, Any]]], key: str) -> None:
    row = rows[1][key]
    assert row["state"] == "RUNNING", row
    assert "stall" not in row["flags"] and "5h00m" not in row["trend"], row
    assert row["verdict"] == "buffering", row
    assert "unreadable" in row["trend"], row


def test_jobtables_job_reads_it_alike(rows: tuple[Path, dict[str, dict[str, Any]]]) -> None:
    doc = rows[1]["eval-job"]
    job = doc.get("job", doc)
    assert "stall" not in job["flags"] and job["verdict"] == "buffering", job
