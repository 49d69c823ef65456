"""check-config on owners: per-cluster tables, Slack ids that are not user ids, the global form."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from bot.cli import DEMO_RECORDING, main


def write(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "jobtables.toml"
    path.write_text(textwrap.dedent(body).replace("REC", str(DEMO_RECORDING)))
    return path


TWO = """\
    [[clusters]]
    name = "alpha"
    kind = "replay"
    path = "REC"
    owners = { alice = "U0AAAAAAAAA" }

    [[clusters]]
    name = "beta"
    kind = "replay"
    path = "REC"
    owners = { alice = "U0BBBBBBBBB" }
"""


def test_per_cluster_owners_are_accepted_without_warning(
    capsys: pytest.CaptureFixture[str], tmp_path: Path,
) -> None:
    """Owners inside each [[clusters]] entry: OK, and nothing to warn about."""
    assert main(["check-config", "--config", str(write(tmp_path, TWO))]) == 0
    out, err = capsys.readouterr()
    assert "OK (2 clusters, 2 active)" in out and err == ""


def test_global_owners_with_two_clusters_warn(
    capsys: pytest.CaptureFixture[str], tmp_path: Path,
) -> None:
    """[slack.owners] with more than one cluster passes, with a warning naming the fix."""
    path = write(tmp_path, TWO + '\n    [slack.owners]\n    bob = "U0CCCCCCCCC"\n')
    assert main(["check-config", "--config", str(path)]) == 0
    out, err = capsys.readouterr()
    assert "OK" in out
    assert "warning" in err and "[slack.owners]" in err and "owners" in err
    assert "2 clusters are configured" in err


@pytest.mark.parametrize(("snippet", "where"), [
    ('[slack]\n    operators = ["C0123456789"]', "slack.operators"),
    ('[slack.owners]\n    alice = "#ops"', "slack.owners: alice = '#ops'"),
    ('[slack.owners]\n    alice = "T0TEAM"', "slack.owners: alice = 'T0TEAM'"),
])
def test_slack_ids_that_are_not_user_ids_are_rejected(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, snippet: str, where: str,
) -> None:
    """A channel, team or free-text where a user id belongs: exit 2, the key named."""
    path = write(tmp_path, TWO + "\n    " + snippet + "\n")
    assert main(["check-config", "--config", str(path)]) == 2
    _, err = capsys.readouterr()
    assert where in err and "not a Slack user id" in err
    assert err.count("\n") == 1


def test_cluster_owner_that_is_a_channel_is_rejected_with_its_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path,
) -> None:
    """owners = { alice = "C0CHANNEL" } in a [[clusters]] entry names that entry's line."""
    path = write(tmp_path, TWO.replace('"U0BBBBBBBBB"', '"C0CHANNEL1"'))
    assert main(["check-config", "--config", str(path)]) == 2
    _, err = capsys.readouterr()
    assert ":11: clusters.1.owners.alice: 'C0CHANNEL1' is not a Slack user id" in err
