"""A Ctrl-C while ``jobtables`` is still importing exits 130 with nothing on stderr.

The console script imported the whole command line (``bot.cli``: pydantic, structlog, the
probes; a few hundred milliseconds) in its own ``from bot.cli import launch``, outside any
handler: a Ctrl-C then printed a ``KeyboardInterrupt`` traceback and the process ended by
SIGINT (-2), where CONTRACT says 130. The real console script is run; SIGINT is sent once the
child is inside the heavy imports (pydantic's compiled core mapped: only ``bot.cli``'s
imports load it), then again every few milliseconds until it exits. The child is waited on
by what it does (``tests.cli.children``), never on a timer.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.cli import children

SCRIPT = Path(sys.executable).with_name("jobtables")
HEAVY = "_pydantic_core"
"""A compiled module the command line's imports load and the entry module's do not."""


def _mapped(pid: int, name: str) -> bool:
    try:
        return name in Path(f"/proc/{pid}/maps").read_text(errors="replace")
    except (FileNotFoundError, ProcessLookupError):
        return False


def _interrupt_until_exit(proc: subprocess.Popen[str]) -> tuple[str, str]:
    """SIGINT now and every few milliseconds until the child exits; its outputs."""
    progress = children.Progress(proc)
    while proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=0.005)
        except subprocess.TimeoutExpired:
            progress.check("after SIGINT")
    return proc.communicate()


@pytest.mark.parametrize("argv", [["demo"], ["--help"]])
def test_ctrl_c_during_the_imports_is_130_and_silent(argv: list[str]) -> None:
    """Whichever command: exit 130, no traceback, no output."""
    with subprocess.Popen([str(SCRIPT), *argv], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True) as proc:
        try:
            progress = children.Progress(proc)
            while not _mapped(proc.pid, HEAVY):
                assert proc.poll() is None, "the child exited before importing the CLI"
                progress.check("before its imports")
                time.sleep(0.001)
            out, err = _interrupt_until_exit(proc)
        finally:
            proc.kill()
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert (proc.returncode, out, err) == (130, "", "")
