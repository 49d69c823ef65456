"""Rulebook: SFT grids are campaigns (one rollup across scales, long pole by ETA, deduped pending).

Cells are judged from facts: the HF Trainer 5.24 log (real library, ``sft_healthy.out``) cut at
a step for "a cell running on that log", and factory histories where a cell needs its own rate.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from probes.logs.parse import parse_log
from probes.models import JobFacts, JobState, MetricPoint, ProgressBar
from report.judge import build_report
from report.layouts import grid_title
from report.models import GridRollup
from report.settings import ReportSettings
from tests.report.factories import NOW, cluster, facts, log, points, record, summary

SFT = (Path(__file__).resolve().parents[1] / "fixtures" / "hf-transformers-5.24.0"
       / "sft_healthy.out").read_text()


def _cut_at_step(text: str, step: int) -> str:
    at = 0
    for _ in range(step):
        at = text.index("{'loss'", at) + 1
    return text[: text.index("\n", at) + 1]


def _hf_cell(name: str, job_id: str, step: int) -> JobFacts:
    """A cell whose log is the real HF run as it stood at ``step`` (of 95)."""
    text = _cut_at_step(SFT, step)
    return JobFacts(record=record(name, job_id), log=log(text=text), summary=parse_log(text))


def _cell(name: str, job_id: str, state: JobState = JobState.RUNNING, *, step: int = 10,
          total: int = 1000, rate: float | None = 10.0) -> JobFacts:
    return facts(record(name, job_id, state), points({"loss": [1.0] * step}),
                 summary_kw={"total_steps": total, "sec_per_step": rate})


def _grids(*jobs: JobFacts) -> dict[str, GridRollup]:
    report, _ = build_report([cluster("alpha", jobs)], settings=ReportSettings(), now=NOW)
    return {g.grid: g for g in report.grid}


@pytest.mark.parametrize(
    ("names", "family"),
    [
        (("sft-qwen3-0.6b-lr1e5", "sft-qwen3-8b-lr1e5", "sft-qwen3-32B-lr2e5"), "sft-qwen3"),
        (("sft-qwen-7b", "sft-qwen-72b"), "sft-qwen"),
        (("sft-mix-8x7b-ep2", "sft-mix-1.5b-ep2"), "sft-mix"),
        (("sft-grid-lr1e5", "sft-grid-lr3e5"), "sft-grid"),
        # a restart suffix is no new cell, and does not break the family
        (("sft-qwen3-8b-lr1e5-r2", "sft-qwen3-32b-lr1e5"), "sft-qwen3"),
    ],
)
def test_cells_at_different_scales_are_one_campaign(names: tuple[str, ...], family: str) -> None:
    """One rollup per naming family, whatever the scales of its cells."""
    grids = _grids(*(_hf_cell(n, str(i), 40) for i, n in enumerate(names)))
    assert list(grids) == [family]
    assert grids[family].running == len(names)


def test_different_families_stay_apart() -> None:
    """qwen and llama cells at the same scales are two campaigns."""
    grids = _grids(_hf_cell("sft-qwen-7b-a", "1", 30), _hf_cell("sft-qwen-72b-a", "2", 30),
                   _hf_cell("sft-llama-8b-a", "3", 30), _hf_cell("sft-llama-70b-a", "4", 30))
    assert sorted(grids) == ["sft-llama", "sft-qwen"]


def test_unrelated_runs_sharing_only_the_bucket_word_are_no_grid() -> None:
    """``sft-gradexp``, ``sft-nanloss``, ``sft-ok``: separate runs whose names share only
    ``sft``; no rollup and each keeps its own row (they were one grid named ``sft``, and in
    the Filling-buffer table one row stood for all of them)."""
    names = ("sft-gradexp", "sft-nanloss", "sft-ok", "sft-childfailed", "sft-8b-gradexp",
             "sft-70b-nanloss")
    jobs = [_hf_cell(n, str(i), 40) for i, n in enumerate(names)]
    assert _grids(*jobs) == {}
    pending = [_cell(n, str(10 + i), JobState.PENDING) for i, n in enumerate(names)]
    assert _grids(*jobs, *pending) == {}


@pytest.mark.parametrize(
    ("cells", "pole"),
    [
        # the small cell has 900 steps left at 2 s (30 min); the big one 200 at 60 s (3 h 20)
        ((("sft-q-0.5b-x", 100, 1000, 2.0), ("sft-q-72b-x", 800, 1000, 60.0)), "sft-q-72b-x"),
        # the same remaining steps: the slower cell gates the campaign
        ((("sft-q-7b-x", 500, 1000, 5.0), ("sft-q-14b-x", 500, 1000, 9.0)), "sft-q-14b-x"),
        # most steps left and also slowest
        ((("sft-q-7b-x", 900, 1000, 5.0), ("sft-q-14b-x", 10, 1000, 9.0)), "sft-q-14b-x"),
    ],
)
def test_long_pole_is_the_longest_eta(cells: tuple[tuple[str, int, int, float], ...],
                                      pole: str) -> None:
    """The long pole is the cell that finishes last, not the one with the most steps left."""
    jobs = [_cell(n, str(i), step=s, total=t, rate=r) for i, (n, s, t, r) in enumerate(cells)]
    [grid] = _grids(*jobs).values()
    assert grid.long_pole == pole
    etas = {c.cell: c.eta_s for c in grid.cells}
    assert max(etas, key=lambda c: etas[c] or 0) == pole


def test_eta_uses_the_trailing_window_not_one_tailed_step() -> None:
    """A checkpoint-save spike on the last step (and a tailed 600 s/it) does not set the ETA."""
    wall = [NOW - timedelta(seconds=10 * (20 - i)) for i in range(20)] + [NOW + timedelta(
        seconds=590)]
    history = tuple(MetricPoint(step=i + 1, values={"loss": 1.0}, wall_time=w)
                    for i, w in enumerate(wall))
    spiky = JobFacts(record=record("sft-q-7b-x", "1"), log=log(), summary=summary(
        history, sec_per_step=None, total_steps=1021,
        progress=ProgressBar(current=21, total=1021, sec_per_it=600.0)))
    other = _cell("sft-q-72b-x", "2", step=10, total=20, rate=10.0)
    [grid] = _grids(spiky, other).values()
    cells = {c.cell: c for c in grid.cells}
    assert cells["sft-q-7b-x"].eta_s == pytest.approx(1000 * 10.0)
    assert grid.long_pole == "sft-q-7b-x"


def test_pending_dedupe_works_across_scales() -> None:
    """Resume copies of running cells and chain copies of pending cells count once."""
    grids = _grids(
        _cell("sft-qwen3-8b-lr1e5", "1"),
        _cell("sft-qwen3-8b-lr1e5-r2", "2", JobState.PENDING),  # resume backup of a running cell
        _cell("sft-qwen3-32b-lr1e5", "3", JobState.PENDING),
        _cell("sft-qwen3-32b-lr1e5_resume", "4", JobState.PENDING),  # its chain copy
        _cell("sft-qwen3-32b-lr1e5", "5", JobState.PENDING),  # and another
        _cell("sft-qwen3-0.6b-lr1e5", "6", JobState.PENDING),
        _cell("sft-qwen3-1.7b-lr1e5", "7", JobState.COMPLETED, step=1000),  # run to its total
        _cell("sft-qwen3-1.7b-lr1e5.2", "8", JobState.COMPLETED, step=1000),
    )
    grid = grids["sft-qwen3"]
    assert (grid.running, grid.pending_unique, grid.done) == (1, 2, 1)


def test_cells_varying_before_a_common_suffix_are_one_grid() -> None:
    """A grid whose cells carry a run tag after the hyper-parameter (``sft-grid8-lr1e5-a4``,
    replayed on the real SLURM with resume copies pending) got no rollup at all: dropping the
    last token left each cell a family of its own. Now one grid ``sft-grid8-*-a4``: running
    cells, pending cells deduped (resume copies of a running cell are not pending cells),
    the long pole; its pending cells fold into one Filling-buffer row as any grid's."""
    grids = _grids(
        _cell("sft-grid8-lr1e5-a4", "1", step=10, rate=30.0),
        _cell("sft-grid8-lr1e5-a4", "2", JobState.PENDING),  # its resume copies
        _cell("sft-grid8-lr1e5-a4", "3", JobState.PENDING),
        _cell("sft-grid8-lr3e5-a4", "4", step=500, rate=5.0),
        _cell("sft-grid8-lr1e4-a4", "5", JobState.PENDING),
        _cell("sft-grid8-lr1e4-a4", "6", JobState.PENDING),
        _cell("sft-grid8-lr2e4-a4", "7", JobState.PENDING),
    )
    assert list(grids) == ["sft-grid8-*-a4"]
    grid = grids["sft-grid8-*-a4"]
    assert (grid.running, grid.pending_unique, grid.done) == (2, 2, 0)
    assert grid.long_pole == "sft-grid8-lr1e5-a4"


def test_a_shared_suffix_alone_makes_no_grid() -> None:
    """Near-misses: runs that share only ``sft`` and a tag (``sft-qwen-a4``, ``sft-crash-a4``),
    or differ in two tokens, are no campaign."""
    assert _grids(_cell("sft-qwen-a4", "1"), _cell("sft-crash-a4", "2"),
                  _cell("sft-crash-a4", "3", JobState.PENDING)) == {}
    assert _grids(_cell("sft-grid-lr1e5-ep1-a4", "1"), _cell("sft-grid-lr3e5-ep2-a4", "2")) == {}


def test_a_pending_larger_cell_is_the_long_pole() -> None:
    """72b cells still pending while 7b cells run: the 72b cell gates the campaign (seed: "the
    largest cells gate completion"); the pole named a running 7b cell (an SFT dry-run)."""
    jobs = [_cell("sft-q-7b-lr1", "1", step=100, total=1000, rate=5.0),
            _cell("sft-q-7b-lr2", "2", step=200, total=1000, rate=5.0),
            _cell("sft-q-72b-lr1", "3", JobState.PENDING),
            _cell("sft-q-0.5b-lr1", "4", JobState.PENDING)]
    [grid] = _grids(*jobs).values()
    assert grid.long_pole == "sft-q-72b-lr1 (pending)"


def test_a_pending_smaller_cell_leaves_the_pole_to_the_eta() -> None:
    jobs = [_cell("sft-q-72b-lr1", "1", step=100, total=1000, rate=30.0),
            _cell("sft-q-7b-lr1", "2", step=100, total=1000, rate=5.0),
            _cell("sft-q-7b-lr2", "3", JobState.PENDING)]
    [grid] = _grids(*jobs).values()
    assert grid.long_pole == "sft-q-72b-lr1"


def test_a_sequence_length_token_is_not_the_scale() -> None:
    """'8k' before the model's scale is a context length: the pending q72b cell still outscales
    the running q7b ones (model_scale read 8k for every cell, so the pole was a running 7b)."""
    jobs = [_cell("sft-8k-q7b-lr1", "1", step=100, total=1000, rate=5.0),
            _cell("sft-8k-q7b-lr2", "2", step=200, total=1000, rate=5.0),
            _cell("sft-8k-q72b-lr1", "3", JobState.PENDING)]
    [grid] = _grids(*jobs).values()
    assert grid.long_pole == "sft-8k-q72b-lr1 (pending)"


def test_a_cell_completed_short_of_its_total_is_not_done() -> None:
    """A COMPLETED cell whose trainer_log.jsonl stops at 640/916 (incomplete-run) is no done
    cell: an SFT dry-run's grid read 'done 2' with one of the two stopped short. The tally
    names it apart, so the campaign is not read as further along than it is."""
    from probes.models import CompletionCheck, CompletionFile

    short = CompletionCheck(files=(CompletionFile(
        path="/w/out/trainer_log.jsonl", kind="trainer_log.jsonl", current_steps=640,
        total_steps=916),))
    full = CompletionCheck(files=(CompletionFile(
        path="/w/out/trainer_log.jsonl", kind="trainer_log.jsonl", current_steps=916,
        total_steps=916, finished=True),))
    stopped = _cell("sft-g-7b-lr1e4", "3", JobState.COMPLETED, step=640, total=916)
    finished = _cell("sft-g-0.5b-lr1e5", "4", JobState.COMPLETED, step=916, total=916)
    jobs = [_cell("sft-g-7b-lr1e5", "1", step=100, total=916, rate=2.0),
            stopped.model_copy(update={"completion": short}),
            finished.model_copy(update={"completion": full})]
    [grid] = _grids(*jobs).values()
    assert (grid.running, grid.pending_unique, grid.done) == (1, 0, 1)
    assert grid.short == ("sft-g-7b-lr1e4",)
    assert grid_title(grid) == ("SFT grid sft-g: running 1 / pending-unique 0 / done 1 · "
                                "stopped short 1: sft-g-7b-lr1e4 · long pole: sft-g-7b-lr1e5")
