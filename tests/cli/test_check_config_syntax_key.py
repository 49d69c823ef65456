"""A TOML syntax error is named as every other config mistake is: file, line and key.

CONTRACT §1: check-config "says exactly what is wrong, line and key". A value TOML cannot
read said only tomllib's words, the file and no key: ``active = yes`` (a bare word for a
boolean) read 'c.toml: Invalid value (at line 4, column 10)', a key written twice 'c.toml:
Cannot overwrite a value (at line 5, column 15)', where a wrong type reads 'c.toml:4:
clusters.0.active: Input should be a valid boolean'.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.cli import main

HEAD = '[[clusters]]\nname = "a"\nkind = "slurm"\n'


@pytest.mark.parametrize(("body", "says"), [
    (HEAD + "active = yes\nlocal = true\n",
     "c.toml:4: clusters.0.active: Invalid value (column 10)"),
    (HEAD + 'local = true\nkind = "slurm"\n',
     "c.toml:5: clusters.0.kind: Cannot overwrite a value (column 15)"),
    (HEAD + 'local = true\n\n[[clusters]]\nname = "b"\nkind = "replay"\npath = /x\n',
     "c.toml:9: clusters.1.path: Invalid value (column 8)"),
    (HEAD + 'local = true\n\n[slack]\nowners.alice = U0AAAAAAAAA\n',
     "c.toml:7: slack.owners.alice: Invalid value (column 16)"),
    (HEAD + 'local = true\nusers = ["a" "b"]\n',
     "c.toml:5: clusters.0.users: Unclosed array (column 14)"),
])
def test_a_syntax_error_names_its_line_and_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
    body: str, says: str,
) -> None:
    """Exit 2, one line: ``file:LINE: dotted.key: tomllib's reason (column N)``."""
    monkeypatch.chdir(tmp_path)
    Path("c.toml").write_text(body)
    assert main(["check-config", "--config", "c.toml"]) == 2
    assert capsys.readouterr().err == f"jobtables: {says}\n"


def test_a_syntax_error_on_no_key_names_its_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    """A broken table header has no key to name: the line and tomllib's reason."""
    monkeypatch.chdir(tmp_path)
    Path("c.toml").write_text(HEAD + "local = true\n[slack\n")
    assert main(["check-config", "--config", "c.toml"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("jobtables: c.toml:5: ") and err.count("\n") == 1, err
