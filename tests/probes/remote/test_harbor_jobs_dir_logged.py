"""A Harbor jobs dir outside every trial root, found where the job's log names it.

``harbor run -o /scratch/$USER/harbor-jobs`` writes its job dirs there (``Job.job_dir =
jobs_dir / job_name``), under no default root: before harbor_paths a running eval read
``Starting; no result.json yet`` and a finished one left its tree on scratch with no
``cleanup-pending``. Harbor prints no path as it starts; a batch script's ``set -x`` echoes the
command, and Harbor's closing lines (``harbor/cli/jobs.py``) name the job's result.json and
the jobs dir, printed by rich, which on a file (sbatch, 80 columns) folds a long path over
lines. The lines here are printed by rich as Harbor prints them; the tree is Harbor 0.26.0's
(``tests/fixtures/harbor-0.26.0/agents``).
"""

from __future__ import annotations

import io
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from probes.models import JobState
from probes.remote import collector
from probes.remote.harbor_paths import harbor_jobs_dirs
from probes.remote.script import build_collector_script
from probes.slurm.assemble import job_facts
from tests.report.factories import judge, record

AGENTS = Path(__file__).resolve().parents[2] / "fixtures" / "harbor-0.26.0" / "agents"
EVAL = next((AGENTS / "eval" / "jobs" / "claude-sonnet-4-5").iterdir())
CONSOLE = (AGENTS / "eval" / "console.txt").read_text()
PY37 = Path.home() / ".pyenv" / "versions" / "3.7.16" / "bin" / "python"


def _closing(job_dir: Path, *, terminal: bool = False) -> str:
    """Harbor's last lines after a run (cli/jobs.py), printed by rich's default Console: on a
    file 80 columns wide, long paths folded; on a terminal, paths highlighted in colour."""
    out = io.StringIO()
    console = Console(file=out, width=80, force_terminal=terminal)
    console.print("[bold]Job Info[/bold]")
    console.print("Total runtime: 2h 31m 12s")
    console.print(f"Results written to {job_dir / 'result.json'}")
    console.print(f"Inspect results by running `harbor view {job_dir.parent}`")
    console.print(f"Share results by running `harbor upload {job_dir}`")
    return out.getvalue()


def _scratch_eval(tmp_path: Path) -> tuple[Path, Path]:
    """The workdir, and a job dir on scratch below a long jobs dir (so rich folds it)."""
    workdir = tmp_path / "w"
    workdir.mkdir()
    jobs = tmp_path / "scratch" / "alice" / "harbor-jobs" / "terminal-bench-2.0" / "evals"
    shutil.copytree(EVAL, jobs / EVAL.name)
    return workdir, jobs / EVAL.name


def _request(workdir: Path, text: str, *, completed: bool) -> dict[str, Any]:
    out = workdir / "eval-claude_7101.out"
    out.write_text(text)
    return {"tail_bytes": 1 << 20, "min_lines": 1,
            "jobs": [{"id": "7101", "stdout": str(out), "workdir": str(workdir), "offset": 0,
                      "completed": completed, "checkpoint_roots": [],
                      "trial_roots": [str(workdir / "jobs")]}]}


def _counted(answer: dict[str, Any]) -> dict[str, int]:
    trials = answer["jobs"]["7101"]["trials"]
    return {root: sum(j["tally"]["trials"] for j in v.get("jobs", {}).values())
            for root, v in trials.items() if v.get("exists")}


def test_the_closing_lines_fold_the_path_and_name_the_jobs_dir(tmp_path: Path) -> None:
    """The fold is real (rich cuts the path mid-name); the pieces join back."""
    workdir, job = _scratch_eval(tmp_path)
    text = _closing(job)
    assert str(job / "result.json") not in text  # folded over lines
    assert harbor_jobs_dirs(text, str(workdir), [str(workdir)]) == [(str(job.parent), [])]
    coloured = _closing(job, terminal=True)
    assert "\x1b[" in coloured
    assert harbor_jobs_dirs(coloured, str(workdir), [str(workdir)]) == [(str(job.parent), [])]


def test_a_finished_eval_on_scratch_is_counted_and_judged(tmp_path: Path) -> None:
    """Its tree found, the eval that stopped at 16 of 20 trials reads incomplete-run (its
    pass-rate covers only those that ran), not a row with no trials at all."""
    workdir, job = _scratch_eval(tmp_path)
    text = "+ harbor run -d terminal-bench -a claude-code\n" + CONSOLE + _closing(job)
    answer = collector.collect(_request(workdir, text, completed=True))
    assert _counted(answer) == {str(job.parent): 16}
    rec = record("eval-claude-sonnet-tbench", job_id="7101", state=JobState.COMPLETED,
                 workdir=str(workdir), stdout_path=str(workdir / "eval-claude_7101.out"))
    facts = job_facts(rec, answer["jobs"]["7101"], aliases={}, benign_patterns=())
    assert facts.trials is not None and facts.trials.root == str(job.parent)
    row = judge(facts).report
    assert row.metrics["trials"] == 16 and row.metrics["trials_total"] == 20
    assert row.flags == ["incomplete-run"]
    assert row.recommendation is not None and row.recommendation.action == "diagnose"


@pytest.mark.parametrize("echo", [
    "+ harbor run -d terminal-bench@2.0 -a claude-code -m anthropic/claude-sonnet-4-5 -o {d}",
    "+ harbor run --dataset terminal-bench@2.0 --agent claude-code --jobs-dir {d} -n 4",
    "+ uv run harbor jobs start -c eval.yaml --jobs-dir={d}",
])
def test_a_running_evals_echoed_command_names_the_jobs_dir(tmp_path: Path, echo: str) -> None:
    """``set -x`` in the batch script: the only place a running Harbor names its jobs dir."""
    workdir, job = _scratch_eval(tmp_path)
    text = echo.format(d=job.parent) + "\n" + CONSOLE
    answer = collector.collect(_request(workdir, text, completed=False))
    assert _counted(answer) == {str(job.parent): 16}


@pytest.mark.parametrize("line", [
    "+ python gen.py -o {d}",                       # another program's -o
    "+ harbor run -d terminal-bench -a claude-code -o ~/harbor-jobs",
    "+ harbor run -d terminal-bench -a claude-code -o $SCRATCH/harbor-jobs",
    "+ harbor run -d terminal-bench -a claude-code -o s3://bucket/harbor-jobs",
])
def test_what_names_no_harbor_jobs_dir(tmp_path: Path, line: str) -> None:
    workdir, job = _scratch_eval(tmp_path)
    assert harbor_jobs_dirs(line.format(d=job.parent), str(workdir), [str(workdir)]) == []


def test_another_tools_results_line_names_no_tree(tmp_path: Path) -> None:
    """Near miss: ``Results written to <dir>/result.json`` is also other tools' wording; the
    directory above it (here the workdir, holding a config.json as many do) is not taken for
    the run's tree in place of its default root."""
    workdir = tmp_path / "w"
    shutil.copytree(EVAL, workdir / "jobs" / EVAL.name)
    (workdir / "config.json").write_text("{}")
    text = CONSOLE + f"Results written to {workdir / 'out' / 'result.json'}\n"
    assert harbor_jobs_dirs(text, str(workdir), [str(workdir)]) == []
    answer = collector.collect(_request(workdir, text, completed=True))
    assert _counted(answer) == {str(workdir / "jobs"): 16}


def test_the_default_jobs_dir_adds_nothing_to_the_default_root(tmp_path: Path) -> None:
    """Near miss: ``Results written to jobs/<job>/result.json`` names the default root,
    already counted once."""
    workdir = tmp_path / "w"
    shutil.copytree(EVAL, workdir / "jobs" / EVAL.name)
    text = CONSOLE + _closing(Path("jobs") / EVAL.name)
    answer = collector.collect(_request(workdir, text, completed=True))
    assert _counted(answer) == {str(workdir / "jobs"): 16}


def test_the_shipped_script_under_python37_reads_it(tmp_path: Path) -> None:
    assert PY37.exists(), "pyenv 3.7.16 is part of this machine's toolchain"
    workdir, job = _scratch_eval(tmp_path)
    req = _request(workdir, CONSOLE + _closing(job), completed=True)
    ran = subprocess.run([str(PY37), "-"], input=build_collector_script(req).encode(),
                         capture_output=True, check=True, timeout=120)
    assert _counted(json.loads(ran.stdout)) == {str(job.parent): 16}


def test_the_echoed_jobs_dir_is_kept_across_warm_reads(tmp_path: Path) -> None:
    """The bot reads a running job's log from its cursor: the appended progress rows only,
    which no longer hold the echoed command. The jobs dir rides in the cursor as a logged
    trials dir does, so the tree stays counted."""
    workdir, job = _scratch_eval(tmp_path)
    echo = f"+ harbor run -d terminal-bench@2.0 -a claude-code -o {job.parent}\n"
    spec = dict(_request(workdir, echo + CONSOLE, completed=False)["jobs"][0], cursor=None)
    first = collector.collect({"tail_bytes": 1 << 20, "min_lines": 1, "jobs": [spec]})
    assert _counted(first) == {str(job.parent): 16}
    cursor = first["jobs"]["7101"]["log"]["cursor"]
    assert cursor["trials"] == [str(job.parent)]
    with (workdir / "eval-claude_7101.out").open("a") as fh:
        fh.write("\r\x1b[2K\x1b[32m⠋\x1b[0m \x1b[32m17/20\x1b[0m Mean: 0.412\n")
    second = collector.collect({"tail_bytes": 1 << 20, "min_lines": 1,
                                "jobs": [dict(spec, cursor=cursor)]})
    assert second["jobs"]["7101"]["log"].get("continued") is True
    assert _counted(second) == {str(job.parent): 16}
