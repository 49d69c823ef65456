"""The CLI's event-loop coroutine hands nothing big back to ``asyncio.run`` (issue 12).

On Python 3.11, ``asyncio.Runner`` restores the SIGINT handler through ``signal``'s enum
conversion, which formats the main task's repr, result included: a returned ``SweepResult``
cost seconds at 500 jobs. These tests run the real commands through the real ``asyncio.run``
and record what each coroutine returned.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

import pytest

from bot.cli import DEMO_RECORDING, main


@pytest.fixture
def returned(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """What every coroutine the CLI runs returned (the real asyncio.run still runs them)."""
    seen: list[object] = []
    real = asyncio.run

    def recording_run(coro: Coroutine[Any, Any, object], **kw: Any) -> object:
        value = real(coro, **kw)
        seen.append(value)
        return value

    monkeypatch.setattr(asyncio, "run", recording_run)
    return seen


def test_sweep_prints_and_returns_nothing(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, returned: list[object],
) -> None:
    config = tmp_path / "jobtables.toml"
    config.write_text(f'[[clusters]]\nname = "alpha"\nkind = "replay"\npath = "{DEMO_RECORDING}"\n')
    assert main(["sweep", "--config", str(config), "--format", "json"]) == 0
    assert '"jobs"' in capsys.readouterr().out
    assert main(["job", "alpha:41001", "--config", str(config)]) == 0
    assert "rl-grpo-qwen7b-shaped" in capsys.readouterr().out
    assert main(["demo"]) == 0
    assert capsys.readouterr().out.strip()
    assert returned == [None, None, None]
