"""Harbor runs of installed agents in ``harbor run -o jobs/<model>`` layouts, through
``jobtables sweep --format json``, replayed by real sbatch jobs as jtuser.

Each job writes a Harbor 0.26.0 tree into its workdir as it starts (``tests/fixtures/
harbor-0.26.0/agents``, Harbor's own serialisation: job dirs one level below ``jobs/``, each
trial's turns only in its ATIF ``agent/trajectory.json``) and prints Harbor's progress rows as a
terminal shows them. Before 2e9d9bf: the eval read buffering, 0/20 trials; the datagen run
trials 6 (its last row), no Chunks, no avg_turns; the dead-engine run healthy, no flag. Before
475be1c: the eval writing to scratch (``-o``) read its progress row's 16/20 and no pass-rate.
"""

from __future__ import annotations

import asyncio
import io
import json
import secrets
import shutil
import subprocess
import tarfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from probes.slurm.probe import SlurmProbe
from tests.probes.slurm.conftest import SlurmEnv, cli_json

AGENTS = Path(__file__).resolve().parents[2] / "fixtures" / "harbor-0.26.0" / "agents"
SCRIPT = ('cp -r src/jobs ./jobs\n'
          'echo "+ harbor run -d {dataset} -a {agent} -o jobs/$(ls jobs)"\n'
          'cat src/console.txt\n'
          'echo done > "mark_$SLURM_JOB_ID"\n'
          'sleep 300\n')
SCRATCH = ('harbor() {{ {{ set +x; }} 2>/dev/null; cp -r src/jobs/*/* "{jobs}/"; '
           'cat src/console.txt; echo done > "mark_$SLURM_JOB_ID"; sleep 300; }}\n'
           'set -x\n'
           'harbor run -d terminal-bench@2.0 -a claude-code -m anthropic/claude-sonnet-4-5 '
           '-o "{jobs}"\n')
"""An eval whose jobs dir is on scratch (``-o``), outside the workdir and every root; the
batch script's ``set -x`` echoes the command, the one place a running Harbor names it."""
RUNS = {"datagen": ("datagen-swe-openhands", "swe-smith", "openhands"),
        "dead": ("datagen-swe-dead", "swe-smith", "openhands"),
        "eval": ("eval-claude-sonnet-tbench", "terminal-bench", "claude-code"),
        "scratch": ("eval-claude-sonnet-scratch", "terminal-bench", "claude-code")}


def _as_user(env: SlurmEnv, *argv: str, stdin: bytes | None = None) -> str:
    return subprocess.run(["runuser", "-u", env.other_user, "--", *argv], input=stdin,
                          check=True, capture_output=True, timeout=60).stdout.decode()


def _tarred(src: Path) -> bytes:
    """``src``'s jobs/ and console.txt as ``src/...``, for the job user to unpack."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        tar.add(src / "jobs", arcname="src/jobs")
        tar.add(src / "console.txt", arcname="src/console.txt")
    return out.getvalue()


def _harbor_turns(jobs: Path) -> float:
    """The mean of each finished trial's agent steps (Harbor's rewardkit count)."""
    turns = []
    for result in jobs.glob("*/*/*/result.json"):
        steps = json.loads((result.parent / "agent" / "trajectory.json").read_text())["steps"]
        turns.append(sum(1 for s in steps if s.get("source") == "agent"))
    return sum(turns) / len(turns)


@pytest.fixture(scope="module")
def rows(slurm_env: SlurmEnv, tmp_path_factory: pytest.TempPathFactory
         ) -> Iterator[dict[str, dict[str, Any]]]:
    env, tag = slurm_env, secrets.token_hex(3)
    base = Path(env.other_scratch) / f"agents-{tag}"
    ids: dict[str, str] = {}
    try:
        for key, (name, dataset, agent) in RUNS.items():
            run = base / key
            _as_user(env, "mkdir", "-p", str(run), str(base / "scratch-jobs"))
            _as_user(env, "tar", "-x", "-C", str(run),
                     stdin=_tarred(AGENTS / ("eval" if key == "scratch" else key)))
            script = (SCRATCH.format(jobs=base / "scratch-jobs") if key == "scratch"
                      else SCRIPT.format(dataset=dataset, agent=agent))
            ids[key] = _as_user(env, "sbatch", "--parsable", f"--chdir={run}", "--time=10",
                                f"--job-name={name}-{tag}", "-o", "out_%j.log",
                                "--wrap", script).strip()
        deadline = time.monotonic() + 90
        while not all((base / k / f"mark_{i}").exists() for k, i in ids.items()):
            if time.monotonic() > deadline:
                pytest.fail(f"the jobs did not write their trees: {ids}")
            time.sleep(1)
        config = env.config_toml(tmp_path_factory.mktemp("agents"), recent_hours=1,
                                 users=[env.other_user], timeout_s=200, command_timeout_s=180)
        by_id = {j["job_id"]: j for j in cli_json(config, "sweep")["jobs"]}
        out = {key: by_id[job_id] for key, job_id in ids.items()}
        for key, job_id in ids.items():
            doc = cli_json(config, "job", job_id)
            out[f"job-{key}"] = doc["jobs"][0] if "jobs" in doc else doc
        cluster = env.cluster(users=(env.other_user,))
        out["trips"] = {"sweep": asyncio.run(SlurmProbe(cluster).collect()).round_trips,
                        "job": asyncio.run(SlurmProbe(cluster).collect_one(ids["eval"]))
                        .round_trips}
        yield out
    finally:
        if ids:
            subprocess.run(["scancel", *ids.values()], check=False, timeout=30)
        deadline = time.monotonic() + 30
        while ids and time.monotonic() < deadline and subprocess.run(
                ["squeue", "-h", "-t", "RUNNING,COMPLETING", "-j", ",".join(ids.values())],
                capture_output=True, text=True, check=False).stdout.strip():
            time.sleep(0.5)
        shutil.rmtree(base, ignore_errors=True)


def test_datagen_chunks_below_jobs_model(rows: dict[str, dict[str, Any]]) -> None:
    """Chunks 2/3 done, every trial counted, openhands' turns, exc% of the whole run."""
    row = rows["datagen"]
    assert row["bucket"] == "datagen" and row["state"] == "RUNNING"
    m = row["metrics"]
    assert (m["chunks_done"], m["chunks_total"], m["trials"]) == (2, 3, 26)
    assert m["avg_turns"] == pytest.approx(_harbor_turns(AGENTS / "datagen" / "jobs"))
    assert m["exc_pct"] == pytest.approx(100 * 4 / 26)
    assert m["mean_reward"] == pytest.approx(11 / 26)
    assert "dead-engine" not in row["flags"] and row["verdict"] == "healthy"


def test_a_dead_engine_openhands_run_is_dead_engine(rows: dict[str, dict[str, Any]]) -> None:
    row = rows["dead"]
    assert row["metrics"]["avg_turns"] == 1.0
    assert "dead-engine" in row["flags"]
    assert row["recommendation"]["action"] == "diagnose"


def test_a_claude_code_eval_below_jobs_model(rows: dict[str, dict[str, Any]]) -> None:
    """16 of 20 trials, pass-rate over the finished ones, AgentTimeoutError on top."""
    row = rows["eval"]
    assert row["bucket"] == "eval" and "buffer-filling" not in row["flags"]
    m = row["metrics"]
    assert (m["trials"], m["trials_total"]) == (16, 20)
    assert m["pass_rate"] == pytest.approx(6 / 16)
    assert m["top_exception"] == "AgentTimeoutError"


def test_the_nested_trees_cost_no_remote_command(rows: dict[str, dict[str, Any]]) -> None:
    """The job dirs below jobs/<model>/ and the trajectories are read inside the one batched
    collector command: a cold sweep within three remote commands, ``jobtables job`` two."""
    assert rows["trips"]["sweep"] <= 3
    assert rows["trips"]["job"] <= 2


def test_an_eval_writing_to_scratch_is_read_where_its_command_names(
        rows: dict[str, dict[str, Any]]) -> None:
    """``harbor run -o /scratch/...`` echoed by ``set -x``: the tree under no root is read."""
    m = rows["scratch"]["metrics"]
    assert (m["trials"], m["trials_total"]) == (16, 20)
    assert m["pass_rate"] == pytest.approx(6 / 16)
    assert m["top_exception"] == "AgentTimeoutError"


@pytest.mark.parametrize("key", RUNS)
def test_jobtables_job_reads_each_row_as_the_sweep_does(rows: dict[str, dict[str, Any]],
                                                        key: str) -> None:
    """``jobtables job ID`` (one job's read) counts the same trees, turns and flags."""
    swept, one = rows[key], rows[f"job-{key}"]
    assert one["metrics"] == pytest.approx(swept["metrics"])
    assert one["flags"] == swept["flags"]
