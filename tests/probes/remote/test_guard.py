"""The collector's read rules and bounds, in process and through the shipped script.

Only the job's own regular files are read (owner checked on the opened descriptor), no
symlink is followed out of a tree, nothing under /proc /sys /dev, every read has a deadline,
the whole request has one, the answer has a budget, and a binary log costs no more than text.
"""

from __future__ import annotations

import getpass
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from probes.remote import collector
from probes.remote.guard import Guard, Hung, Refused, deadline
from probes.remote.script import build_collector_script
from probes.remote.stdio_pattern import expand_roots

ME = getpass.getuser()


def _job(tmp: Path, job_id: str = "7", **over: Any) -> dict[str, Any]:
    job = {"id": job_id, "user": ME, "stdout": None, "workdir": str(tmp), "offset": 0,
           "checkpoint_roots": [], "trial_roots": []}
    job.update(over)
    return job


def _collect(*jobs: dict[str, Any], **req: Any) -> dict[str, Any]:
    answer: dict[str, Any] = collector.collect(
        {"tail_bytes": 1 << 20, "min_lines": 1, "jobs": list(jobs), **req})["jobs"]
    return answer


def test_another_owners_file_is_not_read(tmp_path: Path) -> None:
    """A regular file not owned by the job's user: failed, naming the owner; text empty."""
    if os.geteuid() != 0:
        pytest.fail("needs root to own a file as another user (run the suite as root)")
    log = tmp_path / "slurm-7.out"
    log.write_text("SECRET\n")
    os.chown(log, 65534, 65534)
    got = _collect(_job(tmp_path, stdout=str(log)))["7"]["log"]
    assert got["status"] == "failed" and "owned by uid 65534" in got["error"]
    assert "SECRET" not in json.dumps(got)


def test_symlinked_stdout_and_workdir_logs_are_not_followed(tmp_path: Path) -> None:
    """StdOut a symlink: refused with the reason; a symlinked `*_<id>.out` is no candidate."""
    target = tmp_path / "target"
    target.write_text("SECRET\n")
    (tmp_path / "slurm-7.out").symlink_to(target)
    (tmp_path / "train_7.out").symlink_to(target)
    got = _collect(_job(tmp_path, stdout=str(tmp_path / "slurm-7.out")))["7"]["log"]
    assert got["status"] == "failed" and "symbolic link" in got["error"]
    gone = _collect(_job(tmp_path, stdout=str(tmp_path / "gone-7.out")))["7"]["log"]
    assert gone["status"] == "missing"


@pytest.mark.parametrize("path", ["/proc/self/environ", "/dev/zero", "/sys/kernel/mm/x",
                                  "/proc/../proc/self/status"])
def test_proc_sys_dev_are_never_opened(tmp_path: Path, path: str) -> None:
    """Paths naming /proc, /sys, /dev (once normalised) are refused before any open."""
    os.environ["JT_GUARD_MARKER"] = "MARKER-ENV"
    try:
        got = _collect(_job(tmp_path, stdout=path))["7"]["log"]
    finally:
        del os.environ["JT_GUARD_MARKER"]
    assert got["status"] == "failed" and "/proc, /sys or /dev" in got["error"]
    assert "MARKER-ENV" not in json.dumps(got)


def test_a_symlinked_directory_into_proc_is_caught_on_the_descriptor(tmp_path: Path) -> None:
    """A workdir path that reaches /proc through a directory symlink: the opened file's
    device is /proc's, so it is refused although the path does not say /proc."""
    (tmp_path / "w").symlink_to("/proc/self")
    got = _collect(_job(tmp_path, stdout=str(tmp_path / "w" / "environ")))["7"]["log"]
    assert got["status"] == "failed" and "on /proc, /sys or /dev" in got["error"]


def test_fifo_is_refused_at_once(tmp_path: Path) -> None:
    """A FIFO StdOut with no writer: refused (not a regular file), the next job still read."""
    fifo = tmp_path / "slurm-7.out"
    os.mkfifo(fifo)
    ok = tmp_path / "slurm-8.out"
    ok.write_text("step 1\n")
    got = _collect(_job(tmp_path, stdout=str(fifo)), _job(tmp_path, "8", stdout=str(ok)))
    assert got["7"]["log"]["status"] == "failed"
    assert "not a regular file" in got["7"]["log"]["error"]
    assert got["8"]["log"]["text"] == "step 1\n"


def test_a_blocking_read_is_interrupted_by_its_deadline() -> None:
    """The per-operation deadline interrupts a read that would block forever (a pipe with a
    writer that never writes stands in for a hung NFS file)."""
    r, w = os.pipe()
    try:
        with pytest.raises(Hung, match=r"no answer within 0\.2s"), deadline(0.2, "read x"):
            os.read(r, 1)
    finally:
        os.close(r)
        os.close(w)


def test_unknown_owner_reads_nothing(tmp_path: Path) -> None:
    """A job whose user this host does not know: nothing is read, the reason says so."""
    log = tmp_path / "slurm-7.out"
    log.write_text("step 1\n")
    got = _collect(_job(tmp_path, user="no-such-user-x", stdout=str(log)))["7"]["log"]
    assert got["status"] == "failed" and "unknown on this host" in got["error"]


def test_request_deadline_marks_the_rest_failed(tmp_path: Path) -> None:
    """Past the whole request's deadline every remaining job is failed with the reason."""
    got = _collect(_job(tmp_path, "1"), _job(tmp_path, "2"), deadline_s=1e-9)
    for job_id in ("1", "2"):
        assert got[job_id]["log"]["status"] == "failed"
        assert "deadline" in got[job_id]["log"]["error"]


def test_answer_budget_marks_jobs_beyond_it_failed(tmp_path: Path) -> None:
    """Jobs beyond the answer budget are failed with the reason, never dropped."""
    jobs = []
    for i in range(5):
        log = tmp_path / f"slurm-{i}.out"
        log.write_text("x" * 4000 + "\n")
        jobs.append(_job(tmp_path, str(i), stdout=str(log)))
    got = _collect(*jobs, answer_budget=10_000)
    statuses = [got[str(i)]["log"]["status"] for i in range(5)]
    assert statuses == ["ok", "ok", "failed", "failed", "failed"]
    assert "answer budget of 10000 bytes" in got["4"]["log"]["error"]
    size = len(json.dumps(got, ensure_ascii=False).encode())
    print(f"\nanswer at a 10000-byte budget: {size} bytes for 5 jobs of 4 KB")
    assert size < 10_000 + 3 * 400


def test_binary_log_costs_no_more_than_text(tmp_path: Path) -> None:
    """A NUL/binary-heavy log encodes to no more bytes than a text log of the same size."""
    binary, text = tmp_path / "slurm-1.out", tmp_path / "slurm-2.out"
    binary.write_bytes(bytes(range(256)) * 64 + b"\n")
    text.write_bytes(b"a" * (256 * 64) + b"\n")
    req = {"tail_bytes": 1 << 20, "min_lines": 1, "jobs": [
        _job(tmp_path, "1", stdout=str(binary)), _job(tmp_path, "2", stdout=str(text))]}
    run = subprocess.run(["python3", "-"], input=build_collector_script(req).encode(),
                         capture_output=True, check=True, timeout=60)
    answer = json.loads(run.stdout)
    sizes = [len(json.dumps(answer["jobs"][k]["log"]["text"], ensure_ascii=False).encode())
             for k in ("1", "2")]
    raw = binary.read_bytes()
    # One byte per byte, plus the escapes JSON gives these characters in any text log.
    escapes = sum(raw.count(c) for c in (b'"', b"\\", b"\t", b"\n", b"\r"))
    # ESC (kept for ANSI colours) is \u001b and BEL (ends a terminal title) \u0007, as in text
    escapes += 5 * (raw.count(b"\x1b") + raw.count(b"\x07"))
    before = len(json.dumps(raw.decode("utf-8", "replace")).encode())  # the old encoding
    print(f"\nencoded tail: binary {sizes[0]} bytes (was {before}), text {sizes[1]} bytes,"
          f" raw {len(raw)} bytes")
    assert sizes[0] <= len(raw) + escapes + 2 and sizes[1] == len(raw) + 2 + 1


def test_trial_dir_symlinked_out_of_the_tree_is_not_entered(tmp_path: Path) -> None:
    """A trial dir that is a symlink to another tree: its result.json is not read."""
    outside = tmp_path / "outside" / "trial"
    outside.mkdir(parents=True)
    (outside / "result.json").write_text(json.dumps({"exception_info": "SECRET"}))
    job = tmp_path / "jobs"
    (job / "real").mkdir(parents=True)
    (job / "result.json").write_text(json.dumps({"n_total_trials": 2}))
    (job / "real" / "result.json").write_text(json.dumps({"trial_name": "real"}))
    (job / "linked").symlink_to(outside)
    trees = collector.collect_trials([str(job)], Guard(os.geteuid(), 5.0))
    trials = trees[str(job)]["jobs"][str(job)]["trials"]
    assert set(trials) == {"real"} and "SECRET" not in json.dumps(trees)


@pytest.mark.parametrize("name", ["../../../etc", "a/b", "..", ".", "x/../../y"])
def test_root_templates_cannot_leave_their_root(name: str) -> None:
    """A name that is not one path component fills no `{name}` root."""
    roots = expand_roots(["{workdir}/ckpt/{name}", "/scratch/{user}/{name}", "{workdir}/ck"],
                         workdir="/home/a/run", name=name, job_id="7", user="a")
    assert roots == ["/home/a/run/ck"]


def test_guard_refuses_relative_paths(tmp_path: Path) -> None:
    """A relative path is never resolved against the collector's own directory."""
    with pytest.raises(Refused, match="not an absolute path"):
        Guard(os.geteuid(), 5.0).open("slurm-7.out")


def test_squeue_document_is_paid_from_the_same_budget(tmp_path: Path) -> None:
    """On the one-trip path the squeue document comes first: with a budget it alone spends,
    every collected job is failed with the reason, and the answer stays near the budget."""
    real = Path(__file__).resolve().parents[2] / "fixtures" / "slurm-22.05.8" / "squeue.json"
    request = {"tail_bytes": 4096, "min_lines": 1, "max_trials": 100,
               "squeue": {"argv": ["cat", str(real)], "users": ["jobtables"]},
               "roots": {"checkpoint": [], "trial": []}, "offsets": {}}
    free = collector.collect_queue(request)
    assert free["jobs"]
    doc = len(json.dumps(free["squeue"]["json"]["jobs"]).encode())
    capped = collector.collect_queue({**request, "answer_budget": doc})
    assert capped["jobs"].keys() == free["jobs"].keys()
    for entry in capped["jobs"].values():
        assert entry["log"]["status"] == "failed"
        assert f"answer budget of {doc} bytes" in entry["log"]["error"]


def test_ansi_colour_codes_are_kept(tmp_path: Path) -> None:
    """ESC is not binary noise: coloured trainer lines reach the log parser intact."""
    log = tmp_path / "slurm-7.out"
    log.write_bytes(b"\x1b[32mINFO\x1b[0m step 3 loss 0.5\x00\n")
    got = _collect(_job(tmp_path, stdout=str(log)))["7"]["log"]
    assert got["text"] == "\x1b[32mINFO\x1b[0m step 3 loss 0.5?\n"
