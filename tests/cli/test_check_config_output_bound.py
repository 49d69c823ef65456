"""check-config says when a cluster's ``max_output_bytes`` is below the floor the transport
keeps (four times ``answer_budget_bytes``, ``probes.slurm.runner.output_limit``): the value
set is not the bound used, and the file said nothing of it (found in review of 182d7f7: a
``max_output_bytes = 1048576`` meant to keep a small bot small ran with a 128 MiB bound)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.cli import main


def _check(tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: str) -> tuple[int, str]:
    path = tmp_path / "jobtables.toml"
    path.write_text(f'[[clusters]]\nname = "alpha"\nkind = "slurm"\nlocal = true\n{extra}')
    code = main(["check-config", "--config", str(path)])
    return code, capsys.readouterr().err


def test_a_bound_below_the_floor_is_warned(capsys: pytest.CaptureFixture[str],
                                           tmp_path: Path) -> None:
    code, err = _check(tmp_path, capsys, "max_output_bytes = 1048576\n")
    assert code == 0
    assert "cluster 'alpha': max_output_bytes = 1048576 is below 4 x answer_budget_bytes" in err
    assert "the bound used is 134217728" in err, err


def test_a_bound_at_the_floor_or_unset_is_quiet(capsys: pytest.CaptureFixture[str],
                                                tmp_path: Path) -> None:
    """Near-misses: the floor itself, and a budget raised past the default bound with no
    bound set (the floor follows the budget, as README says; nothing was set to be ignored)."""
    assert _check(tmp_path, capsys, "max_output_bytes = 134217728\n") == (0, "")
    assert _check(tmp_path, capsys, "answer_budget_bytes = 134217728\n") == (0, "")
