"""`--format json` carries the SFT grid rollup the text shows under the SFT table.

Replayed on the real SLURM (a mixed-scale grid sft-mix-* with resume copies pending and a
LoRA-rank grid): `jobtables sweep --format json` held every cell's row and the `groups` list,
but no rollup: the running / pending-unique / done tally, each running cell's progress % and
ETA and the long pole (seed §SFT: "give a grid-completion rollup each sweep") were in the text
only, so a script reading the JSON had to redo the dedupe the seed warns about.
"""

from __future__ import annotations

import json

import pytest

from bot.cli import main


def test_demo_json_has_the_grid_the_text_shows(capsys: pytest.CaptureFixture[str]) -> None:
    """The demo's grid, as its text title gives it, in a top-level ``grids`` list."""
    assert main(["demo"]) == 0
    text = capsys.readouterr().out
    assert main(["demo", "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    [grid] = data["grids"]
    title = (f"SFT grid {grid['grid']}: running {grid['running']} / pending-unique "
             f"{grid['pending_unique']} / done {grid['done']} · long pole: {grid['long_pole']}")
    assert title in text
    jobs = {j["job_id"]: j for j in data["jobs"]}
    assert grid["cells"], grid
    for cell in grid["cells"]:
        job = jobs[cell["job_id"]]
        assert job["state"] == "RUNNING" and job["name"] == cell["cell"]
        assert cell["progress_pct"] == round(100 * job["step"] / job["total_steps"], 1)
        assert cell["eta_s"] is None or cell["eta_s"] >= 0
