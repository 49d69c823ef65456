"""A job's own StdErr (``sbatch -e``): where its path comes from and what the collector reads.

SLURM 22.05 prints ``standard_error`` empty in ``squeue --json`` when the job gave none (stderr
then goes to StdOut), ``squeue -O STDERR`` and ``scontrol``'s ``StdErr=`` repeat StdOut's.
Found on the real cluster (``tests/probes/slurm/test_e2e_stderr_log.py``): a traceback on a
separate stderr was never read, and a log on stderr only read ``log-missing``.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from probes.models import JobState, SchedulerRecord
from probes.remote import collector
from probes.remote.script import build_collector_script
from probes.remote.stdio_pattern import own_stderr
from probes.slurm.scontrol import merge_scontrol

PY37 = Path.home() / ".pyenv/versions/3.7.16/bin/python"
TRACEBACK = ("Traceback (most recent call last):\n  File \"tb.py\", line 5, in <module>\n"
             "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB\n")


def _job(**fields: Any) -> dict[str, Any]:
    """A 22.05 squeue --json job object's keys that locate its files."""
    base: dict[str, Any] = {"job_id": 1695, "name": "sft-x", "user_name": "jtuser",
                            "current_working_directory": "/w", "nodes": "vm",
                            "array_job_id": 0, "array_task_id": None,
                            "standard_output": "/w/out_%j.log", "standard_error": ""}
    base.update(fields)
    return base


def test_a_stderr_of_its_own_is_filled_as_slurmstepd_writes_it() -> None:
    assert own_stderr(_job(standard_error="/w/err_%j.log")) == "/w/err_1695.log"
    assert own_stderr(_job(standard_error="%x-%u_%j.err")) == "/w/sft-x-jtuser_1695.err"
    task = _job(job_id=1705, array_job_id=1700, array_task_id=3,
                standard_error="/w/%x_%A_%a.err")
    assert own_stderr(task) == "/w/sft-x_1700_3.err"


@pytest.mark.parametrize("stderr", ["", None, "/w/out_%j.log", "/dev/null", "/w/e_%b.err"])
def test_no_stderr_of_its_own_is_none(stderr: str | None) -> None:
    """Unset (22.05 prints it empty), StdOut's own pattern (``squeue -O`` repeats it), the
    discard, or a token not filled here: nothing separate to read."""
    assert own_stderr(_job(standard_error=stderr)) is None


def test_scontrols_stderr_is_taken_only_when_it_is_not_stdout() -> None:
    record = SchedulerRecord(cluster="c", job_id="1695", name="sft-x", user="jtuser",
                             state=JobState.RUNNING, workdir="/w")
    same = {"JobId": "1695", "StdOut": "/w/sft-x_1695.out", "StdErr": "/w/sft-x_1695.out"}
    assert merge_scontrol(record, same).stderr_path is None
    own = {**same, "StdErr": "/w/err_1695.log"}
    assert merge_scontrol(record, own).stderr_path == "/w/err_1695.log"
    raw = {**same, "StdErr": "/w/err_%b.log"}
    assert merge_scontrol(record, raw).stderr_path is None


def _request(tmp: Path, **job: Any) -> dict[str, Any]:
    base = {"id": "1695", "stdout": str(tmp / "out_1695.log"), "workdir": str(tmp),
            "offset": 0, "checkpoint_roots": [], "trial_roots": []}
    base.update(job)
    return {"tail_bytes": 4096, "min_lines": 1, "jobs": [base]}


def test_a_separate_stderrs_tail_rides_beside_the_log(tmp_path: Path) -> None:
    (tmp_path / "out_1695.log").write_text("{'loss': '5.6', 'grad_norm': '1.4'}\n")
    (tmp_path / "err_1695.log").write_text("x\n" * 40_000 + TRACEBACK)
    log = collector.collect(_request(tmp_path, stderr=str(tmp_path / "err_1695.log")))[
        "jobs"]["1695"]["log"]
    assert (log["status"], log["path"]) == ("ok", str(tmp_path / "out_1695.log"))
    err = log["stderr"]
    assert err["status"] == "ok" and err["text"].endswith(TRACEBACK)
    assert len(err["text"]) <= 32 << 10  # a bounded tail, not the file


def test_a_stderr_not_there_leaves_the_log_as_it_was(tmp_path: Path) -> None:
    (tmp_path / "out_1695.log").write_text("step 1\n")
    plain = collector.collect(_request(tmp_path))["jobs"]["1695"]["log"]
    with_err = collector.collect(_request(tmp_path, stderr=str(tmp_path / "gone.err")))[
        "jobs"]["1695"]["log"]
    assert with_err.pop("stderr")["status"] == "failed"
    plain.pop("mtime"), with_err.pop("mtime")
    assert with_err == plain


def test_a_discarded_stdout_reads_the_stderr_slurm_wrote(tmp_path: Path) -> None:
    """``-o /dev/null -e train_%j.err``: the log is where SLURM wrote it, no mismatch."""
    (tmp_path / "train_1695.err").write_text("{'loss': '5.6'}\n")
    log = collector.collect(_request(tmp_path, stdout="/dev/null",
                                     stderr=str(tmp_path / "train_1695.err")))[
        "jobs"]["1695"]["log"]
    assert (log["status"], log["path"]) == ("ok", str(tmp_path / "train_1695.err"))
    assert "stderr" not in log
    # near miss: without the StdErr it is looked for in the workdir, as before
    bare = collector.collect(_request(tmp_path, stdout="/dev/null"))["jobs"]["1695"]["log"]
    assert bare["status"] == "missing"


def test_the_shipped_script_reads_the_stderr_under_python37(tmp_path: Path) -> None:
    (tmp_path / "out_1695.log").write_text("step 1\n")
    (tmp_path / "err_1695.log").write_text(TRACEBACK)
    request = _request(tmp_path, stderr=str(tmp_path / "err_1695.log"))
    run = subprocess.run([str(PY37), "-"], input=build_collector_script(request),
                         capture_output=True, text=True, check=True, timeout=60)
    assert json.loads(run.stdout)["jobs"]["1695"]["log"]["stderr"]["text"] == TRACEBACK
