"""``record_from_squeue`` builds each record without validating it: the same record as before.

The reference is the parse as it was (kept below): the same readers, the record built by
``SchedulerRecord(...)``, validated. On every job object of the SLURM fixtures (22.05.8
captured, 23.11 rebuilt, sacct), on drawn job objects of any shape (JSON as parsed: the
only input the probe gives it) and on drawn job objects of SLURM's own shapes (numbers as
``{set, infinite, number}``, state lists, array tasks, dependencies), the record is equal,
field for field, with the same types, the same fields set and the same ``__dict__`` order; and
so is the snapshot's expansion of it (``expand_stdout``, which copies a record as
``model_copy`` did, kept below too), for those records and for records of any origin.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from probes.models import JobState, SchedulerRecord
from probes.remote.stdio_pattern import (
    array_ids,
    expand_pattern,
    job_key,
    own_stderr,
    slurm_number,
    slurm_text,
)
from probes.slurm import parse
from probes.slurm.parse import expand_stdout, record_from_squeue, records_from_squeue
from probes.slurm.scontrol import parse_dependency
from tests.probes.slurm.test_fuzz_slurm_parse import job_objects

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
DOCUMENTS = sorted(FIXTURES.glob("slurm-*/s*.json"))
NOW = datetime(2026, 11, 30, 16, 0, tzinfo=UTC)
PROPERTY = settings(max_examples=300, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


def validated_record(cluster: str, job: Mapping[str, Any], now: datetime,
                     ) -> SchedulerRecord | None:
    """``record_from_squeue`` as it was: the record validated (the reference)."""
    job_id = slurm_number(job.get("job_id"))
    if job_id is None:
        return None
    state_block = parse._block(job, "state")
    raw_state = job.get("job_state", state_block.get("current"))
    state = parse.parse_state(raw_state)
    times = parse._block(job, "time")
    start = parse.epoch(job.get("start_time", times.get("start")))
    end = parse.epoch(job.get("end_time", times.get("end")))
    limit_min = slurm_number(job.get("time_limit", times.get("limit")))
    code, signal = parse._exit_code(job.get("exit_code"))
    array_job, array_task = array_ids(job)
    dependency = slurm_text(job.get("dependency"))
    comment = job.get("comment")
    if isinstance(comment, dict):
        comment = comment.get("job")
    return SchedulerRecord(
        cluster=cluster,
        job_id=job_key(job_id, array_job, array_task),
        labels=parse._array_labels(job_id, array_task, job.get("array_task_string"),
                                   parse._array_throttle(job) if array_job else None),
        name=str(job.get("name") or ""),
        user=slurm_text(job.get("user_name")) or slurm_text(job.get("user")),
        state=state,
        reason=parse.state_reason(raw_state, slurm_text(job.get("state_reason"))
                                  or slurm_text(state_block.get("reason"))),
        submit_time=parse.epoch(job.get("submit_time", times.get("submission"))),
        eligible_time=parse.epoch(job.get("eligible_time", times.get("eligible"))),
        start_time=start,
        end_time=end if state not in {JobState.PENDING, JobState.RUNNING} else None,
        elapsed_s=parse._elapsed(state, start, end, now, slurm_number(times.get("elapsed"))),
        time_limit_s=limit_min * 60 if limit_min is not None else None,
        workdir=slurm_text(job.get("current_working_directory"))
        or slurm_text(job.get("working_directory")),
        stdout_path=slurm_text(job.get("standard_output"))
        or slurm_text(job.get("stdout_expanded")),
        stderr_path=own_stderr(job),
        dependency=dependency,
        depends_on=parse_dependency(dependency),
        exit_code=code,
        exit_signal=signal,
        command=slurm_text(job.get("command")),
        comment=slurm_text(comment),
        nodes=slurm_text(job.get("nodes")),
        restarts=slurm_number(job.get("restart_cnt")) or 0,
        array_job_id=str(array_job) if array_task is not None and array_job else None,
        array_task_id=str(array_task) if array_task is not None else None,
    )


def copied_expansion(record: SchedulerRecord) -> SchedulerRecord:
    """``expand_stdout`` as it was: the expansion a ``model_copy`` (the reference)."""
    raw = record.stdout_path
    master, _, task = record.job_id.partition("_")
    array_task = record.array_task_id or task or None
    array = array_task is not None
    path = expand_pattern(
        raw, job_id=parse._array_own_id(record) if array else parse._het_own_id(record, master),
        array_job_id=(record.array_job_id or master) if array else None,
        array_task_id=array_task, user=record.user, name=record.name, workdir=record.workdir,
    )
    if path is None or path == raw:
        return record
    return record.model_copy(update={"stdout_path": path})


def assert_same_expansion(record: SchedulerRecord) -> None:
    fast, slow = expand_stdout(record), copied_expansion(record)
    assert (fast is record) == (slow is record)
    assert fast == slow and typed(fast) == typed(slow)
    assert fast.model_fields_set == slow.model_fields_set
    assert (fast.__pydantic_extra__, fast.__pydantic_private__) == (
        slow.__pydantic_extra__, slow.__pydantic_private__)
    assert fast.labels is slow.labels  # a shallow copy, as model_copy's


def typed(record: SchedulerRecord) -> list[tuple[str, type, Any]]:
    """Every field with its value's exact type, in ``__dict__`` order (a NaN never occurs:
    the record has no float field)."""
    return [(k, type(v), v) for k, v in record.__dict__.items()]


def assert_same_record(job: Mapping[str, Any], now: datetime = NOW) -> None:
    fast, slow = record_from_squeue("c", job, now), validated_record("c", job, now)
    if slow is None:
        assert fast is None
        return
    assert fast is not None
    assert fast == slow and fast.model_dump() == slow.model_dump()
    assert typed(fast) == typed(slow)
    assert fast.model_fields_set == slow.model_fields_set
    assert (fast.__pydantic_extra__, fast.__pydantic_private__) == (
        slow.__pydantic_extra__, slow.__pydantic_private__)
    assert_same_expansion(fast)
    assert_same_expansion(slow)
    assert typed(expand_stdout(fast)) == typed(copied_expansion(slow))


def fixture_jobs() -> list[tuple[str, dict[str, Any]]]:
    jobs = []
    for path in DOCUMENTS:
        for n, job in enumerate(json.loads(path.read_text()).get("jobs") or []):
            jobs.append((f"{path.parent.name}/{path.name}#{n}", job))
    return jobs


@pytest.mark.parametrize(("where", "job"), fixture_jobs(), ids=[w for w, _ in fixture_jobs()])
def test_fixture_job_objects(where: str, job: dict[str, Any]) -> None:
    """Every job object SLURM printed (or that was rebuilt from its source): the same record."""
    assert_same_record(job)
    assert_same_record(job, datetime(2030, 1, 1, tzinfo=UTC))


@pytest.mark.parametrize("path", DOCUMENTS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_fixture_documents(path: Path) -> None:
    """A whole document's records, as the sweep reads them (all users, and one user's)."""
    data = json.loads(path.read_text())
    jobs = [j for j in data["jobs"] if isinstance(j, dict)]
    slow = [r for r in (validated_record("c", j, NOW) for j in jobs) if r is not None]
    assert [typed(r) for r in records_from_squeue(data, cluster="c", now=NOW)] == \
        [typed(r) for r in slow]


@PROPERTY
@given(job_objects)
def test_drawn_job_objects_of_any_shape(job: dict[str, Any]) -> None:
    """Any JSON object (as parsed, NaN and infinities included): the same record or none."""
    assert_same_record(json.loads(json.dumps(job, allow_nan=True)))


def _number(draw: st.DrawFn, values: st.SearchStrategy[Any]) -> Any:
    value = draw(values)
    shape = draw(st.sampled_from(["int", "object", "unset", "infinite", "float", "text"]))
    if shape == "object":
        return {"set": True, "infinite": False, "number": value}
    if shape == "unset":
        return {"set": False, "infinite": False, "number": 0}
    if shape == "infinite":
        return {"set": True, "infinite": True, "number": 0}
    if shape == "float":
        return float(value)
    return str(value) if shape == "text" else value


@st.composite
def slurm_jobs(draw: st.DrawFn) -> dict[str, Any]:
    """A job object of the shapes SLURM 22.05 to 25.05 print, with every key sometimes left
    out, ``(null)`` or empty."""
    epochs = st.integers(-5, 2_000_000_000) | st.sampled_from([0, 4294967294, 10 ** 20])
    states = st.sampled_from([s.value for s in JobState] + ["CANCELLED by 0", "BOOT_FAIL",
                                                            "REQUEUED", "SUSPENDED", ""])
    texts = st.sampled_from(["", "(null)", "None", "N/A", " x ", "/w/o_%j.out", "/w/%x/%A_%a",
                             "afterany:12(unfulfilled),afterok:13+1", "rl-\udcff", "é"])
    job: dict[str, Any] = {
        "job_id": _number(draw, st.integers(1, 10 ** 7)),
        "job_state": draw(states | st.lists(states, max_size=3)),
        "start_time": _number(draw, epochs), "end_time": _number(draw, epochs),
        "submit_time": _number(draw, epochs),
        "time_limit": _number(draw, st.integers(0, 10 ** 6)),
        "exit_code": draw(st.integers(-1, 70000) | st.fixed_dictionaries(
            {"status": st.just(["EXITED"]), "return_code": st.integers(0, 255),
             "signal": st.fixed_dictionaries({"id": st.integers(0, 64)})})),
        "array_job_id": _number(draw, st.integers(0, 10 ** 7)),
        "array_task_id": draw(st.none() | st.integers(0, 1000)),
        "array_task_string": draw(st.sampled_from(["", "0-499%8", " "])),
        "restart_cnt": _number(draw, st.integers(0, 5)),
        "time": {"elapsed": draw(st.integers(-1, 10 ** 6)), "start": 5, "limit": 3},
        "state": {"current": draw(st.lists(states, max_size=2)), "reason": draw(texts)},
        **{key: draw(texts) for key in (
            "name", "user_name", "user", "state_reason", "dependency", "comment",
            "current_working_directory", "working_directory", "standard_output",
            "stdout_expanded", "command", "nodes")},
    }
    if draw(st.booleans()):
        job["comment"] = {"job": draw(texts), "admin": "x"}
    keep = draw(st.sets(st.sampled_from(sorted(job))))
    return {k: v for k, v in job.items() if k in keep or k == "job_id"}


@PROPERTY
@given(slurm_jobs(), st.sampled_from([NOW, datetime(1970, 1, 2, tzinfo=UTC)]))
def test_drawn_slurm_job_objects(job: dict[str, Any], now: datetime) -> None:
    """SLURM's own shapes, through JSON as the collector sends them: the same record."""
    raw = json.dumps(job, allow_nan=True).encode("utf-8", "surrogatepass")
    assert_same_record(json.loads(raw), now)


@PROPERTY
@given(st.fixed_dictionaries(
    {"cluster": st.just("c"),
     "job_id": st.sampled_from(["7", "7_3", "12+1", "8_0"]),
     "name": st.sampled_from(["", "rl", "a/b", "%j"]),
     "state": st.sampled_from(list(JobState))},
    optional={"user": st.none() | st.sampled_from(["alice", ""]),
              "workdir": st.none() | st.sampled_from(["/w", "w", "/w/"]),
              "stdout_path": st.none() | st.sampled_from(
                  ["", "o.out", "/w/o_%j.out", "/w/%x_%A_%a.log", "%u/%3j", "/w/%N.out",
                   "/abs", "100%%_%j"]),
              "array_job_id": st.none() | st.just("7"),
              "array_task_id": st.none() | st.just("3"),
              "labels": st.sampled_from([{}, {"slurm_job_id": "9"}, {"array_tasks": "0-9"}])}))
def test_drawn_records_of_any_origin_expand_alike(fields: dict[str, Any]) -> None:
    """A record of any origin (plain squeue, scontrol-merged, a test's, some fields unset):
    its expansion is the ``model_copy`` it was, fields set included."""
    assert_same_expansion(SchedulerRecord(**fields))


def test_the_model_has_no_validator_a_direct_build_would_skip() -> None:
    """``SchedulerRecord`` validates nothing beyond field types: if it gains a validator,
    ``parse._record`` must be looked at again."""
    decorators = SchedulerRecord.__pydantic_decorators__
    assert not (decorators.validators or decorators.field_validators
                or decorators.root_validators or decorators.model_validators)
    fields = SchedulerRecord.model_fields
    assert all(not f.metadata for f in fields.values())
    assert SchedulerRecord.model_config.get("extra") == "forbid"  # no extra to copy
    assert not SchedulerRecord.__private_attributes__  # no private state to copy
