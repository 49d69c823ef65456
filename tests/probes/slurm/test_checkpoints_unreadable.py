"""A checkpoint root the login account cannot read says so. A dry run on the real SLURM read a
jtuser RL run whose ``checkpoints/`` is 0700 (the bot logs in as another account): the row,
``jobtables job`` and the JSON showed ``banked_step`` null and nothing else, as if the run had
banked nothing. The collector's search records why a root could not be listed; the job's facts
keep it, the Trend says the checkpoints are unreadable, the job view names the root and the
reason, and no "banking nothing" warning is drawn from a listing that was never read."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from probes.models import JobFacts
from probes.remote.guard import Guard
from probes.remote.tree import SEEN, collect_checkpoints
from probes.slurm.assemble import job_facts
from report.render import render_job_detail, render_job_json
from tests.report.factories import judge, log, points, record, summary

_VERL = "step:{i} - actor/entropy:0.5 - actor/grad_norm:0.2 - critic/score/mean:0.4\n"


def _symlinked_root(workdir: Path) -> str:
    """``checkpoints`` a symlink the search does not follow (into /proc: a root that is a link
    is followed only to a directory the job's user could list, nothing under /proc, /sys or
    /dev, ``Guard.open_root``): a root that cannot be read."""
    (workdir / "checkpoints").symlink_to("/proc/self")
    return str(workdir / "checkpoints")


def _collected(workdir: Path, roots: list[str]) -> dict[str, Any]:
    """The collector's checkpoint answer for ``roots``, searched for real."""
    SEEN.clear()
    return {"checkpoints": collect_checkpoints(roots, Guard(workdir.stat().st_uid, 5.0),
                                               None, str(workdir))}


def _permission_denied(root: str) -> dict[str, Any]:
    """The collector's answer for a 0700 root of another user (os.open's EACCES, as str())."""
    return {"checkpoints": {"listings": {}, "exports": {}, "markers": {},
                            "errors": {root: f"[Errno 13] Permission denied: '{root}'"}}}


def _facts(collected: dict[str, Any], workdir: str, **summary_kw: Any) -> JobFacts:
    """A live RL run's facts: its log read (twelve healthy steps), its checkpoints as
    ``collected`` says (through the probe's assembly of the collector's answer)."""
    rec = record("rl-grpo-ckpt700", workdir=workdir)
    found = job_facts(rec, collected, aliases={}, benign_patterns=())
    return found.model_copy(update={"log": log(), "summary": summary(_PTS, **summary_kw)})


_PTS = points({"reward": [0.4] * 12, "entropy": [0.5] * 12, "grad_norm": [0.2] * 12})


@pytest.mark.parametrize("kind", ["permission-denied", "symlinked-root"])
def test_an_unreadable_checkpoint_root_is_said(tmp_path: Path, kind: str) -> None:
    """Trend, note and JSON name why no banked step is known."""
    workdir = tmp_path / "run"
    workdir.mkdir()
    if kind == "symlinked-root":
        root = _symlinked_root(workdir)
        collected = _collected(workdir, [root])
        reason = "symbolic link"
    else:
        root = str(workdir / "checkpoints")
        collected = _permission_denied(root)
        reason = "Permission denied"
    job = _facts(collected, str(workdir))
    assert job.checkpoints is not None and job.checkpoints.banked_step is None
    assert any(root in u and reason in u for u in job.checkpoints.unreadable)
    detail = judge(job)
    assert detail.report.banked_step is None
    assert "checkpoints unreadable" in detail.report.trend
    assert root in detail.note and reason in detail.note
    assert "[Errno" not in detail.note
    shown = render_job_detail(detail)
    assert "checkpoints unreadable" in shown and reason in shown
    data = json.loads(render_job_json(detail))
    assert data["banked_step"] is None
    assert "checkpoints unreadable" in data["trend"]


def test_a_listing_never_read_draws_no_banking_warning(tmp_path: Path) -> None:
    """A run whose log says it saved at steps 2 and 4, its checkpoints unreadable, now at
    step 12: no 'banking nothing' warning (the steps on disk are unknown)."""
    root = str(tmp_path / "checkpoints")
    job = _facts(_permission_denied(root), str(tmp_path), checkpoint_steps=(2, 4))
    detail = judge(job)
    assert "banking nothing" not in detail.report.trend
    assert detail.report.verdict == "healthy"
    assert "checkpoints unreadable" in detail.report.trend


def test_a_banked_step_found_keeps_its_row_quiet(tmp_path: Path) -> None:
    """Another root unreadable beside one that banked: the step stands, the Trend is the run's
    (the job view still names the unreadable root)."""
    good = tmp_path / "ckpts"
    (good / "global_step_20").mkdir(parents=True)
    root = _symlinked_root(tmp_path)
    job = _facts(_collected(tmp_path, [str(good), root]), str(tmp_path))
    detail = judge(job)
    assert detail.report.banked_step == 20
    assert "unreadable" not in detail.report.trend
    assert root in detail.note


def test_a_missing_root_is_no_unreadable_one(tmp_path: Path) -> None:
    """A root that does not exist (most default roots of most runs) says nothing."""
    job = _facts(_collected(tmp_path, [str(tmp_path / "checkpoints")]), str(tmp_path))
    assert job.checkpoints is None or not job.checkpoints.unreadable


@pytest.mark.parametrize("kind", ["fifo", "file"])
def test_a_root_that_is_no_directory_is_an_absent_one(tmp_path: Path, kind: str) -> None:
    """``checkpoints`` a FIFO or a file (a default root such as ``{workdir}/output`` is often
    a file): no checkpoints there, nothing unreadable, and the roots below it
    (``{workdir}/checkpoints/{name}``) are absent too."""
    root = tmp_path / "checkpoints"
    if kind == "fifo":
        os.mkfifo(root)
    else:
        root.write_text("not a directory\n")
    job = _facts(_collected(tmp_path, [str(root), str(root / "rl-run")]), str(tmp_path))
    assert job.checkpoints is None
