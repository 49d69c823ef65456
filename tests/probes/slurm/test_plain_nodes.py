"""A record read through ``squeue -o`` (``jobtables job``, clusters without ``--json``) knows
its nodes from scontrol, as ``--json`` does: ``report.judge`` tells a job that never ran from one
whose log went missing by them."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from probes.slurm.parse import parse_squeue_json
from probes.slurm.plain import parse_squeue_plain
from probes.slurm.scontrol import merge_scontrol, parse_scontrol_all
from tests.probes.slurm.conftest import as_plain_format

REAL = Path(__file__).resolve().parents[2] / "fixtures" / "slurm-22.05.8"
NOW = datetime.fromtimestamp(1796059000, tz=UTC)


def test_plain_records_take_their_nodes_from_scontrol() -> None:
    """Every job squeue --json gives nodes has the same nodes read through squeue -o."""
    fields = parse_scontrol_all((REAL / "scontrol.txt").read_text())
    json_nodes = {r.job_id: r.nodes for r in parse_squeue_json(
        (REAL / "squeue.json").read_text(), cluster="c", now=NOW)}
    plain = parse_squeue_plain(as_plain_format((REAL / "squeue_plain.txt").read_text()),
                               cluster="c", now=NOW)
    merged = {r.job_id: merge_scontrol(r, fields.get(r.job_id)).nodes for r in plain}
    assert merged and all(json_nodes[job_id] for job_id in merged)
    assert merged == {job_id: json_nodes[job_id] for job_id in merged}


def test_a_pending_jobs_null_nodelist_is_no_node() -> None:
    """scontrol's ``NodeList=(null)`` (never given a node) leaves ``nodes`` empty."""
    (record,) = parse_squeue_plain(
        "55|alice|PENDING|Priority|1796050000|N/A|N/A|1:00:00||0:00|x|/w|/bin/run.sh",
        cluster="c", now=NOW)
    fields = {"NodeList": "(null)", "StdOut": "/w/x.out"}
    assert merge_scontrol(record, fields).nodes is None
