"""A verified run whose finished trials all never started (a sandbox outage) keeps Harbor's
Mean (review of 50191b1). "No verifier" was inferred from "no trial scored yet", so such a
run showed Mean — where Harbor prints 0.000, hiding the outage in that cell. No verifier is
a trial whose agent ran and still went unscored."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from tests.report.factories import judge
from tests.report.test_harbor_dryrun_datagen import MAKE, _facts


def test_an_outage_keeps_harbors_zero_mean(tmp_path: Path) -> None:
    jobs = tmp_path / "jobs"
    out = MAKE.write(jobs / "2026-12-04__01-00-00", {"never": 12, "inflight": 6}, total=400,
                     seed=9)
    line = MAKE.progress_line(out["done"], out["total"], out["mean"])
    assert "12/400 Mean: 0.000" in line
    report = judge(_facts(jobs, f"engine up\n{line}\n", "datagen-tb-synth"),
                   now=datetime.now(UTC)).report
    assert report.metrics.get("mean_reward") == 0.0, report.metrics
