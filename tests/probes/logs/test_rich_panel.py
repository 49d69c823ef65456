"""open-instruct's GRPO step metrics: a rich ``Metrics`` panel, wrapped to the console's width.

``open_instruct/grpo_fast.py`` prints each training step's scalars with
``print_rich_single_line_metrics`` (``open_instruct/model_utils.py``): the names grouped by
their first ``/`` part (``other`` for plain names), one table row a group, ``name: value``
pairs joined by `` | `` (floats ``.2f``, ``.2e`` below 1e-5), in a ``Panel(title="Metrics")``.
Outside a terminal (a SLURM job's ``--output``) rich renders 80 columns wide, so a group's pairs
wrap onto more lines, a value sometimes on the line after its name::

    ╭──────────────────────────────── Metrics ─────────────────────────────────╮
    │  loss       kl_avg: 0.00e+00 | policy_avg: -0.01 | total_avg: -0.01        │
    │  other      episode: 1536 | global_step: 1536 | training_step: 3 | epoch:  │
    │             0.03 | learner_tokens_per_second_overall: 5234.12 |            │
    ╰────────────────────────────────────────────────────────────────────────────╯

The panel is rendered here by rich itself (a dependency), as the job would print it; its step is
``training_step`` (from 1), its reward ``scores``, its entropy ``policy/entropy_avg``.
"""

from __future__ import annotations

import io
from collections import defaultdict
from datetime import UTC, datetime

import pytest
from rich.console import Console
from rich.panel import Panel
from rich.table import Table

from probes.logs.parse import parse_log
from probes.models import LogSummary
from tests.probes.logs.pieces import fold_in_pieces

MTIME = datetime(2026, 12, 5, 4, 0, tzinfo=UTC)


def _shown(value: float | int) -> str:
    if isinstance(value, float):
        return f"{value:.2e}" if abs(value) < 1e-5 else f"{value:.2f}"
    return str(value)


def panel(metrics: dict[str, float | int], width: int = 80) -> str:
    """The panel as open-instruct's helper prints it to a console ``width`` wide."""
    rows: dict[str, list[str]] = defaultdict(list)
    for key, value in metrics.items():
        group, _, name = key.partition("/") if "/" in key else ("other", "", key)
        rows[group].append(f"{name}: {_shown(value)}")
    table = Table(show_header=False, box=None)
    table.add_column("Category")
    table.add_column("Values")
    for group in sorted(rows):
        table.add_row(group, " | ".join(rows[group]))
    out = io.StringIO()
    Console(file=out, width=width, force_terminal=False).print(
        Panel(table, title="Metrics", expand=False))
    return out.getvalue()


def step_metrics(step: int) -> dict[str, float | int]:
    return {"episode": step * 512, "global_step": step * 512, "training_step": step,
            "val/num_total_tokens": step * 1_400_000, "epoch": step * 512 / 8 / 7473,
            "learner_tokens_per_second_overall": 5234.12, "time/total": 265.3,
            "scores": 0.41 + step / 1000, "real_batch_size_ratio": 1.0,
            "val/sequence_lengths": 812.4, "val/stop_rate": 0.97,
            "objective/verifiable_reward": 4.1, "objective/kl0_avg": 0.0012,
            "loss/kl_avg": 0.0, "loss/policy_avg": -0.0123, "policy/clipfrac_avg": 0.0021,
            "policy/entropy_avg": 0.5123 - step / 1000, "val/ratio_var": 2.1e-06,
            "optim/grad_norm": 0.1834, "lr": 1e-06}


def open_instruct_log(steps: int, width: int = 80) -> str:
    head = ("2026-12-05 03:10:00 - INFO - open_instruct.grpo_fast - ======== ✅ all models "
            "initialized =========\n")
    body = []
    for step in range(1, steps + 1):
        body.append(panel(step_metrics(step), width))
        if step % 10 == 0:
            body.append(f"2026-12-05 03:{10 + step // 4:02d}:00 - INFO - open_instruct.grpo_fast"
                        f" - Saving model at step {step} to output/grpo_checkpoints/step_{step}\n")
    return head + "".join(body)


def _folded(text: str) -> LogSummary:
    return fold_in_pieces(text, 5, mtime=MTIME)


READS = [pytest.param(lambda t: parse_log(t, mtime=MTIME), id="cold"),
         pytest.param(_folded, id="folded")]


@pytest.mark.parametrize("read", READS)
@pytest.mark.parametrize("width", [80, 200])
def test_open_instruct_panels(read, width: int) -> None:
    summary = read(open_instruct_log(30, width))
    last = summary.points[-1]
    assert last.step == 30
    values = last.values
    assert values["reward"] == pytest.approx(0.44)  # scores, as printed (.2f)
    assert values["entropy"] == pytest.approx(0.48)
    assert values["policy_loss"] == pytest.approx(-0.01)
    assert values["grad_norm"] == pytest.approx(0.18)
    assert values["learning_rate"] == pytest.approx(1e-06)
    assert values["avg_num_tokens"] == pytest.approx(812.4)
    assert values["sec_per_step"] == pytest.approx(265.3)  # time/total: the step's time
    assert [p.step for p in summary.points[-5:]] == [26, 27, 28, 29, 30]
    assert 30 in summary.checkpoint_steps


@pytest.mark.parametrize("read", READS)
def test_a_panel_cut_at_the_end_is_no_point_yet(read) -> None:
    text = open_instruct_log(5)
    cut = text[: text.rindex("╰")]
    assert read(cut).points[-1].step == 4
