"""Paths that are not UTF-8 (``sbatch -o $'log\\xff_%j.out'``, a Latin-1 workdir) keep their
exact bytes from the scheduler's output to the file open on the login node, and the answer
stays valid UTF-8 JSON (such bytes travel as ``\\udcXX`` escapes, ``os.fsdecode``'s form)."""

from __future__ import annotations

import getpass
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from probes.remote import collector
from probes.remote.scheduler import run_scheduler
from probes.remote.script import build_collector_script
from probes.slurm.answer import loads

REAL = Path(__file__).resolve().parents[2] / "fixtures" / "slurm-22.05.8"
PY37 = Path.home() / ".pyenv" / "versions" / "3.7.16" / "bin" / "python"
LOG = b"step 1\nstep 2\n"


def _undecodable_dir(tmp: Path) -> bytes:
    """A workdir named in Latin-1 (``w\\xe9d``), as bytes."""
    workdir = os.fsencode(tmp) + b"/w\xe9d"
    os.mkdir(workdir)
    return workdir


def _answer(raw: bytes) -> dict[str, Any]:
    """The answer as the probe reads it: valid UTF-8, parsed by the probe's own reader."""
    raw.decode("utf-8")  # strict: a consumer of the bytes must not meet invalid UTF-8
    answer: dict[str, Any] = loads(raw)
    return answer


def test_a_log_found_in_the_workdir_under_an_undecodable_name_is_sent_exactly(
        tmp_path: Path) -> None:
    """StdOut absent, the workdir's ``log\\xff\\xfe_4242.out`` found: the answer encodes (it
    raised UnicodeEncodeError and the collector died for every job) and names the file's
    exact bytes."""
    workdir = _undecodable_dir(tmp_path)
    with open(workdir + b"/log\xff\xfe_4242.out", "wb") as fh:
        fh.write(LOG)
    spec = {"id": "4242", "stdout": os.fsdecode(workdir + b"/gone_4242.out"),
            "workdir": os.fsdecode(workdir), "offset": 0, "checkpoint_roots": [],
            "trial_roots": []}
    request = {"tail_bytes": 4096, "min_lines": 1, "max_trials": 100, "jobs": [spec]}
    log = _answer(collector.encode(collector.collect(request)))["jobs"]["4242"]["log"]
    assert (log["status"], log["text"]) == ("mismatch", LOG.decode())
    assert os.fsencode(log["path"]) == workdir + b"/log\xff\xfe_4242.out"
    assert os.fsencode(log["requested"]) == workdir + b"/gone_4242.out"


def _squeue_file(tmp: Path, stdout: bytes, workdir: bytes) -> Path:
    """A captured ``squeue --json`` whose one running job (the test runner's) has ``stdout``
    and ``workdir`` and a name holding a byte that is not UTF-8, written as squeue 22.05
    prints them: the raw bytes, unescaped."""
    base = json.loads((REAL / "squeue_early.json").read_text())
    job = next(j for j in base["jobs"] if j["job_state"] == "RUNNING")
    job.update(standard_output="@OUT@", current_working_directory="@DIR@", name="rl-@NAME@",
               user_name=getpass.getuser())
    text = json.dumps({**base, "jobs": [job]}).encode()
    text = text.replace(b"@OUT@", stdout.replace(b"/", b"\\/")).replace(
        b"@DIR@", workdir.replace(b"/", b"\\/")).replace(b"@NAME@", b"a\xffb")
    path = tmp / "squeue.json"
    path.write_bytes(text)
    return path


def _queue_request(squeue: Path) -> dict[str, Any]:
    return {"tail_bytes": 4096, "min_lines": 1, "max_trials": 100,
            "squeue": {"argv": ["cat", str(squeue)], "users": [getpass.getuser()]},
            "roots": {"checkpoint": [], "trial": []}, "offsets": {}}


def _check_queue_answer(answer: dict[str, Any], workdir: bytes) -> None:
    (key, entry), = answer["jobs"].items()
    log = entry["log"]
    assert (log["status"], log["text"]) == ("ok", LOG.decode())
    assert os.fsencode(log["path"]) == workdir + b"/log\xff\xfe_" + key.encode() + b".out"
    job = answer["squeue"]["json"]["jobs"][0]
    assert os.fsencode(job["current_working_directory"]) == workdir
    # Only the paths keep their bytes: a name is shown, as ever, with U+FFFD.
    assert job["name"] == "rl-a\ufffdb"


def test_an_undecodable_stdout_in_squeues_document_is_read_where_it_is(tmp_path: Path) -> None:
    """squeue --json prints the raw bytes of ``log\\xff\\xfe_%j.out``; the collector decoded
    them with U+FFFD and opened a file that does not exist (``log-missing``)."""
    workdir = _undecodable_dir(tmp_path)
    squeue = _squeue_file(tmp_path, workdir + b"/log\xff\xfe_%j.out", workdir)
    job_id = str(json.loads(squeue.read_bytes().decode("utf-8", "replace"))["jobs"][0]["job_id"])
    with open(workdir + b"/log\xff\xfe_" + job_id.encode() + b".out", "wb") as fh:
        fh.write(LOG)
    answer = _answer(collector.encode(collector.collect_queue(_queue_request(squeue))))
    _check_queue_answer(answer, workdir)


@pytest.mark.parametrize("python", ["python3", str(PY37)])
def test_the_shipped_script_keeps_the_bytes_too(tmp_path: Path, python: str) -> None:
    """``python3 -`` (and a 3.7 login node) on the built script: the same exact path, in
    valid UTF-8."""
    assert PY37.exists(), "pyenv 3.7.16 is part of this machine's toolchain"
    workdir = _undecodable_dir(tmp_path)
    squeue = _squeue_file(tmp_path, workdir + b"/log\xff\xfe_%j.out", workdir)
    job_id = str(json.loads(squeue.read_bytes().decode("utf-8", "replace"))["jobs"][0]["job_id"])
    with open(workdir + b"/log\xff\xfe_" + job_id.encode() + b".out", "wb") as fh:
        fh.write(LOG)
    script = build_collector_script(_queue_request(squeue))
    run = subprocess.run([python, "-"], input=script.encode(), capture_output=True,
                         check=True, timeout=60)
    _check_queue_answer(_answer(run.stdout), workdir)


def test_scheduler_commands_output_keeps_its_bytes(tmp_path: Path) -> None:
    """scontrol's ``StdOut=`` of such a path (a one-job read's command) comes back exact."""
    path = tmp_path / "scontrol.txt"
    path.write_bytes(b"JobId=7 StdOut=/w/log\xff_7.out\n")
    (ran,) = run_scheduler([{"argv": ["env", "cat", str(path)]}], 10.0)
    assert ran is not None
    sent = _answer(collector.encode(ran))
    assert os.fsencode(sent["stdout"]) == b"JobId=7 StdOut=/w/log\xff_7.out\n"
