"""The log fallback's workdir listing: a workdir SLURM holds as a symlink is listed, and a
workdir that cannot be listed makes the log a failed fetch, not a missing log.

On the real SLURM 22.05, ``sbatch --chdir /home/u/link`` (``link`` a symlink to the run
directory, as scratch and project links usually are) keeps ``WorkDir=/home/u/link``: the
collector opened the workdir with ``O_NOFOLLOW``, could not list it, and a job whose real log
sat there as ``train_<id>.out`` read ``log-missing`` 'No log found'. And a jtuser job whose
workdir was 0711 (not listable by the bot's account), StdOut gone and the real log
``train_4132.out`` beside it, read ``log-missing`` too: the search never ran, so nothing
says the log is absent (seed: a failed fetch is indistinguishable from an idle job).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from probes.remote import collector


def _log(workdir: Path | str, stdout: str) -> dict[str, Any]:
    request = {"tail_bytes": 4096, "min_lines": 1, "max_trials": 100,
               "jobs": [{"id": "4242", "stdout": stdout, "workdir": str(workdir), "offset": 0,
                         "checkpoint_roots": [], "trial_roots": []}]}
    log: dict[str, Any] = collector.collect(request)["jobs"]["4242"]["log"]
    return log


def test_a_symlinked_workdir_is_listed_for_the_real_log(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (real / "train_4242.out").write_text("step 1\n")
    (tmp_path / "link").symlink_to(real)
    log = _log(tmp_path / "link", str(tmp_path / "link" / "gone_4242.out"))
    assert (log["status"], log["path"]) == ("mismatch", str(tmp_path / "link" / "train_4242.out"))


def test_a_workdir_that_cannot_be_listed_is_a_failed_fetch(tmp_path: Path) -> None:
    """Listing fails (here: the workdir is no directory): failed with the reason."""
    notdir = tmp_path / "run"
    notdir.write_text("")
    log = _log(notdir, str(tmp_path / "gone_4242.out"))
    assert log["status"] == "failed" and log["path"] is None
    assert "could not be listed" in log["error"] and str(notdir) in log["error"]


def test_a_missing_workdir_is_still_a_missing_log(tmp_path: Path) -> None:
    log = _log(tmp_path / "nowhere", str(tmp_path / "nowhere" / "gone_4242.out"))
    assert (log["status"], log["path"]) == ("missing", None)


def test_a_symlink_to_proc_is_not_listed(tmp_path: Path) -> None:
    """Followed, the workdir's own device is still checked: /proc is never listed."""
    (tmp_path / "p").symlink_to("/proc/self")
    log = _log(tmp_path / "p", str(tmp_path / "p" / "gone_4242.out"))
    assert log["status"] in ("failed", "missing") and log["path"] is None
