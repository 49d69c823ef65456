"""A Ctrl-C whose cancellation the sweep loses still ends the command: exit 130, no report.

On Python 3.11 ``asyncio.wait_for`` (asyncssh's connect waits through it) returns its inner
result when that result and the cancellation come together (CPython gh-86296): the Ctrl-C's one
cancellation is gone and ``asyncio.run`` never raises. These tests lose it the same way, in the
real ``jobtables demo`` sweep (``Sweeper.sweep`` swallows the first cancellation, as wait_for
does, then sweeps the bundled cluster for real).
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from bot.cli import main
from bot.sweep import Sweeper
from bot.sweep_result import SweepResult

Sweep = Callable[..., Awaitable[SweepResult]]


def losing(original: Sweep, after: Callable[[], Awaitable[None]]) -> Sweep:
    """``Sweeper.sweep`` that presses Ctrl-C, loses the cancellation, runs ``after`` and sweeps."""

    async def sweep(self: Sweeper, **kwargs: Any) -> SweepResult:
        signal.raise_signal(signal.SIGINT)
        with contextlib.suppress(asyncio.CancelledError):  # lost, as wait_for loses it
            await asyncio.sleep(30)
        await after()
        return await original(self, **kwargs)

    return sweep


async def _nothing() -> None:
    return None


async def _long_wait() -> None:
    await asyncio.sleep(30)


@pytest.mark.parametrize("after", [_nothing, _long_wait], ids=["sweeps-on", "waits-on"])
def test_a_lost_cancellation_still_exits_130_and_prints_nothing(
        after: Callable[[], Awaitable[None]], monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """The sweep goes on (or waits 30 s) after losing the Ctrl-C: still 130, silent, at once."""
    loop_time: list[float] = []

    async def timed() -> None:
        loop_time.append(asyncio.get_running_loop().time())
        await after()
        loop_time.append(asyncio.get_running_loop().time())

    monkeypatch.setattr(Sweeper, "sweep", losing(Sweeper.sweep, timed))
    code = main(["demo"])
    out = capsys.readouterr().out
    assert code == 130, (code, out[:200])
    assert out == ""
    if after is _long_wait:  # cancelled again, not waited out
        assert len(loop_time) == 1, loop_time


def test_a_sweep_not_interrupted_prints_its_report(capsys: pytest.CaptureFixture[str]) -> None:
    """No Ctrl-C: the demo's report as ever, exit 0."""
    assert main(["demo"]) == 0
    assert "┌" in capsys.readouterr().out
