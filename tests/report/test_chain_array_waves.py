"""Array grids run in waves are no restart chains: real SLURM 22.05.8 captures.

``tests/fixtures/slurm-22.05.8/squeue_array_waves.json`` is ``squeue --json`` (cut to the
keys the probe reads) on the test cluster, as jtuser, a minute after two arrays hit their
one-minute walltime: ``sbatch --array=0-5%2 -t 1`` (1056: tasks 0 and 1 TIMEOUT at 18:45:14,
tasks 2 and 3 started at 18:45:18 by the throttle, 4-5 pending ``JobArrayTaskLimit``;
``array_max_tasks`` 2) and ``sbatch --array=0-3 -t 1`` (1057: four tasks, all TIMEOUT,
``array_max_tasks`` 0). Each task is a cell of the grid: its walltime TIMEOUT is a failure,
not a 'normal chain restart' onto the array's next task (read so before: the name and
workdir fallback took 1056_2, started after 1056_0 ended, for its restart).
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from probes.models import JobState
from probes.slurm.parse import parse_squeue_json
from probes.slurm.scontrol import merge_scontrol, parse_scontrol_all
from report.chain import ChainIndex, array_throttle, chain_link
from tests.report.factories import facts, judge

CAPTURE = (Path(__file__).resolve().parents[1] / "fixtures" / "slurm-22.05.8"
           / "squeue_array_waves.json")
SCONTROL = CAPTURE.with_name("scontrol_array_waves.txt")
NOW = datetime(2026, 12, 4, 18, 45, 47, tzinfo=UTC)


def test_the_throttle_is_read_from_squeue() -> None:
    """``array_max_tasks`` becomes each task's (and the pending remainder's) throttle."""
    records = parse_squeue_json(CAPTURE.read_text(), cluster="local22", now=NOW)
    by_id = {r.job_id: r for r in records}
    assert {array_throttle(by_id[k]) for k in ("1056_0", "1056_2", "1056")} == {2}
    assert {array_throttle(by_id[f"1057_{t}"]) for t in range(4)} == {0}
    assert by_id["1056"].labels["array_tasks"] == "4-5%2"


def test_a_wave_grids_walltime_timeouts_are_failures_not_restarts() -> None:
    """No TIMEOUT task of either array has a successor among its own array's tasks; judged,
    each is failed with no chain-restart flag."""
    records = parse_squeue_json(CAPTURE.read_text(), cluster="local22", now=NOW)
    index = ChainIndex(records)
    timeouts = [r for r in records if r.state is JobState.TIMEOUT]
    assert len(timeouts) == 6
    for record in timeouts:
        assert chain_link(record, records, {}, index=index).successor is None, record.job_id
    wave = next(r for r in records if r.job_id == "1056_0")
    report = judge(facts(wave), others=[r for r in records if r.job_id != "1056_0"],
                   now=NOW).report
    assert report.verdict == "failed" and report.successor is None
    assert "chain-restart" not in report.flags


def test_scontrol_gives_the_plain_formats_records_their_throttle() -> None:
    """squeue -o prints no throttle; ``scontrol show job -o`` (captured for 1057_0 and 1056_2)
    prints ``ArrayTaskThrottle=2`` for the throttled array and nothing for the other: 0."""
    lines = SCONTROL.read_text()
    fields = parse_scontrol_all(lines)
    plain = [r.model_copy(update={"labels": {}}) for r in
             parse_squeue_json(CAPTURE.read_text(), cluster="local22", now=NOW)]
    merged = {r.job_id: merge_scontrol(r, fields.get(r.job_id)) for r in plain
              if r.job_id in fields}
    assert {k: array_throttle(r) for k, r in merged.items()} == {"1057_0": 0, "1056_2": 2}


def test_an_array_run_one_task_at_a_time_is_a_restart_chain() -> None:
    """``sbatch --array=0-2%1 -t 1`` (1537, captured in ``squeue_array_chain.json``: 1537_0
    TIMEOUT at 18:49:44, 1537_1 started 18:49:45, 1537_2 pending; ``array_max_tasks`` 1):
    each task resumes the last, so 1537_0's TIMEOUT is a restart onto 1537_1."""
    records = parse_squeue_json(CAPTURE.with_name("squeue_array_chain.json").read_text(),
                                cluster="local22", now=NOW.replace(minute=50, second=7))
    first = next(r for r in records if r.job_id == "1537_0")
    assert first.state is JobState.TIMEOUT and array_throttle(first) == 1
    assert chain_link(first, records, {}).successor == "1537_1"
