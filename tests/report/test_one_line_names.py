"""A job name with a line break (``sbatch -J $'rl-a\\nrl-b'``: SLURM takes any text) is shown
on one line everywhere a reader meets it: it made a Job cell of two lines that read as two jobs,
and broke the bold of a Slack header. The JSON keeps the name as the scheduler has it."""

from __future__ import annotations

import json

from bot.alert_messages import collapse_message, job_end_dm
from bot.messages import jobs_messages
from probes.models import JobState
from report.cells import NEWLINE_MARK, one_line
from report.changes import change_of, merged_lines, snapshot
from report.models import JobDetail
from report.render import render_tables
from tests.bot.builders import blocks_text, collapsing, detail, job, sweep_result

HOSTILE = "rl-a\nrl-b\r\nc\rd"
SHOWN = f"rl-a{NEWLINE_MARK}rl-b{NEWLINE_MARK}c{NEWLINE_MARK}d"


def test_one_line_marks_every_kind_of_line_break() -> None:
    assert one_line(HOSTILE) == SHOWN
    assert one_line("rl-grpo-qwen-7b") == "rl-grpo-qwen-7b"


def _hostile_collapse() -> JobDetail:
    sick = collapsing()
    return sick.model_copy(update={"report": sick.report.model_copy(update={"name": HOSTILE})})


def test_the_job_cell_is_one_line_and_the_json_keeps_the_name() -> None:
    result = sweep_result([_hostile_collapse(), detail(job("4100", "rl-ppo-llama-8b"))])
    text = "\n".join(t.text for t in render_tables(result.report, result.details))
    rows = [line for line in text.splitlines() if "rl-" in line]
    # one table line per job, the whole name on it: nothing wraps onto a line of its own
    assert len(rows) == 2, text
    assert any(SHOWN in row for row in rows), text
    assert json.loads(result.report.model_dump_json())["jobs"][0]["name"] == HOSTILE


def test_slack_headers_and_change_lines_are_one_line() -> None:
    sick = _hostile_collapse()
    alert = collapse_message(sick, can_cancel=True)
    assert blocks_text(alert.blocks).startswith(f"*Collapse on* `alpha:4242` *{SHOWN}*"), \
        blocks_text(alert.blocks)
    assert "\n" not in alert.text and SHOWN in alert.text
    running = snapshot(sick.report)
    failed = change_of(running, sick.report.model_copy(
        update={"state": JobState.FAILED, "verdict": "failed"}))
    assert failed is not None and failed.kind == "failed" and failed.name == SHOWN
    (line,) = merged_lines([failed])
    assert SHOWN in line and "\n" not in line
    dm = job_end_dm(failed, sick, 1)
    assert dm.text.split("\n")[0].startswith(f"❌ *{SHOWN}* `alpha:4242`"), dm.text
    listed = "\n".join(blocks_text(m.blocks) for m in jobs_messages(
        sweep_result([sick]), bucket=None, age_s=None, width=100))
    assert SHOWN in listed and "\nrl-b" not in listed


def test_the_sweep_parents_bucket_line_names_the_job_on_one_line() -> None:
    """Replayed on the real SLURM (``sbatch -J $'rl-grpo-…-jt\\n<!here> *bold*'``, collapsing):
    the day's parent message named it in its RL summary line with the line break kept, so the
    line went on as a second summary line, ``<!here> *bold* …``."""
    from bot.messages import sweep_parent
    from tests.bot.builders import T0

    result = sweep_result([_hostile_collapse(), detail(job("4100", "rl-ppo-llama-8b"))])
    parent = sweep_parent(result, period_start=T0, now=T0, period_hours=24, sweeps=1)
    rl = [line for line in parent.text.splitlines() if line.startswith("RL:")]
    assert len(rl) == 1 and SHOWN in rl[0], parent.text
    assert not any(line.startswith(("rl-b", "c", "d")) for line in parent.text.splitlines())


def test_the_sft_grid_rollup_shows_names_as_the_sft_table_does() -> None:
    """Replayed on the real SLURM (two cells ``sbatch -J $'sft-hos-nl\\nx-lr1'``, ``...-lr2``):
    the SFT table read ``sft-hos-nl␤x-lr1`` but the grid rollup under it broke each Cell over
    two lines (``sft-hos-nl`` / ``x-lr1``: four rows to a reader for two cells) and its title
    read the grid and the long pole with a space for the break."""
    from report.models import GridCell, GridRollup
    from report.tables import render_grid

    grid = GridRollup(
        grid="sft-hos-nl\nx", running=2, pending_unique=1, done=0,
        cells=[GridCell(cell=f"sft-hos-nl\nx-lr{n}", job_id=str(1576 + n), progress_pct=4.0,
                        eta_s=960.0) for n in (1, 2)],
        short=("sft-hos-nl\r\nx-lr0",), long_pole="sft-hos-nl\nx-lr1")
    drawn = render_grid(grid, width=100)
    rows = [line for line in drawn.text.splitlines()
            if line.startswith("│ ") and "Cell" not in line]
    assert len(rows) == 2, drawn.text
    for n, row in enumerate(rows, start=1):
        assert f"sft-hos-nl{NEWLINE_MARK}x-lr{n}" in row, drawn.text
    assert "\n" not in drawn.title and "\r" not in drawn.title, drawn.title
    assert drawn.title.startswith(f"SFT grid sft-hos-nl{NEWLINE_MARK}x: running 2"), drawn.title
    assert f"stopped short 1: sft-hos-nl{NEWLINE_MARK}x-lr0" in drawn.title, drawn.title
    assert drawn.title.endswith(f"long pole: sft-hos-nl{NEWLINE_MARK}x-lr1"), drawn.title
