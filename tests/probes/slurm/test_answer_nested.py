"""A login node's answer nested past Python's JSON parser is read as an unreadable answer.

``json.loads`` (and ``probes.slurm.answer.loads``, which answers as it does) raises
``RecursionError``, not ``ValueError``, for arrays nested past the parser. Found driving a
``local = true`` cluster whose ``python3`` printed such a line as the collector's answer (a
hostile or broken login node): ``jobtables sweep`` reported the cluster ``unreachable`` with
"probe error: ExceptionGroup('unhandled errors in a TaskGroup', [RecursionError(...)])" and a
traceback on stderr, and ``jobtables job ID`` died with "internal error" (exit 1): the
answer's readers caught ``ValueError`` only. Now a nested head is an unreadable answer (the
one-by-one commands are run instead, as when python3 prints nothing), and a nested job line
fails that job with the reason, as any unreadable line does; so do the one-job read's, the
deep probe's rollout reader's and ``squeue --json``'s documents.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

from probes.errors import CommandError
from probes.slurm.answer import AnswerReader
from probes.slurm.commands import json_document
from tests.probes.slurm.conftest import ROOT, SlurmEnv

NESTED = b'{"a":' + b"[" * 100_000 + b"]" * 100_000 + b"}"
HEAD = json.dumps({"protocol": 2, "part": "head", "order": ["7", "8"]}).encode()


def test_a_nested_head_is_an_unreadable_answer() -> None:
    reader = AnswerReader()
    reader.line(NESTED)
    assert reader.error is not None and reader.error.startswith(
        "collector answer is unreadable: maximum recursion depth"), reader.error


def test_a_nested_job_line_fails_that_job_only() -> None:
    reader = AnswerReader()
    reader.line(HEAD)
    reader.line(b"7\t" + NESTED)
    reader.line(b'8\t{"log": {"text": "step 1", "status": "ok"}}')
    reader.line(b'{"part": "end"}')
    assert reader.jobs["7"]["log"]["status"] == "failed"
    assert "unreadable: maximum recursion depth" in reader.jobs["7"]["log"]["error"]
    assert reader.jobs["8"]["log"]["text"] == "step 1" and reader.ended


def test_a_nested_early_line_and_end_line_are_passed_over() -> None:
    reader = AnswerReader()
    reader.line(b"7\t" + NESTED)  # before the head: read while squeue runs
    reader.line(HEAD)
    reader.line(NESTED)  # where the end line would be
    assert reader.error is None and not reader.ended


def test_a_nested_squeue_document_is_a_command_error() -> None:
    with pytest.raises(CommandError, match="squeue --json printed invalid JSON"):
        json_document(NESTED.decode())


@pytest.fixture
def nested_python(tmp_path: Path) -> Path:
    """A directory holding a ``python3`` that reads its script and prints a nested line."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "python3"
    script.write_text("#!/bin/sh\ncat > /dev/null\n"
                      f"exec {sys.executable} -c \"import sys; sys.stdout.write("
                      "'{\\\"a\\\":' + '[' * 100000 + ']' * 100000 + '}\\n')\"\n")
    script.chmod(0o755)
    return bin_dir


def test_jobtables_job_and_sweep_on_such_a_node(slurm_env: SlurmEnv, tmp_path: Path,
                                                nested_python: Path) -> None:
    """A real job on the local cluster, read with that python3 first on the PATH: ``job``
    exits 0 with the job's row, ``sweep`` reports no probe crash."""
    run = subprocess.run(
        ["sbatch", "--parsable", f"--uid={slurm_env.user}", f"--gid={slurm_env.user}",
         "--chdir=/tmp", "-J", f"rl-nested-{secrets.token_hex(3)}", "-o", "/dev/null",
         "--time=5", "--wrap", "sleep 300"],
        capture_output=True, text=True, check=True, timeout=60)
    job_id = run.stdout.strip().split(";")[0]
    config = tmp_path / "jobtables.toml"
    config.write_text(f'[[clusters]]\nname = "local22"\nkind = "slurm"\nlocal = true\n'
                      f'users = ["{slurm_env.user}"]\n')
    env = {**os.environ, "PATH": f"{nested_python}{os.pathsep}{os.environ['PATH']}"}
    try:
        for argv in (["job", job_id], ["sweep"]):
            done = subprocess.run([sys.executable, "-m", "bot.cli", *argv, "--format", "json",
                                   "--config", str(config)], capture_output=True, cwd=ROOT,
                                  env=env, timeout=240, check=False)
            err = done.stderr.decode("utf-8", "replace")
            assert done.returncode == 0, err
            assert "RecursionError" not in err and "Traceback" not in err, err
            doc = json.loads(done.stdout)
            if argv[0] == "job":
                assert doc["job_id"] == job_id and doc["state"] in ("PENDING", "RUNNING"), doc
            else:
                details = [c.get("detail") or "" for c in doc["clusters"]]
                assert not any("probe error" in d for d in details), details
    finally:
        subprocess.run(["scancel", job_id], check=False, timeout=60)
