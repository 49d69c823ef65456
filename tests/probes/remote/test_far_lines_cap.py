"""The lines a resampling tail's read-back sends from past its whole read-back are capped.

e8770a6 lets a SkyRL DAPO run whose anchor lies past the bytes its read-back sends whole
(``deepen_max``) scan on to ``DEEPEN_SCAN`` (64 MiB) and send the anchor, each resample line
with the bar redraw after it and the first redraw after the anchor (``read_back.far_lines``).
Those were not capped, nor paid from the answer budget: some 4% of a dense log's bytes, so a
run with no anchor in 40 MB of log sent 1.3 MB of them, and ~2.7 MB at the full scan, per
job. The lead needs every one of them from the anchor on (a count missing some reads the step
that much too high), so a run needing more than ``FAR_MAX`` sends none, and says so
(``far_cut``); the request's far lines are paid from its answer budget
(``collector.far_share``), and a run within the cap still reads its step.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from probes.logs.parse import parse_log
from probes.remote import collector
from probes.remote.logread import DEEPEN_MAX
from probes.remote.read_back import FAR_MAX
from tests.probes.remote.test_tail_batches_lead import _generator, _trained
from tests.probes.remote.test_tail_far_anchor import _far_save_run

TAIL = 1 << 20


def _dense_run() -> str:
    """16000 batches of a run with no save (the wandb logger: no ``Step N:`` dict either):
    some 38 MiB, its only anchor the log's start, 12000 trained."""
    lines = _generator().run(False, batches=16000, total=40000, ckpt=100000)
    return "\n".join(lines) + "\n"


def _step(log: dict[str, Any]) -> int | None:
    summary = parse_log(log["text"], log_start=log["offset"] == 0)
    return summary.progress.current if summary.progress else None


def _job(key: str, path: Path) -> dict[str, Any]:
    return {"id": key, "stdout": str(path), "workdir": str(path.parent), "offset": 0,
            "checkpoint_roots": [], "trial_roots": []}


def test_a_dense_run_far_from_its_anchor_sends_at_most_its_cap(tmp_path: Path) -> None:
    dense, near = _dense_run(), _far_save_run()
    assert len(dense) > 36 << 20  # its far lines: some 1.3 MB, past the cap
    (tmp_path / "dense.log").write_text(dense)
    (tmp_path / "near.log").write_text(near)
    request = {"tail_bytes": TAIL, "min_lines": 1,
               "jobs": [_job("901", tmp_path / "dense.log"), _job("902", tmp_path / "near.log")]}
    answer = collector.collect(request)
    dense_log, near_log = answer["jobs"]["901"]["log"], answer["jobs"]["902"]["log"]
    assert dense_log["status"] == near_log["status"] == "ok"
    # the answer size bound: its whole read-back (its tail in it) and the far lines' cap
    assert len(dense_log["text"].encode()) <= DEEPEN_MAX + FAR_MAX
    assert "none sent" in dense_log["far_cut"]  # the cut is said, not silent
    assert dense_log["offset"] > 0  # and no lead is claimed from the log's start
    # a run whose far lines fit still reads its step, its answer under the same bound
    assert _step(near_log) == _trained(near) == 9000
    assert len(near_log["text"].encode()) <= TAIL + FAR_MAX
    assert "far_cut" not in near_log


def test_the_far_lines_are_paid_from_the_answer_budget(tmp_path: Path) -> None:
    """Near miss of budget: with half the budget spent no job sends far lines, and says so;
    a budget with room for them reads the step."""
    near = _far_save_run()
    (tmp_path / "near.log").write_text(near)
    budget = 16 << 20
    assert collector.far_share(budget // 2, budget) == 0
    assert collector.far_share(budget, budget) == FAR_MAX
    request = {"tail_bytes": TAIL, "min_lines": 1, "answer_budget": budget,
               "answer_budget_left": budget // 2, "jobs": [_job("903", tmp_path / "near.log")]}
    log = collector.collect(request)["jobs"]["903"]["log"]
    assert "no share of the answer budget" in log["far_cut"]
    assert len(log["text"].encode()) <= TAIL
    log = collector.collect(dict(request, answer_budget_left=budget))["jobs"]["903"]["log"]
    assert _step(log) == 9000
    assert "far_cut" not in log
