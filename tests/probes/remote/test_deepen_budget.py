"""A request's read-backs of resampling tails never spend the answer budget other jobs need.

b9ae030 reads a cold tail of a dynamic-sampling run (SkyRL's ``Resample batch K, continue
sampling...`` with no ``Step N:`` header or save line in it) back to an anchor, at most
``DEEPEN_MAX`` (8 MiB, "a quarter of the default answer budget ... so a request holding a few
such runs still answers for every job"). That bound was per job: every ``jobtables sweep``
(each one cold) of five such runs (9.4 MiB logs, the wandb logger, no save yet) sent 8 MiB of
each, and the answer budget (32 MiB, shared by the request's jobs) was spent by the fourth:
it and every job after it read ``collector answer budget ... spent``. The read-backs of one
request now share that quarter; a tail past it is left as it is (its lead counted from the
tail's start, as before b9ae030), and every job answers.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from probes.remote import collector
from probes.remote.logread import DEEPEN_MAX
from tests.probes.remote.test_tail_batches_lead import _run

RUNS = 5


def _request(tmp_path: Path, text: str) -> dict[str, Any]:
    first = tmp_path / "run-0.log"
    first.write_text(text)
    jobs = []
    for n in range(RUNS):
        log = tmp_path / f"run-{n}.log"
        if n:
            os.link(first, log)
        jobs.append({"id": str(900 + n), "stdout": str(log), "workdir": str(tmp_path),
                     "offset": 0, "checkpoint_roots": [], "trial_roots": []})
    extra = tmp_path / "sft.log"
    extra.write_text("{'loss': 1.1, 'grad_norm': 0.4, 'learning_rate': 1e-05, 'epoch': 0.1}\n")
    jobs.append({"id": "999", "stdout": str(extra), "workdir": str(tmp_path), "offset": 0,
                 "checkpoint_roots": [], "trial_roots": []})
    return {"tail_bytes": 1 << 20, "min_lines": 1, "jobs": jobs}


def test_five_resampling_runs_and_a_job_after_them_all_answer(tmp_path: Path) -> None:
    text = _run(batches=4000, ckpt=100000)  # wandb logger, no save: no anchor anywhere
    assert len(text) > DEEPEN_MAX + (1 << 20)
    jobs = collector.collect(_request(tmp_path, text))["jobs"]
    statuses = {key: (job["log"]["status"], job["log"].get("error")) for key, job in
                jobs.items()}
    assert all(status == "ok" for status, _ in statuses.values()), statuses
    read = [len(jobs[str(900 + n)]["log"]["text"]) for n in range(RUNS)]
    assert read[0] > DEEPEN_MAX // 2  # the first still reads back
    # the read-backs share one quarter; the others send their tails and the few lines their
    # lead is counted from (read_back.far_lines), not the MiBs between
    assert all(n < (1 << 20) + len(text) // 16 for n in read[1:]), read
    assert sum(read) <= DEEPEN_MAX + RUNS * ((1 << 20) + len(text) // 16)


def test_a_separate_stderr_tail_is_never_read_back(tmp_path: Path) -> None:
    """The StdErr beside the log is a fixed 32 KiB tail for its traceback (SkyRL's loguru and
    tqdm write there under ``sbatch -e``): its resample lines are no reason to send MiBs."""
    text = _run(batches=4000, ckpt=100000)
    err = tmp_path / "run.err"
    err.write_text(text)
    out = tmp_path / "run.out"
    out.write_text("starting\n")
    request = {"tail_bytes": 1 << 20, "min_lines": 1, "jobs": [
        {"id": "950", "stdout": str(out), "stderr": str(err), "workdir": str(tmp_path),
         "offset": 0, "checkpoint_roots": [], "trial_roots": []}]}
    log = collector.collect(request)["jobs"]["950"]["log"]
    assert log["status"] == "ok"
    assert 0 < len(log["stderr"]["text"]) <= 32 << 10, len(log["stderr"]["text"])
