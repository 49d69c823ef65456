"""Rulebook: "In a mixed-scale grid the largest cells gate completion" - also when the scale is
glued to the model name.

Shape from an acceptance dry-run: cells ``sft-grid-qwen7b-lr1e5``, ``sft-grid-qwen7b-lr3e5``,
``sft-grid-qwen32b-lr1e5``, ``sft-grid-qwen32b-lr3e5`` were two rollups (``sft-grid-qwen7b``,
``sft-grid-qwen32b``) and the 7b one named a small cell as its long pole. Cells are judged from
facts through the real report builder (as ``test_rulebook_grid``).
"""

from __future__ import annotations

import pytest

from probes.models import JobFacts, JobState
from report.judge import build_report
from report.models import GridRollup
from report.settings import ReportSettings
from tests.report.factories import NOW, cluster, facts, points, record


def _cell(name: str, job_id: str, *, step: int, total: int, rate: float,
          state: JobState = JobState.RUNNING) -> JobFacts:
    return facts(record(name, job_id, state), points({"loss": [1.0] * step}),
                 summary_kw={"total_steps": total, "sec_per_step": rate})


def _grids(*jobs: JobFacts) -> dict[str, GridRollup]:
    report, _ = build_report([cluster("alpha", jobs)], settings=ReportSettings(), now=NOW)
    return {g.grid: g for g in report.grid}


def test_glued_scale_grid_is_one_campaign_gated_by_its_largest_cells() -> None:
    """Four cells at two glued scales: one rollup, the long pole a 32b cell."""
    grids = _grids(
        _cell("sft-grid-qwen7b-lr1e5", "1", step=400, total=1000, rate=4.0),
        _cell("sft-grid-qwen7b-lr3e5", "2", step=100, total=1000, rate=4.0),  # most steps left
        _cell("sft-grid-qwen32b-lr1e5", "3", step=600, total=1000, rate=30.0),
        _cell("sft-grid-qwen32b-lr3e5", "4", step=500, total=1000, rate=30.0),
    )
    assert list(grids) == ["sft-grid-qwen"]
    grid = grids["sft-grid-qwen"]
    assert grid.running == 4
    assert grid.long_pole == "sft-grid-qwen32b-lr3e5"


@pytest.mark.parametrize(
    ("names", "family"),
    [
        (("sft-grid-qwen7b-lr1e5", "sft-grid-qwen32b-lr1e5"), "sft-grid-qwen"),
        (("sft-llama8b-ep2", "sft-llama70B-ep2"), "sft-llama"),
        (("sft-mixtral8x7b-a", "sft-mixtral8x22b-a"), "sft-mixtral"),
        (("sft-smollm135m-a", "sft-smollm1.7b-a"), "sft-smollm"),
        # a versioned model with the scale apart, and mixed with a glued spelling
        (("sft-llama3-8b-ep2", "sft-llama3-70b-ep2"), "sft-llama3"),
        (("sft-qwen2.5-32b-a", "sft-qwen2.5-7b-a"), "sft-qwen2.5"),
    ],
)
def test_scale_glued_to_the_model_name_is_the_scale(names: tuple[str, ...],
                                                    family: str) -> None:
    grids = _grids(*(_cell(n, str(i), step=10, total=100, rate=5.0)
                     for i, n in enumerate(names)))
    assert list(grids) == [family]
    assert grids[family].running == len(names)


def test_glued_scales_do_not_merge_unrelated_runs() -> None:
    """Different models stay apart; a sequence length (``seq32k``) is no model scale; one
    cell per family is no grid."""
    grids = _grids(
        _cell("sft-grid-qwen7b-lr1e5", "1", step=10, total=100, rate=5.0),
        _cell("sft-grid-qwen32b-lr1e5", "2", step=10, total=100, rate=5.0),
        _cell("sft-grid-llama8b-lr1e5", "3", step=10, total=100, rate=5.0),
        _cell("sft-grid-llama70b-lr1e5", "4", step=10, total=100, rate=5.0),
        _cell("sft-seq32k-gradexp", "5", step=10, total=100, rate=5.0),
        _cell("sft-seq8k-nanloss", "6", step=10, total=100, rate=5.0),
        _cell("sft-gemma2b-gradexp", "7", step=10, total=100, rate=5.0),
    )
    assert sorted(grids) == ["sft-grid-llama", "sft-grid-qwen"]
    assert grids["sft-grid-llama"].running == 2 and grids["sft-grid-qwen"].running == 2
