"""The README's demo block is what ``./scripts/demo`` prints (docs match the code).

A fresh clone's ``./scripts/demo`` printed the swebench eval's pass-rate as 0.34 while the README
still showed 0.37 from before the pass-rate counted every completed trial (6209fa9): nothing
held the two together.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.cli import main

README = Path(__file__).resolve().parents[2] / "README.md"


def _readme_demo() -> list[str]:
    text = README.read_text(encoding="utf-8")
    start = text.index("$ ./scripts/demo\n") + len("$ ./scripts/demo\n")
    return text[start:text.index("```", start)].rstrip("\n").splitlines()


def test_the_readme_demo_block_is_the_demo_output(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo"]) == 0
    out = capsys.readouterr().out.splitlines()
    shown = _readme_demo()
    assert shown and shown[0].startswith("Jobs at ")
    first = out.index(shown[0])
    assert out[first:first + len(shown)] == shown
