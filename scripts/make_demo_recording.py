"""Build the bundled demo recording (``bot/demo/recording``) from real trainer output.

How it is made: job logs are slices of the fixtures under ``tests/fixtures`` (real HF
Trainer, TRL, verl and torchrun output; SkyRL rebuilt from its source; Harbor trials
serialised with harbor's own models), laid out in a scratch tree the way a SLURM cluster
would hold them; the queue is written in SLURM 23.11's ``squeue --json`` shape; then the real
collector (``probes/collector.py``) reads that tree exactly as it reads a live login node,
and the scratch prefix is stripped so paths read ``/home/alice/...``. Re-run it after a
fixture or collector change: ``.venv/bin/python scripts/make_demo_recording.py``.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from probes.remote.collector import collect

ROOT = Path(__file__).resolve().parents[1]
FIX = ROOT / "tests" / "fixtures"
OUT = ROOT / "bot" / "demo" / "recording"
NOW = datetime(2026, 11, 30, 16, 0, tzinfo=UTC)


def _fixture(glob: str) -> str:
    hits = sorted(FIX.glob(glob))
    if not hits:
        raise SystemExit(f"missing fixture {glob}")
    return hits[0].read_text(encoding="utf-8", errors="replace")


def _cut(text: str, marker: str, occurrence: int) -> str:
    """Text up to (not including) the ``occurrence``-th line containing ``marker``."""
    count = 0
    out = []
    for line in text.splitlines(keepends=True):
        if marker in line:
            count += 1
            if count >= occurrence:
                break
        out.append(line)
    return "".join(out)


BRING_UP = """\
+ srun --kill-on-bad-exit=1 python -m skyrl.train.entrypoints.main_base +experiment=grpo_qwen7b_geom4x8
2026-11-30 15:52:10,114\tINFO worker.py:1832 -- Started a local Ray instance.
(skyrl_entrypoint pid=88121) 2026-11-30 15:52:14.908 | INFO     | skyrl.train.entrypoints.main_base:main:402 - Waiting for gang admission: 32/32 GPUs reserved
(skyrl_entrypoint pid=88121) 2026-11-30 15:53:02.551 | INFO     | skyrl.train.utils.utils:initialize_ray:211 - Loading mesh 4x8 (tp=4, dp=8)
(EngineCore_DP0 pid=88410) INFO 11-30 15:55:41 [loader.py:458] Loading weights took 88.43 seconds
(EngineCore_DP0 pid=88410) INFO 11-30 15:57:03 [shm_broadcast.py:542] No available shared memory broadcast block found in 60 seconds. This typically happens when some processes are hanging or doing some time-consuming work (e.g. compilation, weight/kv cache quantization).
(EngineCore_DP0 pid=88410) INFO 11-30 15:58:03 [shm_broadcast.py:542] No available shared memory broadcast block found in 60 seconds. This typically happens when some processes are hanging or doing some time-consuming work (e.g. compilation, weight/kv cache quantization).
(skyrl_entrypoint pid=88121) 2026-11-30 15:59:12.031 | INFO     | skyrl.train.trainer:train:288 - Filling generation buffer: 112/256 trajectories
"""

CONSOLIDATE = """\
[consolidate] reading 20 chunks from /home/alice/datagen/swe-traces/jobs
[consolidate] 8,614 trials, 6,977 with a verifier result
[consolidate] pushing 6,977 rows -> hf://datasets/team/swe-traces-v3 (shard 3/7)
"""


def _job(job_id: int, name: str, user: str, state: str, *, submit_ago_min: float,
         run_min: float | None, workdir: str, stdout: str | None, limit_min: int = 2880,
         dependency: str = "", exit_code: int = 0, reason: str = "None") -> dict[str, Any]:
    submit = NOW - timedelta(minutes=submit_ago_min)
    start = submit + timedelta(minutes=2) if (run_min is not None or state == "RUNNING") else None
    end = start + timedelta(minutes=run_min) if (start and state not in {"RUNNING"}) else None

    def t(value: datetime | None) -> dict[str, Any]:
        return {"set": value is not None, "infinite": False,
                "number": int(value.timestamp()) if value else 0}

    return {
        "job_id": job_id, "name": name, "user_name": user, "account": "post-training",
        "partition": "gpu", "job_state": [state], "state_reason": reason,
        "dependency": dependency, "current_working_directory": workdir,
        "standard_output": stdout or "", "standard_error": "", "command": f"{workdir}/run.sbatch",
        "submit_time": t(submit), "start_time": t(start), "end_time": t(end),
        "time_limit": {"set": True, "infinite": False, "number": limit_min},
        "exit_code": {"status": ["SUCCESS" if exit_code == 0 else "ERROR"],
                      "return_code": {"set": True, "infinite": False, "number": exit_code},
                      "signal": {"id": {"set": False, "infinite": False, "number": 0},
                                 "name": ""}},
        "nodes": "gpu-[017-020]" if start else "", "restart_cnt": 0,
        "array_job_id": {"set": True, "infinite": False, "number": 0},
        "array_task_id": {"set": False, "infinite": False, "number": 0},
    }


class Tree:
    """The scratch file system the collector reads, with paths as they read on the cluster."""

    def __init__(self, base: Path) -> None:
        self.base = base

    def real(self, path: str) -> Path:
        return self.base / path.lstrip("/")

    def write(self, path: str, text: str, *, ago_min: float) -> None:
        target = self.real(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
        stamp = (NOW - timedelta(minutes=ago_min)).timestamp()
        os.utime(target, (stamp, stamp))

    def checkpoints(self, root: str, steps: list[int], *, marker: bool = True) -> None:
        for step in steps:
            (self.real(root) / f"global_step_{step}" / "policy").mkdir(parents=True, exist_ok=True)
        if marker and steps:
            (self.real(root) / "latest_ckpt_global_step.txt").write_text(str(max(steps)))

    def harbor(self, dest: str, source: Path, *, newest_ago_min: float, keep: int | None = None,
               finished: bool = False, total: int | None = None) -> None:
        """Copy a Harbor job dir, shifting its timestamps so the newest trial ended when asked."""
        target = self.real(dest)
        shutil.copytree(source, target)
        results = sorted(target.glob("*/result.json"))
        if keep is not None:
            for extra in results[keep:]:
                shutil.rmtree(extra.parent)
            results = results[:keep]
        stamps = [json.loads(p.read_text()).get("finished_at") for p in results]
        newest = max(datetime.fromisoformat(s.replace("Z", "+00:00")) for s in stamps if s)
        shift = (NOW - timedelta(minutes=newest_ago_min)) - newest
        for path in results:
            path.write_text(_shift_times(path.read_text(), shift))
        job_file = target / "result.json"
        if job_file.exists():
            data = json.loads(_shift_times(job_file.read_text(), shift))
            if not finished:
                data["finished_at"] = None
            if total is not None:
                data["n_total_trials"] = total
            job_file.write_text(json.dumps(data, indent=4))


def _shift_times(text: str, shift: timedelta) -> str:
    data = json.loads(text)

    def walk(node: Any) -> Any:
        if isinstance(node, dict):
            return {k: (_shift(v, shift) if k.endswith("_at") and isinstance(v, str) else walk(v))
                    for k, v in node.items()}
        if isinstance(node, list):
            return [walk(v) for v in node]
        return node

    return json.dumps(walk(data), indent=4)


def _shift(value: str, shift: timedelta) -> str:
    try:
        stamp = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return value
    return (stamp + shift).isoformat()


def build(tree: Tree) -> list[dict[str, Any]]:
    """Lay out every demo job's files; return the squeue job objects."""
    jobs: list[dict[str, Any]] = []
    skyrl = _fixture("skyrl-rebuilt/console_v03.log")
    collapse = _fixture("skyrl-rebuilt/console_v03_collapse.log")
    skyrl4 = _fixture("skyrl-rebuilt/console_v04.log")

    w = "/home/alice/rl/qwen7b-shaped"
    tree.write(f"{w}/logs/rl-grpo-qwen7b-shaped_41001.out", collapse, ago_min=1)
    tree.checkpoints(f"{w}/checkpoints", [10, 20])
    jobs.append(_job(41001, "rl-grpo-qwen7b-shaped", "alice", "RUNNING", submit_ago_min=400,
                     run_min=None, workdir=w, stdout=f"{w}/logs/rl-grpo-qwen7b-shaped_41001.out"))
    jobs[-1]["start_time"] = {"set": True, "infinite": False,
                              "number": int((NOW - timedelta(minutes=395)).timestamp())}

    w = "/home/alice/rl/qwen7b-base"
    tree.write(f"{w}/logs/rl-grpo-qwen7b-base_41002.out", _cut(skyrl, "Step 27:", 1), ago_min=2)
    tree.checkpoints(f"{w}/checkpoints", [10, 20])
    jobs.append(_job(41002, "rl-grpo-qwen7b-base", "alice", "RUNNING", submit_ago_min=380,
                     run_min=None, workdir=w, stdout=f"{w}/logs/rl-grpo-qwen7b-base_41002.out"))

    w = "/home/alice/rl/dapo-qwen32b"
    timeout_log = skyrl4 + ("slurmstepd: error: *** JOB 40880 ON gpu-031 CANCELLED AT "
                            "2026-11-30T15:41:07 DUE TO TIME LIMIT ***\n")
    tree.write(f"{w}/logs/rl-dapo-qwen32b_40880.out", timeout_log, ago_min=19)
    tree.write(f"{w}/logs/rl-dapo-qwen32b_41120.out", BRING_UP.splitlines(True)[0], ago_min=3)
    tree.checkpoints(f"{w}/ckpts", [15, 30])
    jobs.append(_job(40880, "rl-dapo-qwen32b", "alice", "TIMEOUT", submit_ago_min=1500,
                     run_min=1440 - 22, workdir=w, stdout=f"{w}/logs/rl-dapo-qwen32b_40880.out",
                     limit_min=1440, exit_code=0, reason="TimeLimit"))
    jobs.append(_job(41120, "rl-dapo-qwen32b", "alice", "RUNNING", submit_ago_min=1400,
                     run_min=None, workdir=w, stdout=f"{w}/logs/rl-dapo-qwen32b_41120.out",
                     limit_min=1440))
    jobs[-1]["start_time"] = {"set": True, "infinite": False,
                              "number": int((NOW - timedelta(minutes=18)).timestamp())}

    w = "/home/bob/rl/qwen3b-newmix"  # a first launch, 4 steps in: don't trust the row yet
    tree.write(f"{w}/logs/rl-grpo-qwen3b-newmix_41130.out", _cut(skyrl4, "Step 5:", 1), ago_min=1)
    jobs.append(_job(41130, "rl-grpo-qwen3b-newmix", "bob", "RUNNING", submit_ago_min=30,
                     run_min=None, workdir=w, stdout=f"{w}/logs/rl-grpo-qwen3b-newmix_41130.out"))

    w = "/home/bob/rl/qwen7b-geom"
    tree.write(f"{w}/rl-grpo-qwen7b-geom4x8_41004.out", BRING_UP, ago_min=1)
    jobs.append(_job(41004, "rl-grpo-qwen7b-geom4x8", "bob", "RUNNING", submit_ago_min=12,
                     run_min=None, workdir=w, stdout=f"{w}/rl-grpo-qwen7b-geom4x8_41004.out"))

    w = "/home/bob/verl/llama8b-ppo"
    tree.write(f"{w}/slurm-41003.out", _fixture("verl-*/console.log"), ago_min=2)
    tree.checkpoints(f"{w}/checkpoints", [20], marker=False)
    jobs.append(_job(41003, "ppo-verl-llama8b", "bob", "RUNNING", submit_ago_min=300,
                     run_min=None, workdir=w, stdout=f"{w}/slurm-41003.out"))
    _sft_jobs(tree, jobs)
    _harbor_jobs(tree, jobs)
    _other_jobs(tree, jobs)
    return jobs


def _sft_jobs(tree: Tree, jobs: list[dict[str, Any]]) -> None:
    sft = _fixture("hf-transformers-*/sft_healthy.out")
    w = "/home/alice/sft/qwen7b-coldstart"
    tree.write(f"{w}/logs/sft-qwen7b-coldstart-2ep_41010.out", _cut(sft, "'epoch'", 61),
               ago_min=1)
    for step in (30, 60):  # HF Trainer's save_steps layout under output_dir
        (tree.real(f"{w}/output") / f"checkpoint-{step}").mkdir(parents=True, exist_ok=True)
    jobs.append(_job(41010, "sft-qwen7b-coldstart-2ep", "alice", "RUNNING", submit_ago_min=90,
                     run_min=None, workdir=w, stdout=f"{w}/logs/sft-qwen7b-coldstart-2ep_41010.out"))
    # A grid: lr3e5 logs under another name than its StdOut (path mismatch); lr1e5 has a
    # restart-chain resume copy pending, which the pending-unique count must not double.
    w = "/home/bob/sft/grid"
    half = _cut(sft, "'epoch'", 25)
    tree.write(f"{w}/train_41011.out", half, ago_min=1)
    jobs.append(_job(41011, "sft-grid-lr3e5", "bob", "RUNNING", submit_ago_min=60, run_min=None,
                     workdir=w, stdout=f"{w}/logs/sft-grid-lr3e5_41011.out"))
    tree.write(f"{w}/logs/sft-grid-lr1e5_41012.out", _cut(sft, "'epoch'", 12), ago_min=1)
    jobs.append(_job(41012, "sft-grid-lr1e5", "bob", "RUNNING", submit_ago_min=30, run_min=None,
                     workdir=w, stdout=f"{w}/logs/sft-grid-lr1e5_41012.out"))
    jobs.append(_job(41013, "sft-grid-lr1e5", "bob", "PENDING", submit_ago_min=29, run_min=None,
                     workdir=w, stdout=f"{w}/logs/sft-grid-lr1e5_41013.out",
                     dependency="afterany:41012(unfulfilled)", reason="Dependency"))
    jobs.append(_job(41014, "sft-grid-lr1e4", "bob", "PENDING", submit_ago_min=29, run_min=None,
                     workdir=w, stdout=f"{w}/logs/sft-grid-lr1e4_41014.out", reason="Priority"))
    w = "/home/bob/sft/llama8b-longctx"
    tree.write(f"{w}/logs/sft-llama8b-longctx_40950.out",
               _fixture("torch-*/childfailed.out"), ago_min=47)
    jobs.append(_job(40950, "sft-llama8b-longctx", "bob", "FAILED", submit_ago_min=120,
                     run_min=70, workdir=w, stdout=f"{w}/logs/sft-llama8b-longctx_40950.out",
                     exit_code=1, reason="NonZeroExitCode"))


def _harbor_sources() -> dict[str, Path]:
    """Harbor fixture job dirs by role (see tests/fixtures/generators/README.md)."""
    base = sorted(FIX.glob("harbor-*/jobs"))
    if not base:
        raise SystemExit("missing Harbor fixtures under tests/fixtures/harbor-*/jobs")
    jobs = base[-1]
    return {"healthy": jobs / "2026-11-30__10-00-00", "dead": jobs / "2026-11-30__14-00-00",
            "instant": jobs / "2026-11-30__16-00-00"}


def _harbor_jobs(tree: Tree, jobs: list[dict[str, Any]]) -> None:
    src = _harbor_sources()
    w = "/home/alice/datagen/swe-traces"
    for chunk in range(4):
        tree.harbor(f"{w}/jobs/2026-11-30__1{chunk}-00-00", src["healthy"],
                    newest_ago_min=3 + chunk * 40, finished=chunk > 0)
    tree.write(f"{w}/logs/datagen-swe-traces_41050.out",
               "harbor run -c chunk.yaml --jobs-dir jobs\n  3/4 chunks done; chunk 4 running\n",
               ago_min=2)
    jobs.append(_job(41050, "datagen-swe-traces", "alice", "RUNNING", submit_ago_min=260,
                     run_min=None, workdir=w, stdout=f"{w}/logs/datagen-swe-traces_41050.out"))
    w = "/home/bob/datagen/tbench-synth"
    tree.harbor(f"{w}/jobs/2026-11-30__14-00-00", src["dead"], newest_ago_min=2, total=200)
    tree.write(f"{w}/logs/datagen-tbench-synth_41060.out", "harbor run -c synth.yaml\n",
               ago_min=2)
    jobs.append(_job(41060, "datagen-tbench-synth", "bob", "RUNNING", submit_ago_min=100,
                     run_min=None, workdir=w, stdout=f"{w}/logs/datagen-tbench-synth_41060.out"))
    w = "/home/alice/eval/qwen7b-tbench"
    tree.harbor(f"{w}/jobs/2026-11-30__12-30-00", src["healthy"], newest_ago_min=95, keep=18,
                total=89)
    tree.write(f"{w}/logs/eval-qwen7b-x-terminal-bench_41070.out",
               "api_base=https://qwen7b-eval.trycloudflare.com/v1\n"
               "INF Registered tunnel connection connIndex=0 location=ams01 protocol=quic\n",
               ago_min=96)
    jobs.append(_job(41070, "eval-qwen7b-x-terminal-bench", "alice", "RUNNING",
                     submit_ago_min=215, run_min=None, workdir=w,
                     stdout=f"{w}/logs/eval-qwen7b-x-terminal-bench_41070.out"))
    w = "/home/bob/eval/llama8b-swebench"
    tree.harbor(f"{w}/jobs/2026-11-30__15-00-00", src["healthy"], newest_ago_min=1, total=500)
    tree.write(f"{w}/logs/eval-llama8b-x-swebench-verified_41080.out",
               "api_base=https://llama8b-eval.trycloudflare.com/v1\n"
               "INF Registered tunnel connection connIndex=0 location=ams01 protocol=quic\n"
               + "".join(f'INFO 11-30 15:{m:02d}:10 [launcher.py:29] 10.0.3.7:51820 - '
                         f'"POST /v1/chat/completions HTTP/1.1" 200 OK\n' for m in range(45, 60)),
               ago_min=1)
    jobs.append(_job(41080, "eval-llama8b-x-swebench-verified", "bob", "RUNNING",
                     submit_ago_min=70, run_min=None, workdir=w,
                     stdout=f"{w}/logs/eval-llama8b-x-swebench-verified_41080.out"))


def _other_jobs(tree: Tree, jobs: list[dict[str, Any]]) -> None:
    w = "/home/alice/datagen/swe-traces"
    tree.write(f"{w}/logs/consolidate-swe-traces_40990.out", CONSOLIDATE, ago_min=1)
    jobs.append(_job(40990, "consolidate-swe-traces", "alice", "RUNNING", submit_ago_min=14,
                     run_min=None, workdir=w, stdout=f"{w}/logs/consolidate-swe-traces_40990.out"))
    w = "/home/bob/ci"
    tree.write(f"{w}/gpu-ci-nightly_40700.out", "==== 2 passed, 1 skipped in 341.2s ====\n",
               ago_min=50)
    jobs.append(_job(40700, "gpu-ci-nightly", "bob", "COMPLETED", submit_ago_min=70,
                     run_min=6, workdir=w, stdout=f"{w}/gpu-ci-nightly_40700.out"))


def main() -> None:
    from bot.config import Config
    from probes.config import ReplayCluster
    from probes.slurm.parse import parse_squeue_json
    from probes.slurm.request import collector_request

    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp) / "fs"
        tree = Tree(base)
        jobs = build(tree)
        for job in jobs:  # the collector reads the scratch tree; the recording shows cluster paths
            for key in ("current_working_directory", "standard_output", "command"):
                if job[key]:
                    job[key] = str(base) + job[key]
        squeue = {"jobs": jobs, "meta": {"plugin": {"type": "openapi/slurmctld",
                                                    "data_parser": "data_parser/v0.0.40"},
                                         "slurm": {"version": {"major": "23", "minor": "11",
                                                               "micro": "4"},
                                                   "release": "23.11.4", "cluster": "alpha"}},
                  "errors": [], "warnings": []}
        text = json.dumps(squeue)
        records = parse_squeue_json(text, cluster="alpha", now=NOW)
        cluster = Config(clusters=(ReplayCluster(name="alpha", path=tmp),)).clusters[0]
        collected = collect(collector_request(records, cluster))  # type: ignore[arg-type]
        collected["host"] = "login01"
        strip = str(base)
        if OUT.exists():
            shutil.rmtree(OUT)
        OUT.mkdir(parents=True)
        (OUT / "squeue.json").write_text(text.replace(strip, "") + "\n")
        (OUT / "collected.json").write_text(json.dumps(collected).replace(strip, "") + "\n")
        (OUT / "cluster.json").write_text(json.dumps({
            "format": 1, "name": "alpha", "kind": "slurm", "recorded_at": NOW.isoformat(),
            "slurm_version": "23.11.4", "users": ["alice", "bob"],
            "note": "synthesised from real trainer output; see scripts/make_demo_recording.py",
        }, indent=2) + "\n")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
