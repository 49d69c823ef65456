"""The completion files a COMPLETED job's collector sends are the job's own only when written
since it started (``probes.slurm.assemble.completion_check``): an earlier run's finished
``trainer_state.json`` in a reused output dir must not complete a rerun that stopped short."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from probes.slurm.assemble import completion_check

STARTED = datetime(2026, 12, 5, 9, 0, tzinfo=UTC)


def _source(path: str, current: int, total: int, at: datetime | None) -> dict[str, Any]:
    source: dict[str, Any] = {"path": path, "kind": "trainer_state.json",
                              "current_steps": current, "total_steps": total,
                              "finished": current >= total, "records": 1}
    if at is not None:
        source["mtime"] = at.timestamp()
    return source


@pytest.mark.parametrize(("old_written", "reached"), [
    (STARTED - timedelta(hours=2), (60, False)),      # an earlier run's: dropped
    (STARTED - timedelta(seconds=30), (95, True)),    # within the clocks' skew: the job's
    (STARTED + timedelta(minutes=40), (95, True)),    # written by the run itself
    (None, (95, True)),                               # a recording sent no mtime: kept
])
def test_a_file_written_before_the_job_started_is_not_its_completion(
        old_written: datetime | None, reached: tuple[int, bool]) -> None:
    raw = {"sources": [
        _source("/w/out/trainer_state.json", 95, 95, old_written),
        _source("/w/out/checkpoint-60/trainer_state.json", 60, 95,
                STARTED + timedelta(minutes=30)),
    ]}
    check = completion_check(raw, STARTED)
    assert check is not None and check.reached is not None
    assert (check.reached.current_steps, check.reached.finished) == reached
