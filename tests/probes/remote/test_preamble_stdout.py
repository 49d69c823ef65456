"""A StdOut that holds only the batch script's preamble is not the log when the job's own
``*_<jobid>.out`` sits beside it: that file is read (``mismatch``).

Found on the real SLURM 22.05 (job 774): ``sbatch -o slurm-%j.out`` of a script that echoes
"Job 774 starting on vm ..." and then runs ``python train.py > logs/train_${SLURM_JOB_ID}.out
2>&1`` (a common launcher) read 'Filling buffer', buffer-filling, for a verl run nine steps in:
StdOut existed, so the workdir was never looked at, and a run training for hours would read as
still in bring-up. StdOut under ``PREAMBLE_BYTES`` with a larger candidate of the job's own is
the preamble; near misses: a StdOut that is the log (larger), or no candidate, is read as is.
"""

from __future__ import annotations

from pathlib import Path

from probes.remote import collector
from tests.probes.remote.test_collector import _log, _request

STEPS = "".join(f"step:{n} - actor/entropy:0.6 - actor/grad_norm:0.2\n" for n in range(1, 40))


def test_a_preamble_stdout_gives_way_to_the_jobs_own_log(tmp_path: Path) -> None:
    """StdOut has one line; logs/train_4242.out has the steps: that is read, mismatch."""
    stdout = tmp_path / "slurm-4242.out"
    stdout.write_text("Job 4242 starting on vm at Sat Dec  5 12:20:01 UTC 2026\n")
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "train_4242.out").write_text(STEPS)
    log = _log(collector.collect(_request(tmp_path, stdout=str(stdout))))
    assert (log["status"], log["path"], log["requested"]) == (
        "mismatch", str(tmp_path / "logs" / "train_4242.out"), str(stdout))
    assert log["text"] == STEPS
    assert "preamble" in log["error"] and str(stdout) in log["error"]


def test_a_stdout_that_is_the_log_stays(tmp_path: Path) -> None:
    """Near miss: StdOut is the larger file (the log), a small stray candidate: StdOut."""
    stdout = tmp_path / "slurm-4242.out"
    stdout.write_text(STEPS)
    (tmp_path / "env_4242.out").write_text("CUDA_VISIBLE_DEVICES=0\n")
    log = _log(collector.collect(_request(tmp_path, stdout=str(stdout))))
    assert (log["status"], log["path"]) == ("ok", str(stdout))


def test_a_short_stdout_with_no_candidate_stays(tmp_path: Path) -> None:
    """Near miss: a job that printed one line so far, nothing beside it: StdOut, ok."""
    stdout = tmp_path / "slurm-4242.out"
    stdout.write_text("Starting verl trainer\n")
    log = _log(collector.collect(_request(tmp_path, stdout=str(stdout))))
    assert (log["status"], log["path"]) == ("ok", str(stdout))


def test_an_engines_own_log_is_no_preamble_candidate(tmp_path: Path) -> None:
    """Near miss: an eval's short Harbor console (StdOut) beside the engine's own larger
    ``vllm_<id>.log`` (``vllm serve ... > vllm_$SLURM_JOB_ID.log &``) is still the log: the
    engine's file is read for the launch checks (``engine``), never in place of the job's."""
    stdout = tmp_path / "out_4242.log"
    stdout.write_text("Starting job\n")
    (tmp_path / "vllm_4242.log").write_text(
        '(APIServer pid=812) INFO:     10.4.7.21:51234 - "POST /v1/chat/completions HTTP/1.1"'
        " 200 OK\n" * 100)
    log = _log(collector.collect(_request(tmp_path, stdout=str(stdout))))
    assert (log["status"], log["path"], log.get("error")) == ("ok", str(stdout), None)
