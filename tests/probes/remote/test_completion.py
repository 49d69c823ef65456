"""The SFT completion check where it runs: trainer_state.json / trainer_log.jsonl on disk.

Fixtures: ``tests/fixtures/hf-trainer-state-rebuilt`` (rebuilt from the HF Trainer's and
LLaMA-Factory's source, see ``tests/fixtures/generators/README.md``).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from probes.remote import collector
from probes.remote.completion import (
    STATE_WHOLE,
    collect_completion,
    output_dirs,
    parse_trainer_log_jsonl,
    parse_trainer_state_json,
)
from probes.remote.script import build_collector_script
from probes.slurm.assemble import completion_check

STATES = Path(__file__).resolve().parents[2] / "fixtures" / "hf-trainer-state-rebuilt"
V1 = Path(__file__).resolve().parents[2] / "fixtures" / "llamafactory-v1-rebuilt"


@pytest.mark.parametrize(
    ("name", "current", "total", "finished"),
    [
        ("trainer_state_finished.json", 95, 95, True),
        ("trainer_state_stopped.json", 60, 95, False),
    ],
)
def test_trainer_state_json(name: str, current: int, total: int, finished: bool) -> None:
    """HF's trainer_state.json: global_step of max_steps."""
    got = parse_trainer_state_json((STATES / name).read_bytes())
    assert (got["current_steps"], got["total_steps"], got["finished"]) == (current, total, finished)


@pytest.mark.parametrize(
    ("name", "current", "finished"),
    [("trainer_log_done.jsonl", 910, True), ("trainer_log_stopped.jsonl", 600, False)],
)
def test_llamafactory_v1_trainer_log(name: str, current: int, finished: bool) -> None:
    """LLaMA-Factory v1 (``LoggingCallback``) writes ``step`` and ``total_steps`` (no
    ``current_steps``) every ``logging_steps`` (10) and no record at the end: a last record at
    910 of 916 is a finished run (it had no tenth step more to log), 600 of 916 is not. v1's
    records were not read at all (no ``current_steps``): no answer, for either."""
    got = parse_trainer_log_jsonl((V1 / name).read_bytes())
    assert (got["current_steps"], got["total_steps"], got["finished"]) == (current, 916, finished)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # v1: one record says no cadence, so its step must reach the total
        ('{"epoch": 0, "step": 910, "loss": 1.0, "total_steps": 916}\n', (910, 916, False)),
        ('{"epoch": 1, "step": 916, "loss": 1.0, "total_steps": 916}\n', (916, 916, True)),
        # a resumed run appends from its checkpoint: the last record wins, its cadence too
        ('{"step": 900, "total_steps": 916}\n{"step": 910, "total_steps": 916}\n'
         '{"step": 880, "total_steps": 916}\n', (880, 916, False)),
        # a "step" with no "total_steps" is no v1 record (another tool's JSON lines)
        ('{"step": 5, "loss": 1.0}\n', (None, None, False)),
    ],
)
def test_llamafactory_v1_trainer_log_edges(text: str, expected: tuple[Any, Any, bool]) -> None:
    """v1 records' edges: a lone record, a resume's appended records, a foreign JSONL."""
    got = parse_trainer_log_jsonl(text)
    assert (got["current_steps"], got["total_steps"], got["finished"]) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", (None, None, False)),
        ("[1, 2]", (None, None, False)),
        ('{"global_step": 5}', (5, None, False)),
        # a head+tail cut: the two top-level keys by pattern, log_history entries ignored
        ('{\n  "global_step": 60,\n  "log_history": [\n    {\n      "step": 1\n\n'
         '    }\n  ],\n  "max_steps": 95,\n', (60, 95, False)),
    ],
)
def test_trainer_state_json_edges(text: str, expected: tuple[Any, Any, bool]) -> None:
    """Broken, partial and cut documents never raise."""
    got = parse_trainer_state_json(text)
    assert (got["current_steps"], got["total_steps"], got["finished"]) == expected


@pytest.mark.parametrize(
    ("log", "dirs"),
    [
        ("", ["/w"]),
        ("TrainingArguments(\noutput_dir=saves/qwen/sft,\nlogging_steps=10,\n)",
         ["/w", "/w/saves/qwen/sft"]),
        ("output_dir: /scratch/out\n", ["/w", "/scratch/out"]),
        ("[INFO|trainer.py:3984] >> Saving model checkpoint to /scratch/o/checkpoint-500\n",
         ["/w", "/scratch/o"]),
        ("Model weights saved in /scratch/m/model.safetensors\n", ["/w", "/scratch/m"]),
        # never outside by .., never more than MAX_DIRS, latest mention first
        ("output_dir=../../etc\n", ["/w"]),
        ("".join(f"output_dir=/o{i}\n" for i in range(9)),
         ["/w", *(f"/o{i}" for i in range(8, 1, -1))]),
        ("+ python train.py --output_dir /scratch/trl-out --bf16\n", ["/w", "/scratch/trl-out"]),
    ],
)
def test_output_dirs_named_in_the_log(log: str, dirs: list[str]) -> None:
    """The workdir and the output dirs the log names, absolute and bounded."""
    assert output_dirs("/w", log) == dirs


def test_checkpoint_roots_come_after_the_logged_dirs() -> None:
    """The job's checkpoint roots are searched too, after what the log names."""
    assert output_dirs("/w", "output_dir=/o\n", ["/w/output", "/w"]) == ["/w", "/o", "/w/output"]


def test_collects_from_workdir_output_dir_and_newest_checkpoint(tmp_path: Path) -> None:
    """trainer_log.jsonl in the workdir; the logged output dir's newest checkpoint state."""
    (tmp_path / "trainer_log.jsonl").write_bytes((STATES / "trainer_log_short.jsonl").read_bytes())
    out = tmp_path / "saves" / "run"
    for step in (30, 60):
        (out / f"checkpoint-{step}").mkdir(parents=True)
    (out / "checkpoint-30" / "trainer_state.json").write_text(
        '{"global_step": 30, "max_steps": 95}')
    (out / "checkpoint-60" / "trainer_state.json").write_bytes(
        (STATES / "trainer_state_stopped.json").read_bytes())
    got = collect_completion(str(tmp_path), "output_dir=saves/run\n")["sources"]
    assert [(s["kind"], s["current_steps"], s["total_steps"]) for s in got] == [
        ("trainer_log.jsonl", 320, 916), ("trainer_state.json", 60, 95)]
    assert got[1]["path"] == str(out / "checkpoint-60" / "trainer_state.json")


def test_large_state_is_read_head_and_tail(tmp_path: Path) -> None:
    """A trainer_state.json over the bound: global_step from its head, max_steps from its tail."""
    data = json.loads((STATES / "trainer_state_stopped.json").read_text())
    data["log_history"] = data["log_history"] * 500  # ~5 MiB: just over the bound
    (tmp_path / "trainer_state.json").write_text(json.dumps(data, indent=2, sort_keys=True))
    assert os.path.getsize(tmp_path / "trainer_state.json") > STATE_WHOLE
    (got,) = collect_completion(str(tmp_path), "")["sources"]
    assert (got["current_steps"], got["total_steps"], got["finished"]) == (60, 95, False)


def test_only_regular_files_are_opened(tmp_path: Path) -> None:
    """A FIFO named trainer_state.json is skipped at once (it would block a plain open)."""
    os.mkfifo(tmp_path / "trainer_state.json")
    (tmp_path / "trainer_log.jsonl").mkdir()
    assert collect_completion(str(tmp_path), "")["sources"] == []


def _req(tmp: Path, completed: bool) -> dict[str, Any]:
    (tmp / "train_7.out").write_text("output_dir=out\n{'loss': 1.0}\n")
    (tmp / "out").mkdir(exist_ok=True)
    (tmp / "out" / "trainer_state.json").write_bytes(
        (STATES / "trainer_state_finished.json").read_bytes())
    job = {"id": "7", "stdout": str(tmp / "train_7.out"), "workdir": str(tmp), "offset": 0,
           "checkpoint_roots": [], "trial_roots": [], "completed": completed}
    return {"tail_bytes": 4096, "min_lines": 1, "max_trials": 10, "jobs": [job]}


@pytest.mark.parametrize("completed", [True, False])
def test_collector_reads_completion_only_for_completed_jobs(
    tmp_path: Path, completed: bool
) -> None:
    """The shipped script and the module agree; a live job's files are never read."""
    req = _req(tmp_path, completed)
    run = subprocess.run(["python3", "-"], input=build_collector_script(req), capture_output=True,
                         text=True, check=True, timeout=60)
    shipped = json.loads(run.stdout)["jobs"]["7"]
    local = collector.collect(req)["jobs"]["7"]
    assert shipped.get("completion") == local.get("completion")
    if not completed:
        assert "completion" not in shipped
        return
    check = completion_check(shipped["completion"])
    assert check is not None and check.reached is not None
    assert (check.reached.current_steps, check.reached.total_steps) == (95, 95)
    assert check.reached.finished and check.reached.path == str(tmp_path / "out" /
                                                               "trainer_state.json")
