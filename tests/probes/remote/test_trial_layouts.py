"""Trial roots of every Harbor layout: a job dir, a dir of job dirs (chunks), and SkyRL's flat
``trials_dir`` (HarborGenerator writes ``<trials_dir>/<task>__<id>/{result.json,config.json,
agent/,verifier/}`` with no Harbor job dir above).

Shape from an acceptance dry-run: a flat trials dir of 100 trials was read as 100 chunks (each
trial dir, holding result.json/config.json, taken for a job dir): the sweep counted no trials
and ``jobtables probe`` sampled 0 of 100. Every trial here is a real Harbor 0.26.0 trial dir
(``tests/fixtures/harbor-0.26.0``) copied on disk with a trial ``config.json`` and an
``agent/`` dir beside its ``verifier/``; the job dirs keep their real ``config.json`` and
``result.json``. Read by the collector in process, the shipped script under Python 3.7, and
the deep probe's reader.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from probes.harbor import summarize_trials
from probes.remote.guard import Guard
from probes.remote.rollouts import collect_rollouts
from probes.remote.script import build_collector_script
from probes.remote.trial_roots import _flat_trials, collect_trials
from probes.slurm.assemble import trial_tree

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "harbor-0.26.0" / "jobs"
JOB = FIX / "2026-11-30__14-00-00"
PY37 = Path.home() / ".pyenv" / "versions" / "3.7.16" / "bin" / "python"


def _real_trials() -> list[Path]:
    return sorted(p.parent for p in JOB.glob("*/result.json"))


def _trial(src: Path, dest: Path) -> None:
    """A real trial dir as Harbor and SkyRL write it: result.json, config.json, agent/,
    verifier/ (the trial config is derived from the result's own ``config``)."""
    shutil.copytree(src, dest)
    config = json.loads((src / "result.json").read_text()).get("config") or {}
    (dest / "config.json").write_text(json.dumps(config, indent=4))
    (dest / "agent").mkdir(exist_ok=True)
    (dest / "agent" / "trajectory.json").write_text("{}")


def _flat(root: Path, n: int) -> list[Path]:
    """``n`` trials directly below ``root`` (SkyRL)."""
    root.mkdir(parents=True)
    real = _real_trials()
    made = []
    for i in range(n):
        src = real[i % len(real)]
        dest = root / f"{src.name.split('__')[0]}__{i:07d}"
        _trial(src, dest)
        made.append(dest)
    return made


def _job_dir(dest: Path, n: int, first: int = 0) -> list[Path]:
    """A Harbor job dir (its own config.json/result.json) holding ``n`` trials (numbered from
    ``first``: trial names are unique across chunks, as Harbor's random ids are)."""
    dest.mkdir(parents=True)
    for name in ("config.json", "result.json"):
        shutil.copy(JOB / name, dest / name)
    real = _real_trials()
    made = []
    for i in range(first, first + n):
        src = real[i % len(real)]
        made.append(dest / f"{src.name.split('__')[0]}__{i:07d}")
        _trial(src, made[-1])
    return made


def _count(answer: dict[str, Any], root: Path) -> tuple[int, int]:
    """(trials counted, job dirs) of a collector answer."""
    jobs = answer[str(root)]["jobs"]
    return sum(j["tally"]["trials"] for j in jobs.values()), len(jobs)


def _layouts(tmp: Path) -> dict[str, tuple[Path, int, int]]:
    """Each layout: (root, trials, job dirs)."""
    flat = tmp / "skyrl" / "trials"
    _flat(flat, 100)
    job = tmp / "harbor" / "jobs" / "2026-11-30__14-00-00"
    _job_dir(job, 30)
    chunks = tmp / "chunks" / "jobs"
    for c in range(3):
        _job_dir(chunks / f"chunk-{c:02d}", 10, first=10 * c)
    return {"flat": (flat, 100, 1), "job": (job, 30, 1), "chunks": (chunks, 30, 3),
            "jobs-dir-of-one": (job.parent, 30, 1)}


@pytest.mark.parametrize("layout", ["flat", "job", "chunks", "jobs-dir-of-one"])
def test_collector_counts_every_layout(tmp_path: Path, layout: str) -> None:
    """Trials directly below the root, below a job dir, or below each chunk all count."""
    root, trials, jobs = _layouts(tmp_path)[layout]
    answer = collect_trials([str(root)])
    assert _count(answer, root) == (trials, jobs)
    tree = trial_tree(answer)
    assert tree is not None
    stats = summarize_trials(tree)
    assert stats.trials == trials and stats.completed == trials
    assert stats.pass_rate is not None  # the pass-rate signal has trials to read
    assert len(tree.trials) == trials


def test_flat_trials_with_one_in_flight(tmp_path: Path) -> None:
    """A trial still running (config.json, agent/, no result.json yet) is not a chunk either."""
    root = tmp_path / "trials"
    _flat(root, 12)
    running = root / "crack-7z-hash__running"
    running.mkdir()
    (running / "config.json").write_text("{}")
    (running / "agent").mkdir()
    assert _count(collect_trials([str(root)]), root) == (12, 1)


def test_job_dir_whose_trials_are_all_in_flight_is_still_a_chunk(tmp_path: Path) -> None:
    """A chunk with its own result.json but no finished trial yet is a job dir, not a trial
    (its result.json is a job's): the other chunks still count as chunks."""
    chunks = tmp_path / "jobs"
    _job_dir(chunks / "chunk-00", 0)
    _job_dir(chunks / "chunk-01", 10, first=100)
    assert _count(collect_trials([str(chunks)]), chunks) == (10, 2)


def test_shipped_collector_under_python_37_reads_the_flat_layout(tmp_path: Path) -> None:
    """The shipped script (stdlib only, Python 3.7) answers like the in-process collector."""
    root = tmp_path / "trials"
    _flat(root, 40)
    req = {"tail_bytes": 4096, "min_lines": 1, "max_trials": 100,
           "jobs": [{"id": "4242", "stdout": None, "workdir": str(tmp_path), "offset": 0,
                     "checkpoint_roots": [], "trial_roots": [str(root)]}]}
    assert PY37.exists(), "pyenv 3.7.16 is part of this machine's toolchain"
    run = subprocess.run([str(PY37), "-"], input=build_collector_script(req),
                         capture_output=True, text=True, check=True, timeout=120)
    answer = json.loads(run.stdout)
    trials = answer["jobs"]["4242"]["trials"]
    assert _count(trials, root) == (40, 1)


@pytest.mark.parametrize("layout", ["flat", "job", "chunks"])
def test_probe_samples_every_layout(tmp_path: Path, layout: str) -> None:
    """``jobtables probe``'s reader lists the trial dirs, not their agent/ and verifier/."""
    root, trials, _jobs = _layouts(tmp_path)[layout]
    answer = collect_rollouts({"trial_roots": [str(root)], "max_trials": 64})
    got = answer["trials"]
    assert got["listed"] == trials
    assert len(got["sampled"]) == min(64, trials)
    assert all(t["finished_at"] for t in got["sampled"].values())


@pytest.mark.parametrize("junk", [b"\x00\xff\xfe" * 100, b'{"trial_name": "cut-off mid-wri',
                                  b"[" * 100_000 + b"]" * 100_000])
def test_flat_trials_whose_first_trial_result_is_unreadable(tmp_path: Path, junk: bytes) -> None:
    """A flat trials dir is still flat when the trial looked at first holds a result.json that
    is no JSON object (binary, cut off mid-write, nested past the parser's depth): that trial
    cannot tell the layout, the next one does. Replayed on the real SLURM (eval-weird2): the
    first trial listed held a binary result.json and the run read 0 trials of 5."""
    root = tmp_path / "trials"
    made = _flat(root, 5)
    broken = root / "crack-7z-hash__broken"
    broken.mkdir()
    (broken / "result.json").write_bytes(junk)
    (broken / "agent").mkdir()
    names = [broken.name] + [p.name for p in made]
    guard = Guard(os.geteuid(), 30.0)
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        assert _flat_trials(fd, str(root), [(n, True) for n in names], guard) is True
    finally:
        os.close(fd)
    assert _count(collect_trials([str(root)]), root) == (5, 1)
