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
