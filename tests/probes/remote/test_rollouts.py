"""The login-node rollout reader: what it reads, its bounds, and what it refuses to touch."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
from pathlib import Path
from types import ModuleType

import pytest

from probes.remote.rollouts import collect_rollouts
from probes.remote.script import build_rollouts_script

ROOT = Path(__file__).resolve().parents[3]
FIX = ROOT / "tests" / "fixtures"
PY37 = Path.home() / ".pyenv" / "versions" / "3.7.16" / "bin" / "python"


def dumps_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "rollout_dumps_rebuilt", FIX / "generators" / "rollout_dumps_rebuilt.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_verl_dump_reads_baseline_and_latest_steps_only(tmp_path: Path) -> None:
    """Of 10 verl step files only the first and the latest max_files are opened."""
    dumps = dumps_module()
    for step in range(1, 11):
        dumps.write_verl_dump(str(tmp_path / "rollout_data"), step, ["q"] * 4,
                              [f"answer {step} {i}" for i in range(4)], [1.0, 0.0, 1.0, 0.0])
    answer = collect_rollouts({"dump_dirs": [str(tmp_path / "rollout_data")], "max_files": 2})
    (dump,) = answer["dumps"]
    assert dump["kind"] == "verl"
    assert dump["steps_listed"] == list(range(1, 11))
    assert [s["step"] for s in dump["steps"]] == [1, 9, 10]
    assert dump["steps"][-1]["samples"][0] == {"input": "q", "output": "answer 10 0",
                                               "output_chars": 11, "score": 1.0,
                                               "stop_reason": None}
    assert answer["files_opened"] == 3


def test_skyrl_evals_read_and_pickles_only_listed(tmp_path: Path) -> None:
    """SkyRL eval JSONL is read; dumped_data pickles are listed for their steps, never opened."""
    dumps = dumps_module()
    for step in (5, 10):
        dumps.write_skyrl_evals(str(tmp_path), step, ["p", "p"], ["x", "y"], [0.0, 1.0],
                                ["stop", "length"])
    answer = collect_rollouts({"dump_dirs": [str(tmp_path)]})
    (dump,) = answer["dumps"]
    assert dump["kind"] == "skyrl-evals" and dump["batch_steps"] == [5, 10]
    assert dump["steps"][-1]["samples"][1]["stop_reason"] == "length"
    assert answer["files_opened"] == 2  # the two eval JSONL files, no pickle


def test_lines_bytes_and_text_are_bounded(tmp_path: Path) -> None:
    """A huge step file costs at most max_file_bytes, max_lines lines and max_text chars each."""
    dumps = dumps_module()
    dumps.write_verl_dump(str(tmp_path / "d"), 1, ["q"] * 1000, ["z" * 5000] * 1000, [0.0] * 1000)
    answer = collect_rollouts({"dump_dirs": [str(tmp_path / "d")], "max_lines": 7,
                               "max_file_bytes": 200_000, "max_text": 100})
    samples = answer["dumps"][0]["steps"][0]["samples"]
    assert len(samples) == 7
    assert {len(s["output"]) for s in samples} == {100}
    assert {s["output_chars"] for s in samples} == {5000}
    assert answer["bytes_read"] == 200_000


def test_symlinks_and_fifos_are_never_read(tmp_path: Path) -> None:
    """A step file that is a symlink or a FIFO is skipped (not followed, not waited on)."""
    secret = tmp_path / "secret.jsonl"
    secret.write_text(json.dumps({"input": "q", "output": "SECRET", "score": 1}) + "\n")
    dump = tmp_path / "rollout_data"
    dump.mkdir()
    (dump / "1.jsonl").symlink_to(secret)
    os.mkfifo(dump / "2.jsonl")
    answer = collect_rollouts({"dump_dirs": [str(dump)]})
    assert "SECRET" not in json.dumps(answer)
    assert answer["dumps"][0]["steps"] == []
    assert any("not a regular file" in s or "ELOOP" in s or "OSError" in s
               for s in answer["skipped"])


def test_harbor_trials_are_sampled_evenly(tmp_path: Path) -> None:
    """A job dir of many trials is listed once and only max_trials result.json are read."""
    job = tmp_path / "jobs" / "2026-11-30__18-00-00"
    src = FIX / "harbor-0.26.0" / "zero-complete" / "jobs" / "2026-11-30__18-00-00"
    job.mkdir(parents=True)
    (job / "config.json").write_text("{}")
    trial = next(p for p in src.iterdir() if p.is_dir())
    for i in range(300):
        (job / f"t{i:04d}").mkdir()
        (job / f"t{i:04d}" / "result.json").write_bytes((trial / "result.json").read_bytes())
    answer = collect_rollouts({"trial_roots": [str(tmp_path / "jobs")], "max_trials": 10})
    trials = answer["trials"]
    assert trials["listed"] == 300
    assert len(trials["sampled"]) == 10 and "t0000" in trials["sampled"]
    assert "t0299" in trials["sampled"]
    one = trials["sampled"]["t0000"]
    assert one["exception_type"] == "EnvironmentStartTimeoutError" and one["reward"] is None


def test_trajectory_messages_are_read(tmp_path: Path) -> None:
    """The agent's last messages come from agent/trajectory.json (ATIF steps, source agent)."""
    job = tmp_path / "job"
    (job / "t1" / "agent").mkdir(parents=True)
    (job / "result.json").write_text("{}")
    (job / "t1" / "result.json").write_text(json.dumps({"verifier_result": {"rewards":
                                                                            {"reward": 1.0}}}))
    steps = [{"step_id": 1, "source": "user", "message": "task"},
             {"step_id": 2, "source": "agent", "message": [{"type": "text", "text": "ls -la"}]}]
    (job / "t1" / "agent" / "trajectory.json").write_text(json.dumps({"steps": steps}))
    answer = collect_rollouts({"trial_roots": [str(job)]})
    assert answer["trials"]["sampled"]["t1"]["messages"] == ["ls -la"]
    assert answer["trials"]["sampled"]["t1"]["reward"] == 1.0


def test_shipped_script_runs_under_python37(tmp_path: Path) -> None:
    """The built ``python3 -`` script runs on a 3.7 interpreter (login nodes are old)."""
    dumps = dumps_module()
    dumps.write_verl_dump(str(tmp_path / "d"), 3, ["q"], ["fine"], [1.0])
    script = build_rollouts_script({"dump_dirs": [str(tmp_path / "d")]})
    assert PY37.exists(), "pyenv 3.7.16 is part of this machine's toolchain"
    out = subprocess.run([str(PY37), "-"], input=script, capture_output=True, text=True,
                         check=True).stdout
    assert json.loads(out)["dumps"][0]["steps"][0]["samples"][0]["output"] == "fine"


def test_files_not_owned_by_the_job_user_are_refused(reachable_tmp: Path) -> None:
    """With ``owner``, a file owned by anyone else is skipped (a symlinked dir leaks nothing),
    in a directory that owner may list (pytest's ``tmp_path`` is no one else's to list)."""
    dumps = dumps_module()
    dumps.write_verl_dump(str(reachable_tmp / "d"), 1, ["q"], ["mine"], [1.0])
    me = __import__("pwd").getpwuid(os.getuid()).pw_name
    assert collect_rollouts({"dump_dirs": [str(reachable_tmp / "d")], "owner": me}
                            )["dumps"][0]["steps"][0]["samples"][0]["output"] == "mine"
    other = collect_rollouts({"dump_dirs": [str(reachable_tmp / "d")], "owner": "nobody"})
    assert other["dumps"][0]["steps"] == []
    assert any("not owned by the job's user" in s for s in other["skipped"])


def test_a_job_dir_past_the_listing_bound_is_still_sampled(tmp_path: Path) -> None:
    """A Harbor ``jobs_dir`` whose job dir holds more trials than ``max_listing``: its listing
    is cut wherever the directory order puts the cut, so the job's own ``config.json`` and
    ``result.json`` are most likely past it; the job dir is known by opening them, and the
    trials listed are sampled. Replayed on the real SLURM (a 50,000-trial Harbor job dir):
    ``jobtables probe`` listed 0 trials and said 'nothing to judge: no rollouts were found'."""
    job = tmp_path / "jobs" / "2026-12-04__16-00-00"
    job.mkdir(parents=True)
    (job / "config.json").write_text(json.dumps({"job_name": job.name, "n_attempts": 1}))
    (job / "result.json").write_text(json.dumps({"id": "j", "n_total_trials": 1000}))
    for i in range(1000):
        trial = job / f"task{i:04d}__abc{i:04d}"
        trial.mkdir()
        (trial / "result.json").write_text(json.dumps(
            {"trial_name": trial.name, "task_name": f"task{i:04d}",
             "verifier_result": {"rewards": {"reward": 1.0}}, "exception_info": None}))
    answer = collect_rollouts({"trial_roots": [str(tmp_path / "jobs")], "max_listing": 3})
    assert answer["trials"]["listed"] >= 1
    assert answer["trials"]["sampled"]


def test_a_dir_the_reader_cannot_list_is_said(reachable_tmp: Path) -> None:
    """A dump dir or trial root that exists but the probe's account may not list (a 0700 tree
    of another user) is said in ``skipped``; an absent one (most configured defaults) is not.
    Found on the real SLURM: a jtuser run's 0700 rollout_data read 'nothing to judge: no
    rollouts were found', its rollouts unmentioned."""
    if os.geteuid() != 0:
        pytest.fail("needs root to run the reader as another user (run the suite as root)")
    dumps = dumps_module()
    closed, jobs = reachable_tmp / "rollout_data", reachable_tmp / "jobs"
    dumps.write_verl_dump(str(closed), 1, ["q"], ["x"], [1.0])
    jobs.mkdir()
    for path in (closed, jobs):
        os.chmod(path, 0o700)
    script = build_rollouts_script({"dump_dirs": [str(closed), str(reachable_tmp / "absent")],
                                    "trial_roots": [str(jobs), str(reachable_tmp / "none")]})
    out = subprocess.run(["runuser", "-u", "nobody", "--", "python3", "-"], input=script,
                         capture_output=True, text=True, check=True).stdout
    skipped = json.loads(out)["skipped"]
    assert f"{closed}: PermissionError" in skipped and f"{jobs}: PermissionError" in skipped
    assert not [s for s in skipped if "absent" in s or "none" in s]


def test_trials_with_no_result_yet_are_counted_with_their_start(tmp_path: Path) -> None:
    """A Harbor trial writes its result.json when it ends, its config.json when it starts: a
    sampled trial dir without the first is unfinished, and its config's time says since when
    (the login node's clock, as ``read_at``). Without this a run whose trials never finish
    was 'nothing to judge: no rollouts were found'."""
    job = tmp_path / "jobs" / "2026-12-05__05-00-00"
    job.mkdir(parents=True)
    (job / "config.json").write_text("{}")
    for i in range(4):
        trial = job / f"task{i}__abcdefg"
        (trial / "agent").mkdir(parents=True)
        (trial / "config.json").write_text(json.dumps({"trial_name": trial.name}))
        os.utime(trial / "config.json", (1_000_000 + i, 1_000_000 + i))
    done = job / "task0__abcdefg" / "result.json"
    done.write_text(json.dumps({"trial_name": "task0__abcdefg", "finished_at": "x"}))
    answer = collect_rollouts({"trial_roots": [str(tmp_path / "jobs")]})
    trials = answer["trials"]
    assert list(trials["sampled"]) == ["task0__abcdefg"]
    assert trials["unfinished"] == 3 and trials["oldest_unfinished"] == 1_000_001
    assert answer["read_at"] > 1_700_000_000


def test_a_flat_trials_dir_of_unfinished_trials_is_read(tmp_path: Path) -> None:
    """SkyRL's flat Harbor ``trials_dir`` (trial dirs directly below it) where no trial has
    ended: each dir holds its config.json and agent/, no result.json. The layout was decided
    by a result.json only, so each trial was taken for a job dir (its config.json) and its
    agent/ for a trial: 30 'listed', none unfinished, 'nothing to judge' on the real SLURM."""
    for i in range(3):
        trial = tmp_path / "trials" / f"task{i}__abcdefg"
        (trial / "agent").mkdir(parents=True)
        (trial / "config.json").write_text(json.dumps({"trial_name": trial.name}))
    trials = collect_rollouts({"trial_roots": [str(tmp_path / "trials")]})["trials"]
    assert trials["listed"] == 3 and trials["unfinished"] == 3 and trials["sampled"] == {}
