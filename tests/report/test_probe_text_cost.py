"""The deep probe's text names a login-node cost only when something ran there."""

from __future__ import annotations

import pytest

from probes.models import JobFacts, JobState
from report.models import DeepProbe
from report.probe_text import render_probe_text
from tests.report.factories import judge, record


@pytest.mark.parametrize(("elapsed", "cost"), [
    (None, "  cost: 0 files, 0 bytes"),
    (1.25, "  cost: 3 files, 40 bytes, 1.25 s on the login node"),
])
def test_the_cost_line(elapsed: float | None, cost: str) -> None:
    """A probe with no elapsed time (Kubernetes) reads no 'None s on the login node'."""
    detail = judge(JobFacts(record=record("rl-x", "7", JobState.RUNNING)))
    opened = 0 if elapsed is None else 3
    probe = DeepProbe(verdict="NO-KILL", reasons=["nothing to judge"],
                      read={"files_opened": opened, "bytes_read": 40 if opened else 0,
                            "elapsed_s": elapsed})
    detail = detail.model_copy(update={"report": detail.report.model_copy(
        update={"deep_probe": probe})})
    assert cost in render_probe_text(detail).splitlines()
