"""A job name with a line break (``sbatch -J $'rl-a\\nrl-b'``: SLURM takes any text) is shown
on one line everywhere a reader meets it: it made a Job cell of two lines that read as two jobs,
and broke the bold of a Slack header. The JSON keeps the name as the scheduler has it."""

from __future__ import annotations

import json

from bot.messages import collapse_message, job_end_dm, jobs_messages
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
    assert blocks_text(alert.blocks).startswith(f"*Collapse on `alpha:4242` {SHOWN}*"), \
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
