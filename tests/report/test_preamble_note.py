"""A log read beside a preamble-only StdOut says so in the note, not 'StdOut ... absent'.

Found on the real SLURM 22.05 (job 774): the collector now reads the job's own
``logs/train_774.out`` when its StdOut holds only the script's preamble; the note must not claim
a StdOut that exists is absent. Near miss: an absent StdOut keeps its note.
"""

from __future__ import annotations

from probes.models import JobFacts, JobState
from tests.report.factories import judge, log, record

WHY = ("StdOut /w/slurm-774.out holds only a 52-byte preamble; the job's own log is"
       " /w/logs/train_774.out")


def _note(**fetch: object) -> tuple[list[str], str]:
    rec = record("rl-redir", "774", JobState.RUNNING, elapsed_s=60, nodes="vm")
    detail = judge(JobFacts(record=rec, log=log(status="mismatch", **fetch)))
    return list(detail.report.flags), detail.note


def test_a_preamble_stdout_is_named_as_such() -> None:
    flags, notes = _note(requested_path="/w/slurm-774.out", path="/w/logs/train_774.out",
                         error=WHY)
    assert "log-path-mismatch" in flags and WHY in notes and "absent" not in notes


def test_an_absent_stdout_keeps_its_note() -> None:
    _flags, notes = _note(requested_path="/w/gone_774.out", path="/w/train_774.out")
    assert "StdOut /w/gone_774.out absent; read /w/train_774.out" in notes
