"""A tail with no metric step at all is read in two passes, not a deepening series of them.

``recent_metrics`` reads metrics from a deepening suffix of the tail, each pass skimming every
marker line before its suffix again. With no step found it deepened four times at a time, so a
tail of 1 MiB holding only lines that look like markers (a job printing ``%|`` over and over,
350,000 lines) took seven passes and about 21 s of CPU; four such jobs of one user ran the real
cluster's ``jobtables sweep`` past its 60 s deadline, and the whole cluster read
``unreachable: sweep timed out after 60s``, every user's jobs gone from the report. With none
seen the next pass is the whole tail; what it reads is the whole-tail pass's, as every pass's.
"""

from __future__ import annotations

from typing import Any

import pytest

from probes.logs import recent
from probes.logs.parse import parse_log
from tests.probes.logs.test_recent import assert_same


@pytest.mark.parametrize("line", ["%|", "x%|", " 10%|#   | 10/100 [00:01<00:09,  9.5it/s]",
                                  "Traceback (most recent call last):"])
def test_a_tail_with_no_step_takes_two_passes(monkeypatch: pytest.MonkeyPatch,
                                              line: str) -> None:
    text = f"{line}\n" * 20_000
    passes: list[int] = []
    real = recent._scan_suffix

    def counting(*args: Any, **kwargs: Any) -> Any:
        passes.append(kwargs["start"])
        return real(*args, **kwargs)

    monkeypatch.setattr(recent, "_scan_suffix", counting)
    parse_log(text)
    assert len(passes) <= 2 and passes[-1] == 0, passes
    monkeypatch.undo()
    assert_same(text)


def test_steps_only_far_back_are_still_the_whole_tails() -> None:
    """Steps printed early, then a long stretch of marker-like lines: the steps kept are the
    whole-tail pass's (the pass that finds none goes to the whole tail, never stops short)."""
    steps = "".join(f"{{'loss': {2 - s / 100:.4g}, 'grad_norm': 0.3, 'learning_rate': 1e-05,"
                    f" 'epoch': {s / 100:.4g}}}\n" for s in range(1, 60))
    text = steps + "%|\n" * 5000
    summary = parse_log(text)
    assert summary.points and summary.points[-1].values["loss"] == pytest.approx(2 - 59 / 100)
    assert_same(text)
