"""The ``jobtables`` console script's entry: a Ctrl-C while it starts exits 130, quietly.

Policy: importing the command line (``bot.cli``: pydantic, structlog, asyncssh, the probes)
takes a few hundred milliseconds. Imported by the console script itself, a Ctrl-C in that
time raised ``KeyboardInterrupt`` out of its ``from bot.cli import launch``: a traceback and
an end by SIGINT (-2), where CONTRACT says 130. This module imports nothing but what the
interpreter has already loaded (``sys``, the builtin ``_signal``), so the script reaches
:func:`launch` at once. Until ``bot.cli`` is in, the first SIGINT raises ``KeyboardInterrupt``
and ignores any after it (a repeated Ctrl-C cannot interrupt the exit); then Python's own
handler is back for the command (``bot.interrupt`` takes it while a command runs). Any
``KeyboardInterrupt`` that reaches here leaves with 130 and prints nothing.
"""

from __future__ import annotations

import _signal  # type: ignore[import-not-found]  # signal.py's C half: no stub, already loaded
import sys


def launch() -> None:
    """The console script (``[project.scripts]``): ``bot.cli.launch`` (which leaves by its own
    exit), imported and run under the Ctrl-C rule above."""
    _signal.signal(_signal.SIGINT, _first_interrupt)
    try:
        from bot.cli import launch as run

        _signal.signal(_signal.SIGINT, _signal.default_int_handler)
        run()
    except KeyboardInterrupt:
        _signal.signal(_signal.SIGINT, _signal.SIG_IGN)
        sys.exit(130)


def _first_interrupt(signum: int, frame: object) -> None:
    """A SIGINT during the start: ignore the next ones, then interrupt."""
    _signal.signal(_signal.SIGINT, _signal.SIG_IGN)
    raise KeyboardInterrupt
