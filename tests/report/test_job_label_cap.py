"""A very long job name (SLURM takes names of any length; a hostile one carried a forged
``scontrol`` record of 500 characters) filled 25 lines of the RL table. The Job cell now keeps
the name's start and end within ``LABEL_MAX`` characters; JSON keeps the name whole."""

from __future__ import annotations

import json

from report.layouts import LABEL_MAX, job_label
from report.render import render_json, render_text
from tests.report.factories import report_job, report_of


def test_a_long_name_loses_its_middle_in_the_table_only() -> None:
    name = "rl-grpo-" + "x" * 480 + "-seed7"
    job = report_job(name, "rl", verdict="failed")
    label = job_label(job, None)
    assert label.startswith("rl-grpo-xxx") and label.endswith("-seed7 [FAILED]"), label
    assert len(label) == LABEL_MAX + len(" [FAILED]") and label.count("…") == 1
    report = report_of(job)
    text = render_text(report, {}, width=100)
    assert len(text.splitlines()) < 12, text
    assert json.loads(render_json(report))["jobs"][0]["name"] == name


def test_a_name_within_the_cap_is_left_alone() -> None:
    name = "sft-" + "y" * (LABEL_MAX - 4)
    assert job_label(report_job(name, "sft"), None) == name
