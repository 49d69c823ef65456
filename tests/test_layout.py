"""The three top-level package names are generic: make sure they come from this repository."""

from __future__ import annotations

from pathlib import Path

import bot
import probes
import report

ROOT = Path(__file__).resolve().parents[1]


def test_packages_import_from_this_repository() -> None:
    """bot, probes and report resolve to this checkout, not to same-named installed packages."""
    for module in (bot, probes, report):
        assert module.__file__ is not None
        assert Path(module.__file__).resolve().parent.parent == ROOT, module.__file__
