"""Every sbatch filename token in ``--output``, filled from squeue's raw pattern as slurmstepd
writes the batch script's log, on both sides (the probe's ``expand_stdout`` and the shipped
collector's queue listing), so that no scontrol is needed.

Captured on the real SLURM 22.05.8 as jtuser (``tests/fixtures/slurm-22.05.8/stdout_tokens``):
``squeue.json`` (cut to the keys the probe reads), ``scontrol.txt`` and ``written.txt``, the
names slurmstepd gave the logs. Job 376 ran with ``--output=run_100%%_%j.out``, 597 with
``p_100%%_%j_%J_%s_%t_%n_%N_%3a_%A_%u_%x_%5j_%2t.out``, array 598 (tasks 3 and 4, own ids 599
and 598) with ``rel_%%j_%A_%a_%3a_%J_%j.out``. scontrol printed ``run_100%%_376.out``,
``p_100%%_597_%J_%s_%t_%n_%N_%3a_597_..._%5j_%2t.out`` and ``rel_%599_598_3_%3a_%J_599.out``:
none of them a file.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from probes.remote.queue_listing import _queue_specs
from probes.slurm.parse import expand_stdout, needs_scontrol, records_from_squeue, stdout_final
from probes.slurm.scontrol import merge_scontrol, parse_scontrol_all

HERE = Path(__file__).parents[2] / "fixtures" / "slurm-22.05.8" / "stdout_tokens"
DOC = json.loads((HERE / "squeue.json").read_text())
SCONTROL = (HERE / "scontrol.txt").read_text()
WRITTEN = set((HERE / "written.txt").read_text().split())
NOW = datetime(2026, 12, 5, 3, 10, tzinfo=UTC)


def _records() -> dict[str, object]:
    return {r.job_id: r for r in records_from_squeue(DOC, cluster="local", now=NOW)}


def test_the_captured_jobs() -> None:
    """The premise: four logs, none of them where scontrol says."""
    assert sorted(_records()) == ["376", "597", "598_3", "598_4"]
    fields = parse_scontrol_all(SCONTROL)
    said = {Path(fields[k]["StdOut"]).name for k in ("376", "597", "598_3")}
    assert not said & WRITTEN


@pytest.mark.parametrize("job", ["376", "597", "598_3", "598_4"])
def test_the_probe_fills_every_token(job: str) -> None:
    """squeue's pattern, filled, is the file slurmstepd wrote; no scontrol is asked for."""
    record = records_from_squeue(DOC, cluster="local", now=NOW)
    before = next(r for r in record if r.job_id == job)
    after = expand_stdout(before)
    assert after.stdout_path is not None and Path(after.stdout_path).name in WRITTEN
    assert stdout_final(before, after)
    assert not needs_scontrol(after, stdout_final(before, after))


@pytest.mark.parametrize("job", ["376", "597", "598_3"])
def test_scontrol_never_replaces_a_filled_path(job: str) -> None:
    """scontrol's wrong StdOut leaves a path filled from squeue's pattern as it is."""
    before = next(r for r in records_from_squeue(DOC, cluster="local", now=NOW)
                  if r.job_id == job)
    after = expand_stdout(before)
    fields = parse_scontrol_all(SCONTROL)[job]
    merged = merge_scontrol(after, fields, keep_stdout=stdout_final(before, after))
    assert merged.stdout_path == after.stdout_path


def test_the_collector_fills_every_token() -> None:
    """The shipped collector reads the same files (none left to scontrol)."""
    specs, unexpanded = _queue_specs(DOC["jobs"], {})
    assert unexpanded == []
    assert {Path(spec["stdout"]).name for spec in specs} == WRITTEN
