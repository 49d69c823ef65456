"""The seed's Eval section: "A burst of timeouts in the last window is usually the hard-trial
tail of a nearly-done run." A nearly-done eval whose latest trials are mostly agent timeouts
(the hard tasks finish last, at their timeout) read only "healthy" (or the run-wide timeout
note), so its falling pass-rate was left unexplained. Trees in Harbor's on-disk format
(``tests/fixtures/harbor-dryrun/make_tree.py``), read by the real collector and judged."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.report.factories import judge
from tests.report.test_harbor_dryrun_datagen import MAKE, _facts

_LOG = ("2026-12-04 00:00:01 INFO cloudflared: Registered tunnel connection connIndex=0\n"
        "Sandbox agent config: api_base=https://eval-engine.example.org/v1\n")


@pytest.mark.parametrize(("total", "in_order", "tail"), [
    (300, True, True),     # 285/300 done, the 15 timeouts last: the hard-trial tail
    (300, False, False),   # the same trials, timeouts spread over the run: no burst
    (900, True, False),    # a burst, but a third of the run to go: not the tail
])
def test_a_timeout_burst_at_the_end_of_a_nearly_done_eval_is_its_hard_tail(
        tmp_path: Path, total: int, in_order: bool, tail: bool) -> None:
    jobs = tmp_path / "jobs"
    MAKE.write(jobs / "2026-12-04__00-00-00", {"pass": 100, "fail": 170, "timeout": 15},
               total=total, seed=3, shuffle=not in_order)
    report = judge(_facts(jobs, _LOG, "eval-qwen3-x-tbench"), now=datetime.now(UTC)).report
    assert report.verdict == "healthy", report.trend
    assert ("hard-trial tail" in report.trend) is tail, report.trend
    if tail:
        assert "285/300" in report.trend
    assert not report.flags
