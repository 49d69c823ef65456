"""SFT grid: cells whose scale token comes last (``sft-grid-lr5e6-7b``) are one campaign.

Replayed on the real SLURM (sbatch, read through ``jobtables sweep``): a mixed-scale grid
``sft-grid-lr1e5-1.5b``, ``sft-grid-lr2e5-1.5b`` (1000 steps each, 40% and 65% done) and
``sft-grid-lr5e6-7b`` (4000 steps, 7.5% done, ETA 2h), each with a resume copy pending. The
family was read "up to the first scale token", which for a scale after the hyper-parameter
kept the hyper-parameter in it: every cell a family of its own, the 1.5b cells then joined by
their shared trailing token (``sft-grid-*-1.5b``) and the 7b cell left out, so the rollup's long
pole was a 1.5b cell with 20 minutes left while the 7b cell gated the campaign by two hours
(seed: "in a mixed-scale grid the largest cells gate completion; name the long pole").
"""

from __future__ import annotations

from probes.models import JobState
from tests.report.test_rulebook_grid import _cell, _grids


def test_a_trailing_scale_keeps_the_cells_of_every_scale_in_one_grid() -> None:
    grids = _grids(
        _cell("sft-grid-lr1e5-1.5b", "1", step=400, total=1000, rate=2.0),
        _cell("sft-grid-lr1e5-1.5b", "2", JobState.PENDING),
        _cell("sft-grid-lr2e5-1.5b", "3", step=650, total=1000, rate=2.0),
        _cell("sft-grid-lr2e5-1.5b", "4", JobState.PENDING),
        _cell("sft-grid-lr5e6-7b", "5", step=300, total=4000, rate=2.0),
        _cell("sft-grid-lr5e6-7b", "6", JobState.PENDING),
        _cell("sft-grid-lr1e4-7b", "7", JobState.PENDING),
    )
    assert list(grids) == ["sft-grid"], list(grids)
    grid = grids["sft-grid"]
    assert (grid.running, grid.pending_unique, grid.done) == (3, 1, 0)
    assert grid.long_pole == "sft-grid-lr5e6-7b"


def test_a_trailing_scale_alone_is_still_the_model_family() -> None:
    """``sft-qwen-7b`` / ``sft-qwen-72b``: the scale follows the model, as before."""
    grids = _grids(_cell("sft-qwen-7b", "1"), _cell("sft-qwen-72b", "2"))
    assert list(grids) == ["sft-qwen"]
