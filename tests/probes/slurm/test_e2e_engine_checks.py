"""Eval engine checks through ``jobtables sweep --format json``, replayed by real sbatch jobs.

Replayed on the real SLURM 22.05 as jtuser, each job writing a Harbor job dir in Harbor's
format (``tests/fixtures/harbor-dryrun/make_tree.py``) and its engine's lines as the engine
prints them, the engine idle for 25 minutes (its lines stamped then, its file's mtime then):

- ``sglang``: SGLang in the job's StdOut, whose scheduler logs batches only while it has
  requests: its last line still says ``#running-req: 3``. Read healthy before 0a55077.
- ``vllmfile``: vLLM started in the background with its own log (``vllm_$SLURM_JOB_ID.log``),
  Harbor on StdOut: every engine line was out of what was read (``engine?``) before 9f4e571.
- ``busy``: near miss, the same own-file vLLM serving up to now: ``engine✓``, no flag.
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
TREE = ('python3 make_tree.py "jobs/$(date -u +%Y-%m-%d__%H-%M-%S)" '
        "--mix pass=10,fail=20,inflight=16 --total 300 --seed 7 --minutes-ago 40\n")
LAUNCH = ('echo "$(date -u -d -70min +%Y-%m-%dT%H:%M:%SZ) INF Registered tunnel connection '
          'connIndex=0 event=0 ip=198.41.192.7 location=sjc06 protocol=quic"\n'
          'echo "Sandbox agent config: api_base=https://eval-engine.example.org/v1"\n')
SGLANG = ('echo "[$(date -u -d -{m}min "+%Y-%m-%d %H:%M:%S")] Decode batch. #running-req: 3, '
          '#token: 48213, token usage: 0.31, cuda graph: True, gen throughput (token/s): '
          '412.50, #queue-req: 0, "\n')
VLLM = ('echo "(APIServer pid=812) INFO $(date -u -d -{m}min "+%m-%d %H:%M:%S") '
        "[loggers.py:123] Engine 000: Avg prompt throughput: 0.0 tokens/s, Avg generation "
        'throughput: {gen} tokens/s, Running: {n} reqs, Waiting: 0 reqs, GPU KV cache usage: '
        '1.0%, Prefix cache hit rate: 64.0%"\n')
POST = ("echo '(APIServer pid=812) INFO:     10.4.7.21:51234 - "
        '"POST /v1/chat/completions HTTP/1.1" 200 OK\'\n')


def _script(key: str) -> str:
    body = TREE + LAUNCH
    if key == "sglang":
        body += "".join(SGLANG.format(m=m) + POST for m in (40, 30)) + SGLANG.format(m=25)
        body += 'touch -d -25min "out_$SLURM_JOB_ID.log"\n'
    else:
        quiet = 25 if key == "vllmfile" else 0
        lines = "".join(VLLM.format(m=m, gen="1800.0", n=12) + POST
                        for m in (40, 30, quiet + 1))
        if key == "vllmfile":
            lines += VLLM.format(m=quiet, gen="0.0", n=0)
        body += "{\n" + lines + '} > "vllm_$SLURM_JOB_ID.log"\n'
        body += f'touch -d -{quiet}min "vllm_$SLURM_JOB_ID.log"\n'
    return body + f'echo done > "{key}_$SLURM_JOB_ID.mark"\nsleep 300\n'


def _as_user(env: SlurmEnv, *argv: str, stdin: str | None = None) -> str:
    return subprocess.run(["runuser", "-u", env.other_user, "--", *argv], input=stdin,
                          check=True, capture_output=True, text=True, timeout=60).stdout


@pytest.fixture(scope="module")
def rows(slurm_env: SlurmEnv, tmp_path_factory: pytest.TempPathFactory
         ) -> Iterator[dict[str, dict[str, Any]]]:
    env, tag = slurm_env, secrets.token_hex(3)
    base = Path(env.other_scratch) / f"engine-{tag}"
    ids: dict[str, str] = {}
    try:
        for key in ("sglang", "vllmfile", "busy"):
            run = base / key
            _as_user(env, "mkdir", "-p", str(run))
            _as_user(env, "tee", str(run / "make_tree.py"), stdin=MAKE.read_text())
            ids[key] = _as_user(env, "sbatch", "--parsable", f"--chdir={run}", "--time=10",
                                f"--job-name=eval-qwen3-x-tbench-{key}-{tag}",
                                "-o", "out_%j.log", "--wrap", _script(key)).strip()
        deadline = time.monotonic() + 90
        while not all((base / k / f"{k}_{i}.mark").exists() for k, i in ids.items()):
            if time.monotonic() > deadline:
                pytest.fail(f"the jobs did not write their logs: {ids}")
            time.sleep(1)
        config = env.config_toml(tmp_path_factory.mktemp("engine"), recent_hours=1,
                                 users=[env.other_user], timeout_s=200, command_timeout_s=180)
        by_id = {j["job_id"]: j for j in cli_json(config, "sweep")["jobs"]}
        yield {key: by_id[job_id] for key, job_id in ids.items()}
    finally:
        if ids:
            subprocess.run(["scancel", *ids.values()], check=False, timeout=30)
        deadline = time.monotonic() + 30
        while ids and time.monotonic() < deadline and subprocess.run(
                ["squeue", "-h", "-t", "RUNNING,COMPLETING", "-j", ",".join(ids.values())],
                capture_output=True, text=True, check=False).stdout.strip():
            time.sleep(0.5)
        shutil.rmtree(base, ignore_errors=True)


@pytest.mark.parametrize("key", ["sglang", "vllmfile"])
def test_an_idle_engine_is_engine_idle(rows: dict[str, dict[str, Any]], key: str) -> None:
    row = rows[key]
    assert row["state"] == "RUNNING" and row["bucket"] == "eval"
    assert "engine-idle" in row["flags"], row
    assert row["verdict"] == "warning"
    assert row["recommendation"]["action"] == "diagnose"


def test_a_busy_engine_in_its_own_log_is_no_flag(rows: dict[str, dict[str, Any]]) -> None:
    row = rows["busy"]
    assert "engine-idle" not in row["flags"], row
    assert row["verdict"] == "healthy"
