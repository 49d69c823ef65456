"""An eval's inference engine logging to a file of its own, as launch scripts start it.

An eval job commonly starts its engine in the background with its own log (``vllm serve ... >
vllm_$SLURM_JOB_ID.log 2>&1 &``) and runs Harbor in the foreground, so the job's StdOut holds
Harbor's lines and none of the engine's. Replayed on the real SLURM 22.05: such an eval whose
engine had served nothing for 25 minutes (one ``Running: 0 reqs`` stats line, then vLLM's idle
silence) read ``engine?`` and no flag, where the same engine lines in StdOut read
``engine-idle``. The rulebook's launch checks (engine POSTs growing with 200s, "verify the
engine is actually down before blaming it") read the engine's own log: a file in the job's
workdir (or its ``logs/``) named for the job's id and an engine (``vllm``, ``sglang``,
``engine``, ``server``), read for a job running Harbor trials, its tail's engine lines timed on
that file's own clock.
"""

from __future__ import annotations

import json
import os
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from probes.models import JobState
from probes.remote import collector
from probes.remote.engine_logs import ENGINE_LINES, engine_lines
from probes.remote.job_files import PREAMBLE_BYTES
from probes.remote.script import build_collector_script
from probes.slurm.assemble import job_facts
from report.models import JobDetail
from tests.report.factories import judge, record
from tests.report.test_harbor_dryrun_datagen import MAKE

JOB = "7301"
PY37 = Path.home() / ".pyenv/versions/3.7.16/bin/python"


def _stats(at: datetime, running: int, gen: float) -> str:
    return (f"(APIServer pid=812) INFO {at:%m-%d %H:%M:%S} [loggers.py:123] Engine 000: Avg "
            f"prompt throughput: 812.4 tokens/s, Avg generation throughput: {gen:.1f} tokens/s,"
            f" Running: {running} reqs, Waiting: 0 reqs, GPU KV cache usage: 31.2%, Prefix "
            "cache hit rate: 64.0%")


POST = '(APIServer pid=812) INFO:     10.4.7.21:51234 - "POST /v1/chat/completions HTTP/1.1" 200 OK'


def _engine_log(until: datetime, *, idle: bool) -> str:
    """Busy (stats and 200s each minute) for 30 minutes up to ``until``; then, when ``idle``,
    the one ``Running: 0 reqs`` line vLLM logs before it goes quiet."""
    lines = ["INFO 12-05 09:00:01 [api_server.py:1880] Starting vLLM API server 0 on "
             "http://0.0.0.0:8000"]
    for i in range(30, -1, -1):
        lines += [_stats(until - timedelta(minutes=i), 12, 1800.0), POST, POST]
    if idle:
        lines.append(_stats(until + timedelta(seconds=10), 0, 0.0))
    return "\n".join(lines) + "\n"


def _layout(tmp_path: Path, now: datetime, *, idle_min: float, name: str, where: str,
            trials: bool, console: str = "Starting job\n") -> dict[str, Any]:
    """The job's workdir (its Harbor tree, its StdOut holding ``console``, its engine's log):
    its request."""
    workdir = tmp_path / "w"
    workdir.mkdir()
    if trials:
        MAKE.write(workdir / "jobs" / "2026-12-05__09-00-00",
                   {"pass": 8, "fail": 12, "inflight": 16}, total=300, seed=5, minutes_ago=40)
    out = workdir / f"out_{JOB}.log"
    out.write_text(console)  # Harbor's console: no engine line
    last = now - timedelta(minutes=idle_min)
    engine = workdir / where / name
    engine.parent.mkdir(exist_ok=True)
    engine.write_text(_engine_log(last, idle=idle_min > 0))
    stamp = (last + timedelta(seconds=10)).timestamp()
    os.utime(engine, (stamp, stamp))  # vLLM wrote nothing since
    spec: dict[str, Any] = {"id": JOB, "stdout": str(out), "workdir": str(workdir),
                            "offset": 0, "completed": False, "checkpoint_roots": [],
                            "trial_roots": [str(workdir / "jobs")]}
    return {"tail_bytes": 1 << 20, "min_lines": 1, "jobs": [spec]}


def _run(tmp_path: Path, *, idle_min: float, name: str = f"vllm_{JOB}.log",
         where: str = "", trials: bool = True, console: str = "Starting job\n") -> JobDetail:
    now = datetime.now(UTC).replace(microsecond=0)
    request = _layout(tmp_path, now, idle_min=idle_min, name=name, where=where, trials=trials,
                      console=console)
    answer = collector.collect(request)
    spec = request["jobs"][0]
    rec = record("eval-qwen3-x-tbench", job_id=JOB, state=JobState.RUNNING,
                 workdir=spec["workdir"], stdout_path=spec["stdout"],
                 start_time=now - timedelta(minutes=45), elapsed_s=2700)
    facts = job_facts(rec, answer["jobs"][JOB], aliases={}, benign_patterns=())
    return judge(facts, now=now)


@pytest.mark.parametrize(("name", "where"), [
    (f"vllm_{JOB}.log", ""), (f"sglang-server-{JOB}.out", ""), (f"vllm_{JOB}.log", "logs"),
])
def test_an_idle_engine_in_its_own_log_is_engine_idle(tmp_path: Path, name: str,
                                                     where: str) -> None:
    detail = _run(tmp_path, idle_min=25, name=name, where=where)
    assert "engine-idle" in detail.report.flags, (detail.report.flags, detail.report.trend)
    assert detail.infra is not None and detail.infra.endswith("engine✗"), detail.infra
    # Harbor's short console is still the job's log: the engine's is no preamble's successor
    assert "log-path-mismatch" not in detail.report.flags, detail.report.flags
    assert detail.report.log_path == str(tmp_path / "w" / f"out_{JOB}.log")
    # 'jobtables job' names the log the engine checks read (the rulebook: "the RIGHT log")
    assert detail.note is not None and f"{where + '/' if where else ''}{name}" in detail.note


def test_a_busy_engine_in_its_own_log_is_engine_ok(tmp_path: Path) -> None:
    detail = _run(tmp_path, idle_min=0)
    assert "engine-idle" not in detail.report.flags
    assert detail.infra is not None and detail.infra.endswith("engine✓"), detail.infra


@pytest.mark.parametrize("name", [f"vllm_{int(JOB) + 1}.log", f"notes_{JOB}.log"])
def test_another_jobs_engine_log_or_no_engine_log_is_not_read(tmp_path: Path,
                                                              name: str) -> None:
    """Near misses: another job's engine log, and a file of the job's that names no engine.

    Harbor's console has grown past a preamble's size (``PREAMBLE_BYTES``): a short one
    gives way to a larger file of the job's own, which is then read as its log."""
    console = "".join(MAKE.progress_line(n // 4, 300, 0.4 if n >= 4 else None) + "\n"
                      for n in range(84))
    assert len(console.encode()) > PREAMBLE_BYTES
    detail = _run(tmp_path, idle_min=25, name=name, console=console)
    assert "engine-idle" not in detail.report.flags
    assert detail.infra is not None and detail.infra.endswith("engine?"), detail.infra


def test_a_job_with_no_harbor_trials_reads_no_engine_log(tmp_path: Path) -> None:
    """An RL or SFT job's ``vllm_<id>.log`` is not read for launch checks it has none of."""
    request = _layout(tmp_path, datetime.now(UTC), idle_min=25, name=f"vllm_{JOB}.log",
                      where="", trials=False)
    assert "engine" not in collector.collect(request)["jobs"][JOB]["log"]


def test_only_the_engine_lines_of_a_long_tail_are_sent() -> None:
    """The answer holds the engine lines (at most ENGINE_LINES) and the tail's last lines."""
    noise = [f"DEBUG 12-05 10:00:{i % 60:02d} [core.py:1] scheduling step {i}" for i in range(900)]
    text = "\n".join(noise[:400] + [POST] * 300 + noise[400:] + ["last line"]) + "\n"
    sent = engine_lines(text).splitlines()
    assert sent.count(POST) == ENGINE_LINES
    assert sent[-1] == "last line" and len(sent) == ENGINE_LINES + 5


def test_the_shipped_script_reads_the_engine_log_under_python37(tmp_path: Path) -> None:
    request = _layout(tmp_path, datetime.now(UTC), idle_min=25, name=f"vllm_{JOB}.log",
                      where="logs", trials=True)
    run = subprocess.run([str(PY37), "-"], input=build_collector_script(request),
                         capture_output=True, text=True, check=True, timeout=60)
    engine = json.loads(run.stdout)["jobs"][JOB]["log"]["engine"]
    assert engine["status"] == "ok" and engine["path"].endswith(f"logs/vllm_{JOB}.log")
    assert "Running: 0 reqs" in engine["text"]


def test_the_engines_own_name_wins_over_a_newer_server_log(tmp_path: Path) -> None:
    """A job's sandbox ``server`` log written after its vLLM log is not taken for the engine."""
    request = _layout(tmp_path, datetime.now(UTC), idle_min=25, name=f"vllm_{JOB}.log",
                      where="", trials=True)
    (Path(request["jobs"][0]["workdir"]) / f"sandbox_server_{JOB}.log").write_text("ready\n")
    engine = collector.collect(request)["jobs"][JOB]["log"]["engine"]
    assert engine["path"].endswith(f"vllm_{JOB}.log")


def test_an_engine_log_without_stats_proves_no_idleness(tmp_path: Path) -> None:
    """Near miss: an engine started with ``--disable-log-stats`` logs its 200s only; 25 minutes
    after its last one it has shown no running count, so no idle spell (the rulebook: zero
    running for 10+ minutes), and a file that says nothing new is no fresh 200."""
    request = _layout(tmp_path, datetime.now(UTC), idle_min=25, name=f"vllm_{JOB}.log",
                      where="", trials=True)
    engine = Path(request["jobs"][0]["workdir"]) / f"vllm_{JOB}.log"
    stamp = engine.stat().st_mtime
    engine.write_text("\n".join(line for line in engine.read_text().splitlines()
                                if "Engine 000" not in line) + "\n")
    os.utime(engine, (stamp, stamp))
    now = datetime.now(UTC)
    answer = collector.collect(request)
    spec = request["jobs"][0]
    rec = record("eval-qwen3-x-tbench", job_id=JOB, state=JobState.RUNNING,
                 workdir=spec["workdir"], stdout_path=spec["stdout"],
                 start_time=now - timedelta(minutes=45), elapsed_s=2700)
    detail = judge(job_facts(rec, answer["jobs"][JOB], aliases={}, benign_patterns=()), now=now)
    assert "engine-idle" not in detail.report.flags, detail.report.trend
    assert detail.infra is not None and detail.infra.endswith("engine?"), detail.infra
