"""Fuzz the SLURM output parsers: garbage gives records or a CommandError, never a crash."""

from __future__ import annotations

import contextlib
import json
from datetime import UTC, datetime
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from probes.errors import CommandError
from probes.models import JobState
from probes.slurm.parse import parse_squeue_json, parse_state
from probes.slurm.plain import parse_duration, parse_squeue_plain
from probes.slurm.scontrol import parse_dependency, parse_scontrol_all

NOW = datetime(2026, 11, 30, 16, 0, tzinfo=UTC)
FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12),
                                                                       children, max_size=5),
    max_leaves=25,
)
job_objects = st.fixed_dictionaries(
    {},
    optional={k: json_values for k in (
        "job_id", "name", "user_name", "job_state", "state", "start_time", "end_time",
        "submit_time", "time_limit", "exit_code", "dependency", "standard_output",
        "current_working_directory", "array_job_id", "array_task_id", "time", "comment",
        "restart_cnt")},
)


@FUZZ
@given(st.lists(job_objects, max_size=6))
def test_squeue_json_of_any_shape(jobs: list[dict[str, Any]]) -> None:
    """Any job objects parse into records or are skipped; nothing raises."""
    text = json.dumps({"jobs": jobs}, allow_nan=True)
    for record in parse_squeue_json(text, cluster="c", now=NOW):
        assert record.cluster == "c" and record.job_id


@FUZZ
@given(st.binary(max_size=2000))
def test_squeue_json_garbage_is_a_command_error(raw: bytes) -> None:
    """Bytes that are not squeue JSON raise CommandError, never anything else."""
    text = raw.decode("utf-8", errors="replace")
    with contextlib.suppress(CommandError):
        records = parse_squeue_json(text, cluster="c", now=NOW)
        assert all(r.cluster == "c" and r.job_id for r in records)


@FUZZ
@given(st.text(max_size=3000))
def test_text_parsers_never_raise(text: str) -> None:
    """scontrol, plain squeue, dependency, duration and state parsers accept any text, and
    what they return is well formed."""
    jobs = parse_scontrol_all(text)
    assert all(job_id and all(isinstance(v, str) for v in fields.values())
               for job_id, fields in jobs.items())
    records = parse_squeue_plain(text, cluster="c", now=NOW)
    assert len(records) <= len(text.splitlines())
    assert all(r.cluster == "c" and r.job_id for r in records)
    assert all(d and "," not in d for d in parse_dependency(text))
    seconds = parse_duration(text)
    assert seconds is None or seconds >= 0
    assert isinstance(parse_state(text), JobState)


def test_huge_scontrol_line() -> None:
    """A 1 MB scontrol line parses without hanging and keeps its job id."""
    line = "JobId=7 JobName=x Comment=" + "a " * 500_000 + "StdOut=/w/x_7.out\n"
    fields = parse_scontrol_all(line)["7"]
    assert fields["StdOut"] == "/w/x_7.out"
