"""A trial tree's strings cannot cost a job its whole reading.

Found attacking the real SLURM as an unprivileged user: one trial ``result.json`` in a job's
Harbor tree whose ``exception_type`` was a 60 MB string made that job's collector entry larger
than the answer budget (32 MiB), so the entry was replaced by ``collector answer budget ...
spent``: the job's log (eight RL steps) was lost with it, ``jobtables sweep`` read step ``—``,
no metrics, ``fetch-failed``. The reducer carried the type (and the trial's times, and a job
result.json's eval keys) at whatever length the file gave, into every one of the 100 window
records and the tally's exception counts, which also took one key per distinct type.

Each case below is a real Harbor 0.26 tree with one hostile shape written into it, read by the
collector with a 1 MiB answer budget: the log must be read, every trial counted, and the entry
stay small.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from probes.harbor import summarize_trials
from probes.remote import collector
from probes.slurm.assemble import trial_tree

TREE = (Path(__file__).resolve().parents[2] / "fixtures" / "harbor-0.26.0" / "invalid-reward"
        / "jobs" / "2026-12-04__09-00-00")
LOG = "".join(f"step:{i} - reward/avg_raw_reward:0.5 - policy/policy_entropy:0.6\n"
              for i in range(1, 9))
BUDGET = 1 << 20


def _trials(job: Path) -> list[Path]:
    return sorted(p / "result.json" for p in job.iterdir() if (p / "result.json").is_file())


def _long_type(job: Path) -> int:
    """One trial's exception_type is 2 MiB."""
    path = _trials(job)[0]
    data = json.loads(path.read_text())
    data["exception_info"] = {"exception_type": "E" * (2 << 20), "exception_message": "x",
                              "exception_traceback": "x", "occurred_at": data["finished_at"]}
    path.write_text(json.dumps(data))
    return 16


def _many_types(job: Path) -> int:
    """400 more trials, each with its own 4 KiB exception_type."""
    template = json.loads(_trials(job)[0].read_text())
    for i in range(400):
        trial = job / f"extra-task-{i:04d}__Ab{i:05d}"
        trial.mkdir()
        data = dict(template, trial_name=trial.name, verifier_result=None,
                    exception_info={"exception_type": f"Error{i:04d}" + "x" * 4096,
                                    "exception_message": "", "exception_traceback": "",
                                    "occurred_at": template["finished_at"]})
        (trial / "result.json").write_text(json.dumps(data))
    return 416


def _long_times(job: Path) -> int:
    """Every trial's started_at and finished_at is 64 KiB of text."""
    for path in _trials(job):
        data = json.loads(path.read_text())
        data["started_at"] = data["finished_at"] = "2026-12-04T09:05:00" + "9" * (64 << 10)
        path.write_text(json.dumps(data))
    return 16


def _many_evals(job: Path) -> int:
    """The job result.json names 20000 evals of 200-byte keys."""
    path = job / "result.json"
    data = json.loads(path.read_text())
    evals = next(iter(data["stats"]["evals"].values()))
    data["stats"]["evals"] = {f"agent__model-{i:05d}" + "m" * 180 + "__set": evals
                              for i in range(20000)}
    path.write_text(json.dumps(data))
    return 16


@pytest.mark.parametrize("hostile", [_long_type, _many_types, _long_times, _many_evals],
                         ids=lambda f: f.__name__.strip("_"))
def test_a_hostile_trial_tree_leaves_the_jobs_reading_whole(tmp_path: Path, hostile: Any) -> None:
    """The log is read, every trial counted, and the job's entry stays far under the budget."""
    job = tmp_path / "jobs" / TREE.name
    shutil.copytree(TREE, job)
    trials = hostile(job)
    (tmp_path / "out.log").write_text(LOG)
    request = {"tail_bytes": 1 << 16, "min_lines": 1, "max_trials": 100,
               "answer_budget": BUDGET,
               "jobs": [{"id": "4242", "stdout": str(tmp_path / "out.log"),
                         "workdir": str(tmp_path), "offset": 0, "checkpoint_roots": [],
                         "trial_roots": [str(tmp_path / "jobs")]}]}
    entry = collector.collect(request)["jobs"]["4242"]
    assert entry["log"]["status"] == "ok", entry["log"].get("error")
    assert entry["log"]["text"] == LOG
    tree = trial_tree(entry["trials"])
    assert tree is not None
    stats = summarize_trials(tree)
    assert stats.trials == trials
    assert sum(stats.exceptions.values()) >= 4  # the fixture's own four errors still count
    assert len(collector.encode(entry)) < BUDGET // 4
