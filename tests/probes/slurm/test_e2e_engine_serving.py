"""An eval's engine serving its agents, end to end on the real SLURM (``jobtables job``).

As replayed by hand (jobs 62 and 1546, jtuser): each sbatch job writes a Harbor job dir in
Harbor's format (``tests/fixtures/harbor-dryrun/make_tree.py``) and keeps printing vLLM's lines
as it prints them (``POST ... 200 OK``, ``Running: N reqs``) every 5 s:

- ``tail``: 299 of 300 trials done, the last one still served (``Running: 1 reqs``): with
  ``eval_stall_minutes = 0.5`` (60 by default) and no result.json for longer, its hard-trial
  tail, no stall; ``stalled``: 150 of 300, the engine serving 16, is still a stall.
- ``instfresh``: 3 trials ended at once with null output beside 13 the engine answers: a note,
  not instant-fail; ``instant``: 40 of 40 instant, no engine line, is instant-fail.
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
TREE = 'python3 make_tree.py "jobs/$(date -u +%Y-%m-%d__%H-%M-%S)" --total 300 --mix {mix}\n'
LAUNCH = ('echo "$(date -u +%Y-%m-%dT%H:%M:%SZ) INF Registered tunnel connection connIndex=0 '
          'event=0 ip=198.41.192.7 location=sjc06 protocol=quic"\n'
          'echo "Sandbox agent config: api_base=https://eval-engine.example.org/v1"\n')
SERVE = ("while true; do echo '(APIServer pid=812) INFO:     10.4.7.21:51234 - \"POST "
         "/v1/chat/completions HTTP/1.1\" 200 OK'; echo \"(APIServer pid=812) INFO $(date -u "
         "'+%m-%d %H:%M:%S') [loggers.py:123] Engine 000: Avg prompt throughput: 0.0 tokens/s, "
         "Avg generation throughput: 40.0 tokens/s, Running: {n} reqs, Waiting: 0 reqs, GPU KV "
         "cache usage: 1.0%, Prefix cache hit rate: 64.0%\"; sleep 5; done\n")
JOBS = {
    "tail": ("pass=90,fail=150,timeout=59,inflight=1", 1),
    "stalled": ("pass=50,fail=100,inflight=16", 16),
    "instfresh": ("instant=3,inflight=13", 13),
    "instant": ("instant=40,inflight=16", None),
}


def _script(key: str) -> str:
    mix, running = JOBS[key]
    body = TREE.format(mix=mix) + LAUNCH
    return body + (SERVE.format(n=running) if running is not None else "sleep 300\n")


def _as_user(env: SlurmEnv, *argv: str, stdin: str | None = None) -> str:
    return subprocess.run(["runuser", "-u", env.other_user, "--", *argv], input=stdin,
                          check=True, capture_output=True, text=True, timeout=60).stdout


@pytest.fixture(scope="module")
def rows(slurm_env: SlurmEnv, tmp_path_factory: pytest.TempPathFactory
         ) -> Iterator[dict[str, dict[str, Any]]]:
    env, tag = slurm_env, secrets.token_hex(3)
    base = Path(env.other_scratch) / f"serving-{tag}"
    ids: dict[str, str] = {}
    try:
        # the tail submitted last, so its tree is the newest: judged first, 40 s after it, it
        # is within its serving tail's bound (3 stall windows: 90 s here) however long the
        # others took to start
        for key in reversed(JOBS):
            run = base / key
            _as_user(env, "mkdir", "-p", str(run))
            _as_user(env, "tee", str(run / "make_tree.py"), stdin=MAKE.read_text())
            ids[key] = _as_user(env, "sbatch", "--parsable", f"--chdir={run}", "--time=5",
                                f"--job-name=eval-qwen3-x-tbench-{key}-{tag}",
                                "-o", "out_%j.log", "--wrap", _script(key)).strip()
        deadline = time.monotonic() + 90
        while not all(any((base / k / "jobs").glob("*/result.json")) for k in ids):
            if time.monotonic() > deadline:
                pytest.fail(f"the jobs did not write their trees: {ids}")
            time.sleep(1)
        time.sleep(40)  # past eval_stall_minutes = 0.5 since the trees were written
        config = env.config_toml(tmp_path_factory.mktemp("serving"), recent_hours=1,
                                 users=[env.other_user], timeout_s=200, command_timeout_s=180)
        config.write_text(config.read_text() + "\n[thresholds]\neval_stall_minutes = 0.5\n")
        yield {key: cli_json(config, "job", ids[key]) for key in JOBS}
    finally:
        if ids:
            subprocess.run(["scancel", *ids.values()], check=False, timeout=30)
        shutil.rmtree(base, ignore_errors=True)


def test_the_last_trial_served_by_the_engine_is_the_tail_not_a_stall(
        rows: dict[str, dict[str, Any]]) -> None:
    row = rows["tail"]
    assert row["state"] == "RUNNING" and "stall" not in row["flags"], row
    assert row["verdict"] == "healthy" and "hard-trial tail" in row["trend"], row


def test_a_run_far_from_done_is_still_a_stall(rows: dict[str, dict[str, Any]]) -> None:
    row = rows["stalled"]
    assert "stall" in row["flags"] and row["verdict"] == "stalled", row


def test_first_instant_failures_beside_a_serving_engine_are_a_note(
        rows: dict[str, dict[str, Any]]) -> None:
    row = rows["instfresh"]  # (stalled too: the window of 0.5 min is the tail's)
    assert "instant-fail" not in row["flags"], row


def test_instant_trials_with_no_engine_line_are_instant_fail(
        rows: dict[str, dict[str, Any]]) -> None:
    row = rows["instant"]
    assert "instant-fail" in row["flags"], row
