"""A Hugging Face run whose StdErr is its own file (``sbatch -e``) keeps its progress bar.

HF Trainer writes each step's dict with ``tqdm.write`` (stdout) and its progress bar to
stderr: with ``-o out_%j.log -e err_%j.log`` the stdout alone has the dicts but no ``25/95``.
Replayed on the real SLURM 22.05 as jtuser (job 2887, the real 5.24 console split that way):
``jobtables job`` read step 25 with no total, no ETA. The stderr tail read for its faults
(99aa50b) gives the bar: the total, the bar and the rate are taken from it when stdout has none.
"""

from __future__ import annotations

import re
from pathlib import Path

from probes.log_facts import LogSummary
from probes.models import JobState, SchedulerRecord
from probes.slurm.assemble import job_facts

CONSOLE = Path(__file__).parents[2] / "fixtures" / "hf-transformers-5.24.0" / "sft_healthy.out"


def _split() -> tuple[str, str]:
    """The console's first 6 KB as HF writes it with stdout and stderr apart."""
    out, err = [], []
    for line in CONSOLE.read_text()[:6000].splitlines():
        out += re.findall(r"\{'[^}]*\}", line)
        bars = re.sub(r"\{'[^}]*\}", "", line)
        if bars.strip():
            err.append(bars)
    return "\n".join(out) + "\n", "\n".join(err) + "\n"


def _facts(stderr: dict[str, str] | None) -> LogSummary:
    out, _ = _split()
    record = SchedulerRecord(cluster="c", job_id="2887", name="sft-hf-split", user="jtuser",
                             state=JobState.RUNNING, stdout_path="/w/out_2887.log",
                             stderr_path="/w/err_2887.log")
    log = {"requested": "/w/out_2887.log", "path": "/w/out_2887.log", "status": "ok",
           "text": out, "lines": out.count("\n"), "offset": 0, "size": len(out)}
    if stderr is not None:
        log["stderr"] = stderr
    summary = job_facts(record, {"log": log}, aliases={}, benign_patterns=[]).summary
    assert summary is not None
    return summary


def test_the_bar_on_stderr_gives_the_total_and_the_rate() -> None:
    _, err = _split()
    summary = _facts({"path": "/w/err_2887.log", "status": "ok", "text": err})
    assert summary.total_steps == 95
    assert summary.progress is not None and summary.progress.total == 95
    assert summary.sec_per_step is not None
    assert summary.points == _facts(None).points  # the steps are stdout's dicts, as before
    assert summary.progress.current <= summary.points[-1].step


def test_without_the_stderr_there_is_no_total() -> None:
    """Near miss: the stdout alone says nothing of the total (as before)."""
    assert _facts(None).total_steps is None
    failed = _facts({"path": "/w/err_2887.log", "status": "failed", "error": "gone"})
    assert failed.total_steps is None
