"""A failed job's failing line is found and quoted without its terminal colours.

Replayed on the real SLURM: a catch-all job whose log ended on loguru's coloured error line
(``\x1b[31m\x1b[1mERROR   \x1b[0m | pack:main:42 - shard 7 is corrupt``, colours forced) read
only ``FAILED exit 1``: the escape glued to ``ERROR`` made it no whole word 'error'. A
coloured line that was found was quoted with its escape codes in the Trend and the JSON.
"""

from __future__ import annotations

import pytest

from probes.logs.parse import parse_log
from probes.models import JobFacts, JobState
from tests.report.factories import judge, log, record


def _trend(text: str) -> str:
    rec = record("misc-ansi", "7", JobState.FAILED, exit_code=1, elapsed_s=5)
    return judge(JobFacts(record=rec, log=log(text=text), summary=parse_log(text))).report.trend


@pytest.mark.parametrize(("line", "quoted"), [
    ("\x1b[31m\x1b[1mERROR   \x1b[0m | train:42 - shard 7 is corrupt",
     "ERROR | train:42 - shard 7 is corrupt"),
    ("\x1b[1;31mfatal error\x1b[0m: cannot open x.bin", "fatal error: cannot open x.bin"),
    ("ERROR | train:42 - shard 7 is corrupt", "ERROR | train:42 - shard 7 is corrupt"),
])
def test_a_coloured_error_line_is_quoted_plain(line: str, quoted: str) -> None:
    """The Trend quotes the failing line, escape codes left out."""
    assert _trend(f"step 1\n{line}\n") == f"FAILED exit 1: {quoted}"


@pytest.mark.parametrize(("tail", "quoted"), [
    ("RuntimeError: boom", "RuntimeError: boom"),
    ("KeyError: 'messages'\nwandb: Synced 5 W&B file(s)", "KeyError: 'messages'"),
    ("loading\nerror: retry 1\nValueError: bad shape (3, 4)", "ValueError: bad shape (3, 4)"),
    ("ValueError: bad shape\nfatal: cannot push", "fatal: cannot push"),
])
def test_a_bare_exception_line_is_the_failing_line(tail: str, quoted: str) -> None:
    """A Python exception's line without a traceback (a RuntimeError, the seed's terminal
    signal) is quoted, the later of it and an error-word line."""
    assert _trend(f"step 1\n{tail}\n") == f"FAILED exit 1: {quoted}"


def test_a_passthrough_exception_is_never_the_failing_line() -> None:
    """Harbor's AgentTimeoutError line after the real one is benign: the real one is quoted."""
    tail = ("RuntimeError: engine died\n"
            "harbor.AgentTimeoutError: Agent execution timed out after 900 seconds")
    assert _trend(f"step 1\n{tail}\n") == "FAILED exit 1: RuntimeError: engine died"
