"""A Ctrl-C that comes while a one-shot command renders or prints its report still ends it 130.

``bot.interrupt.run`` took SIGINT through ``loop.add_signal_handler``: the signal only wrote a
byte to the loop's wake-up pipe, and the Ctrl-C was noted when the loop next read it. A Ctrl-C
while the report is rendered or printed (synchronous work at the task's end, seconds of it at
500 jobs) was never read: the task ended, the handler was removed with the byte unread, and the
command exited 0. With stdout unbuffered (``PYTHONUNBUFFERED``) the print itself lost all but
the first pipe-full of the report (a signal cuts the write short and ``TextIOWrapper`` drops
the rest): a cut JSON document with exit 0. These tests press Ctrl-C (a real SIGINT) inside
the real ``jobtables demo`` sweep's rendering.
"""

from __future__ import annotations

import signal
from typing import Any

import pytest

from bot import cli
from bot.cli import main


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_a_ctrl_c_while_the_report_is_rendered_exits_130_and_prints_nothing(
        fmt: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """SIGINT as the report is rendered (after the sweep, before the print): 130, silent."""
    real = cli._emit

    def emit(*args: Any) -> str:
        text = real(*args)
        signal.raise_signal(signal.SIGINT)
        return text

    monkeypatch.setattr(cli, "_emit", emit)
    code = main(["demo", "--format", fmt])
    out = capsys.readouterr().out
    assert code == 130, (code, out[:200])
    assert out == ""


def test_the_handler_before_is_back_after_the_command() -> None:
    """The command leaves SIGINT as it found it (Python's KeyboardInterrupt)."""
    assert main(["demo", "--format", "json"]) == 0
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_second_ctrl_c_ends_a_command_at_once(monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """The first Ctrl-C is noted (the command winds down); a second ends it where it stands,
    as asyncio.run's own handler does: a command stuck in synchronous code still exits 130."""
    real = cli._emit
    went_on: list[str] = []

    def emit(*args: Any) -> str:
        signal.raise_signal(signal.SIGINT)
        signal.raise_signal(signal.SIGINT)
        went_on.append("past the second Ctrl-C")
        return real(*args)

    monkeypatch.setattr(cli, "_emit", emit)
    assert main(["demo"]) == 130
    assert went_on == []
    assert capsys.readouterr().out == ""
