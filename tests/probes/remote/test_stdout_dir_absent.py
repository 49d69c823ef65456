"""A StdOut whose directory does not exist says so: the reason SLURM could not launch the job.

Found on the real SLURM 22.05: ``sbatch -o W/nosuch/dir/%j.out`` (job 35) ended FAILED at once,
``Reason=JobLaunchFailure ExitCode=0:53`` (slurmd: "Could not open stdout file ...: No such file
or directory"; sbatch does not create the directory), and ``jobtables job 35`` read
'FAILED by signal 53 (JobLaunchFailure)', 'Log: not found': nothing said why. The collector
now says a missing log's StdOut directory is absent; the near misses (the directory exists,
or a file stands there) say nothing more.
"""

from __future__ import annotations

from pathlib import Path

from probes.remote import collector
from tests.probes.remote.test_collector import _log, _request


def test_missing_log_names_its_absent_directory(tmp_path: Path) -> None:
    """StdOut in a directory that was never made: missing, with the directory named."""
    stdout = tmp_path / "nosuch" / "dir" / "4242.out"
    log = _log(collector.collect(_request(tmp_path, stdout=str(stdout))))
    assert (log["status"], log["path"]) == ("missing", None)
    assert log["error"] == (f"StdOut dir {stdout.parent} does not exist"
                            " (sbatch does not create it)")


def test_missing_log_in_an_existing_directory_says_nothing_more(tmp_path: Path) -> None:
    """Near miss: the directory is there, only the file is not: plain missing."""
    log = _log(collector.collect(_request(tmp_path, stdout=str(tmp_path / "4242.out"))))
    assert (log["status"], log.get("error")) == ("missing", None)


def test_a_file_where_the_directory_should_be_is_not_called_absent(tmp_path: Path) -> None:
    """Near miss: a file named like the directory: not 'does not exist'."""
    (tmp_path / "logs").write_text("a file\n")
    log = _log(collector.collect(_request(tmp_path, stdout=str(tmp_path / "logs" / "4242.out"))))
    assert "does not exist" not in (log.get("error") or ""), log
