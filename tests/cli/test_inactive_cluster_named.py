"""``jobtables job CLUSTER:ID`` and ``jobtables probe CLUSTER:ID`` on a cluster the config marks
``active = false`` (CONTRACT §2: "skipped, listed as inactive"): neither reads it, and the
answer says the cluster is inactive.

Found through the CLI: ``probe alpha:5`` on an inactive alpha connected to its login node and
probed it (here, whose port refuses: 'no deep probe verdict: cluster 'alpha' is unreachable'),
and ``job alpha:5`` answered 'no job 5 on cluster 'alpha' in the current report' as if alpha
had been read and the job was not there. Both are exit 2, one line naming the reason. Near
miss: the same id on an active cluster beside it is still found as before (``job 5`` unnamed).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.cli import main

INACTIVE = ('[[clusters]]\nname = "alpha"\nkind = "slurm"\nactive = false\nhost = "127.0.0.1"\n'
            'port = 1\nuser = "mlops"\nknown_hosts = "/etc/jobtables-test/known_hosts"\n'
            'client_keys = ["/etc/jobtables-test/client_ed25519"]\nconnect_timeout_s = 2\n')


@pytest.mark.parametrize("command", ["job", "probe"])
def test_a_named_inactive_cluster_is_not_read(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                              command: str) -> None:
    config = tmp_path / "jobtables.toml"
    config.write_text(INACTIVE)
    code = main([command, "alpha:5", "--config", str(config)])
    out, err = capsys.readouterr()
    assert code == 2 and out == "", out
    assert "cluster 'alpha' is inactive" in err, err
    assert "unreachable" not in err and "in the current report" not in err, err
