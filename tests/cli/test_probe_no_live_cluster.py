"""`jobtables probe` with no live cluster to read says so, not "name the job's cluster".

Found checking `jobtables probe` against CONTRACT §1 with a config of one recorded cluster
(`kind = "replay"`, a `jobtables record` of the real SLURM): `jobtables probe 28` answered
'name the job's cluster (--cluster NAME or CLUSTER:ID): 0 SLURM and Kubernetes clusters are
configured', advice that cannot help: naming the replay cluster is refused in turn.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.cli import DEMO_RECORDING, main


@pytest.mark.parametrize("extra", ["", '\n[[clusters]]\nname = "off"\nkind = "slurm"\n'
                                       'local = true\nactive = false\n'])
def test_a_probe_with_no_live_cluster_says_what_it_reads(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: str
) -> None:
    """Exit 2, one line naming what the probe reads and what is configured instead."""
    config = tmp_path / "jobtables.toml"
    config.write_text(f'[[clusters]]\nname = "demo"\nkind = "replay"\npath = "{DEMO_RECORDING}"\n'
                      + extra)
    assert main(["probe", "40880", "--config", str(config)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert "no active SLURM or Kubernetes cluster is configured" in err, err
    assert "name the job's cluster" not in err, err
