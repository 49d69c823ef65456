"""The batched file reader: log location (seed rules), bounded tails, and source shipping."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from probes import collector
from probes.slurm import build_collector_script, collector_source

ROOT = Path(__file__).resolve().parents[2]


def _request(tmp: Path, **job: Any) -> dict[str, Any]:
    base = {"id": "4242", "stdout": None, "workdir": str(tmp), "offset": 0,
            "checkpoint_roots": [], "trial_roots": []}
    base.update(job)
    return {"tail_bytes": 4096, "min_lines": 1, "max_trials": 100, "jobs": [base]}


def _log(answer: dict[str, Any]) -> dict[str, Any]:
    log: dict[str, Any] = answer["jobs"]["4242"]["log"]
    return log


def test_log_at_stdout_is_ok(tmp_path: Path) -> None:
    """A StdOut that exists is read as is."""
    out = tmp_path / "slurm-4242.out"
    out.write_text("step 1\nstep 2\n")
    log = _log(collector.collect(_request(tmp_path, stdout=str(out))))
    assert (log["status"], log["path"], log["text"], log["lines"]) == (
        "ok", str(out), "step 1\nstep 2\n", 2)


@pytest.mark.parametrize("name", ["train_4242.out", "rl-run_4242.out", "x-4242.log"])
def test_missing_stdout_falls_back_to_workdir_log(tmp_path: Path, name: str) -> None:
    """StdOut absent, `*_<jobid>.out` in the workdir: read it and say `mismatch`."""
    (tmp_path / name).write_text("real log\n")
    log = _log(collector.collect(_request(tmp_path, stdout=str(tmp_path / "gone_4242.out"))))
    assert (log["status"], log["path"], log["requested"]) == (
        "mismatch", str(tmp_path / name), str(tmp_path / "gone_4242.out"))


@pytest.mark.parametrize("name", ["train_14242.out", "train_4242.err", "train_42420.out",
                                  "4242"])
def test_near_miss_names_are_not_the_log(tmp_path: Path, name: str) -> None:
    """Another job's id or a non-log suffix is not taken for this job's log."""
    (tmp_path / name).write_text("other\n")
    log = _log(collector.collect(_request(tmp_path, stdout=str(tmp_path / "gone.out"))))
    assert (log["status"], log["path"]) == ("missing", None)


def test_listing_is_not_recursive(tmp_path: Path) -> None:
    """A matching log in a subdirectory of the workdir is not searched for."""
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "train_4242.out").write_text("deep\n")
    log = _log(collector.collect(_request(tmp_path)))
    assert log["status"] == "missing"


def test_tail_is_bounded_and_starts_at_a_line(tmp_path: Path) -> None:
    """Only the last tail_bytes are read, without a partial first line."""
    out = tmp_path / "slurm-4242.out"
    out.write_text("".join(f"line {i:05d}\n" for i in range(10_000)))
    req = _request(tmp_path, stdout=str(out))
    req["tail_bytes"] = 100
    log = _log(collector.collect(req))
    assert len(log["text"]) <= 100
    assert log["text"].startswith("line ") and log["text"].endswith("line 09999\n")
    assert log["offset"] == out.stat().st_size - len(log["text"].encode())


def test_offset_reads_only_new_bytes(tmp_path: Path) -> None:
    """With the caller's byte offset, only what was appended since is returned."""
    out = tmp_path / "slurm-4242.out"
    out.write_text("old 1\nold 2\n")
    size = out.stat().st_size
    with out.open("a") as fh:
        fh.write("new 3\n")
    log = _log(collector.collect(_request(tmp_path, stdout=str(out), offset=size)))
    assert (log["text"], log["offset"]) == ("new 3\n", size)


def test_under_the_floor_is_failed_after_one_retry(tmp_path: Path) -> None:
    """A tail with fewer lines than the floor is retried once, then `failed`, never dead."""
    out = tmp_path / "slurm-4242.out"
    out.write_text("only one line\n")
    req = _request(tmp_path, stdout=str(out))
    req["min_lines"] = 5
    log = _log(collector.collect(req))
    assert (log["status"], log["attempts"]) == ("failed", 2)
    assert "floor 5" in log["error"]


def test_empty_log_is_a_fact_not_a_failure(tmp_path: Path) -> None:
    """A job that has printed nothing yet has an empty, readable log."""
    out = tmp_path / "slurm-4242.out"
    out.write_text("")
    log = _log(collector.collect(_request(tmp_path, stdout=str(out))))
    assert (log["status"], log["size"], log["lines"]) == ("ok", 0, 0)


def test_unreadable_log_is_failed(tmp_path: Path) -> None:
    """A StdOut that exists but cannot be read (here a directory) is `failed` with the error."""
    out = tmp_path / "slurm-4242.out"
    out.mkdir()
    log = _log(collector.collect(_request(tmp_path, stdout=str(out))))
    assert (log["status"], log["attempts"]) == ("failed", 2)
    assert "IsADirectoryError" in log["error"]


def test_script_is_python37_syntax_with_one_future_line() -> None:
    """The shipped script parses as Python 3.7 and starts with its only __future__ import."""
    script = build_collector_script({"jobs": []})
    ast.parse(script, feature_version=(3, 7))
    assert script.startswith("from __future__ import annotations\n")
    assert len(re.findall(r"^from __future__", script, re.MULTILINE)) == 1
    assert "from probes" not in script


def test_reducer_and_collector_share_no_top_level_names() -> None:
    """Concatenating the two modules must not let one rebind the other's names."""
    def names(path: Path) -> set[str]:
        tree = ast.parse(path.read_text())
        found: set[str] = set()
        for node in tree.body:
            if isinstance(node, ast.FunctionDef | ast.ClassDef):
                found.add(node.name)
            elif isinstance(node, ast.Assign):
                found.update(t.id for t in node.targets if isinstance(t, ast.Name))
        return found
    shared = names(ROOT / "probes" / "harbor_reduce.py") & names(ROOT / "probes" / "collector.py")
    assert shared == set()


def test_request_rides_as_a_literal_and_cannot_break_out(tmp_path: Path) -> None:
    """Hostile path text in the request stays data: the script runs and nothing executes."""
    marker = tmp_path / "pwned"
    hostile = f"x')\nopen({str(marker)!r}, 'w')\n#\"; touch {marker}; $(id) `id`"
    script = build_collector_script(_request(tmp_path, stdout=hostile))
    run = subprocess.run([sys.executable, "-"], input=script, capture_output=True, text=True,
                         check=True, timeout=60)
    answer = json.loads(run.stdout)
    assert answer["jobs"]["4242"]["log"]["requested"] == hostile
    assert not marker.exists()


def test_shipped_script_answers_like_the_module(tmp_path: Path) -> None:
    """`python3 -` on the built script gives the same answer as collect() in process."""
    (tmp_path / "train_4242.out").write_text("a\nb\n")
    ckpt = tmp_path / "checkpoints"
    (ckpt / "global_step_20").mkdir(parents=True)
    (ckpt / "global_step_10").mkdir()
    req = _request(tmp_path, checkpoint_roots=[str(ckpt)], trial_roots=[str(tmp_path / "jobs")])
    run = subprocess.run(["python3", "-"], input=build_collector_script(req), capture_output=True,
                         text=True, check=True, timeout=60)
    shipped = json.loads(run.stdout)["jobs"]
    local = collector.collect(req)["jobs"]
    for answer in (shipped, local):
        answer["4242"]["log"].pop("mtime")
    assert shipped == local
    assert shipped["4242"]["checkpoints"]["listings"][str(ckpt)] == ["global_step_10",
                                                                     "global_step_20"]


def test_collector_source_is_cached_text() -> None:
    """The script body is built once per process (it is re-sent every sweep)."""
    assert collector_source() is collector_source()
