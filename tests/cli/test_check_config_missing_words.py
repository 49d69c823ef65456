"""A missing key or a wrong count of values is said in the config's words, not pydantic's.

Found feeding check-config bad values (CONTRACT §1: it "says exactly what is wrong, line and
key"): ``reward_range = [0]`` read 'deep_probe.judge.reward_range.1: Field required' (a key
``.1`` the file has not, and no word of a count), ``[0, 1, 2]`` 'Tuple should have at most 2
items after validation, not 3', and a replay cluster without ``path`` 'clusters.0.path: Field
required'.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.cli import main


@pytest.mark.parametrize(("body", "says"), [
    ("[deep_probe.judge]\nreward_range = [0]\n",
     "c.toml:2: deep_probe.judge.reward_range: expected 2 values, got 1"),
    ("[deep_probe.judge]\nreward_range = [0, 1, 2]\n",
     "c.toml:2: deep_probe.judge.reward_range: expected 2 values, got 3"),
    ('[[clusters]]\nname = "r"\nkind = "replay"\n',
     "c.toml:1: clusters.0.path: missing: a replay cluster needs it"),
    ('[[clusters]]\nkind = "replay"\npath = "/x"\n',
     "c.toml:1: clusters.0.name: missing: a replay cluster needs it"),
])
def test_the_mistake_is_said_in_the_configs_words(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
    body: str, says: str,
) -> None:
    """Exit 2, one line: the line, the key as written, what is wrong."""
    monkeypatch.chdir(tmp_path)
    Path("c.toml").write_text(body)
    assert main(["check-config", "--config", "c.toml"]) == 2
    assert capsys.readouterr().err == f"jobtables: {says}\n"
