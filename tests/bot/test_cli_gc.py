"""A one-shot command runs with a sparse young-generation collector, restored after."""

from __future__ import annotations

import gc

import pytest

from bot.cli import YOUNG_GC_THRESHOLD, _one_shot_gc, main


def test_thresholds_hold_inside_and_are_restored_after_an_error() -> None:
    before = gc.get_threshold()
    with pytest.raises(RuntimeError), _one_shot_gc():
        assert gc.get_threshold() == (YOUNG_GC_THRESHOLD, *before[1:])
        assert gc.isenabled()  # cycles are still collected, only less often
        raise RuntimeError
    assert gc.get_threshold() == before


def test_demo_in_process_leaves_the_collector_as_it_was(capsys: pytest.CaptureFixture[str]) -> None:
    before = gc.get_threshold()
    assert main(["demo"]) == 0
    assert capsys.readouterr().out.strip()
    assert gc.get_threshold() == before
