"""A cluster name check-config refuses is explained in words, not as a regex.

Found feeding check-config bad values (CONTRACT §1: it "says exactly what is wrong"): a cluster
named ``"b c"`` read 'clusters.0.name: String should match pattern
'^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$'', pydantic's words and the pattern itself.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.cli import main


@pytest.mark.parametrize("name", ["b c", "-alpha", "", "a" * 64, "beta/1", "ümlaut"])
def test_a_bad_cluster_name_is_explained(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    """Exit 2, the line and key, the name, and what a name may hold."""
    path = tmp_path / "jobtables.toml"
    path.write_text(f'[[clusters]]\nname = "{name}"\nkind = "slurm"\nlocal = true\n')
    assert main(["check-config", "--config", str(path)]) == 2
    err = capsys.readouterr().err
    assert f":2: clusters.0.name: {name!r} is no cluster name" in err, err
    assert "pattern" not in err and err.count("\n") == 1, err


@pytest.mark.parametrize("name", ["alpha", "a", "gpu-01.east_2", "A" * 63])
def test_a_good_cluster_name_passes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    path = tmp_path / "jobtables.toml"
    path.write_text(f'[[clusters]]\nname = "{name}"\nkind = "slurm"\nlocal = true\n')
    assert main(["check-config", "--config", str(path)]) == 0, capsys.readouterr().err
