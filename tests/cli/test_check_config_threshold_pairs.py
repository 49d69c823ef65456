"""check-config refuses ``[thresholds]`` pairs that switch a rule off or on for good.

CONTRACT §5: "a windowed test needs at least 5 of them [the window's 10 values]" and every
number is configurable. ``window = 10`` with ``min_window = 20`` (or ``window = 3`` beside the
default 5) passed check-config ('OK'), and a live sweep of a real SkyRL collapse run under it
lost the entropy signal and the collapse (verdict warning): no window could ever hold enough
values, so every windowed test was off, silently. ``imp_ratio_low = 2.0`` above
``imp_ratio_high = 1.0`` passed too: every ratio is then out of range.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.cli import DEMO_RECORDING, main

ONE = f'[[clusters]]\nname = "alpha"\nkind = "replay"\npath = "{DEMO_RECORDING}"\n\n'


def check(tmp_path: Path, capsys: pytest.CaptureFixture[str], body: str) -> tuple[int, str]:
    path = tmp_path / "jobtables.toml"
    path.write_text(ONE + body)
    code = main(["check-config", "--config", str(path)])
    return code, capsys.readouterr().err


@pytest.mark.parametrize(("body", "says"), [
    ("[thresholds]\nwindow = 10\nmin_window = 20\n",
     "min_window 20 is more than window 10"),
    ("[thresholds]\nwindow = 3\n", "min_window 5 is more than window 3"),
    ("[thresholds]\nimp_ratio_low = 2.0\nimp_ratio_high = 1.0\n",
     "imp_ratio_low 2 is above imp_ratio_high 1"),
])
def test_a_pair_no_value_can_pass_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], body: str, says: str
) -> None:
    """Exit 2, one line naming the table's line and both keys."""
    code, err = check(tmp_path, capsys, body)
    assert code == 2, err
    assert err.count("\n") == 1 and ":6: thresholds: " in err and says in err, err


@pytest.mark.parametrize("body", [
    "[thresholds]\nwindow = 5\nmin_window = 5\n",
    "[thresholds]\nwindow = 20\n",
    "[thresholds]\nimp_ratio_low = 1.0\nimp_ratio_high = 1.0\n",
])
def test_a_pair_that_can_still_fire_passes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], body: str
) -> None:
    """The near misses: a window just holding min_window, an equal range."""
    code, err = check(tmp_path, capsys, body)
    assert code == 0, err
