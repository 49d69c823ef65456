"""The log-path rules shared by the probe and the shipped collector (``stdio_pattern``)."""

from __future__ import annotations

import pytest

from probes.models import JobState, SchedulerRecord
from probes.remote.stdio_pattern import (
    ended_before,
    expand_pattern,
    has_stdio_token,
    job_key,
    slurm_number,
)
from probes.slurm.parse import expand_stdout, needs_scontrol

PLAIN = {"job_id": "7", "array_job_id": None, "array_task_id": None, "user": "alice",
         "name": "train", "workdir": "/w"}
TASK = {**PLAIN, "job_id": "9", "array_job_id": "7", "array_task_id": "2"}


@pytest.mark.parametrize(
    ("pattern", "job", "expected"),
    [
        ("logs/%x_%j.out", PLAIN, "/w/logs/train_7.out"),
        ("/abs/%u/%8j.log", PLAIN, "/abs/alice/00000007.log"),
        ("100%%_%j.out", PLAIN, "/w/100%_7.out"),
        (None, PLAIN, "/w/slurm-7.out"),
        ("", PLAIN, "/w/slurm-7.out"),
        ("out.log", PLAIN, "/w/out.log"),
        ("/abs/plain.log", PLAIN, "/abs/plain.log"),
        ("/abs/plain.log", {**PLAIN, "workdir": None}, "/abs/plain.log"),
        ("%a_%A.out", PLAIN, "/w/4294967294_7.out"),  # not an array task: NO_VAL - 1
        ("%3x.out", PLAIN, "/w/train.out"),  # padding applies to numbers only
        ("/w/", PLAIN, "/w/"),
        (None, TASK, "/w/slurm-7_2.out"),
        ("%A_%a_%j.out", TASK, "/w/7_2_9.out"),
        ("%4a.out", TASK, "/w/0002.out"),
        ("%j.out", {**TASK, "array_job_id": None}, "/w/9.out"),
        # the batch script's step tokens, as slurmstepd 22.05 writes them (job 597 on vm)
        ("%t.out", PLAIN, "/w/0.out"),
        ("/abs/%s_%j.out", PLAIN, "/abs/batch_7.out"),
        ("%2t_%3n_%J_%4s.out", PLAIN, "/w/00_000_7_batch.out"),
        ("%N_%j.out", {**PLAIN, "node": "vm"}, "/w/vm_7.out"),
        # near misses: no single node to name, a token 22.05 does not know, or no workdir
        ("%N_%j.out", PLAIN, None),
        ("%N_%j.out", {**PLAIN, "node": "vm[01-02]"}, None),
        ("%N_%j.out", {**PLAIN, "node": ".."}, None),
        ("%b_%j.out", PLAIN, None),
        ("logs/%x.out", {**PLAIN, "workdir": None}, None),
        (None, {**PLAIN, "workdir": ""}, None),
    ],
)
def test_expand_pattern(pattern: str | None, job: dict[str, str | None],
                        expected: str | None) -> None:
    """slurmctld's _fname_format tokens expand; anything else gives None (ask scontrol)."""
    assert expand_pattern(pattern, **job) == expected  # type: ignore[arg-type]


@pytest.mark.parametrize(("pattern", "expected"), [
    ("/w/a-%15j.out", "/w/a-0000000007.out"),
    ("/w/w-%999999999j.out", "/w/w-0000000007.out"),
    ("/w/w-%" + "9" * 5000 + "j.out", "/w/w-0000000007.out"),
    ("/w/w-%010j.out", "/w/w-0000000007.out"),
    ("/w/w-%0003j.out", "/w/w-007.out"),
    ("/w/%12A_%13a.out", "/w/0000000007_0000000002.out"),
])
def test_a_padding_wider_than_slurms_is_slurms(pattern: str, expected: str) -> None:
    """slurmd pads a number to 10 digits at most (seen on 22.05: ``-o w-%999999999j.out``
    wrote ``w-0000002060.out``). The pattern is the job owner's text: a padding of 999999999
    made the expansion a 1 GB string, and ``jobtables job`` of that job took 51 s and 4 GB of
    memory (the login node's collector timed out doing the same)."""
    job = {**TASK, "job_id": "7", "array_job_id": "7"} if "a." in pattern else PLAIN
    assert expand_pattern(pattern, **job) == expected  # type: ignore[arg-type]


@pytest.mark.parametrize(("path", "raw"), [
    ("/w/a.out", False), ("/w/100%%.out", False), ("/w/%N.out", True), ("/w/%5j", True),
])
def test_has_stdio_token(path: str, raw: bool) -> None:
    """A leftover token (not `%%`) means the path is still a pattern."""
    assert has_stdio_token(path) is raw


@pytest.mark.parametrize(("raw", "number"), [
    (5, 5), (5.0, 5), ("12", 12), ({"set": True, "number": 3}, 3),
    ({"set": False, "number": 3}, None), ({"infinite": True}, None), (True, None),
    ("1e3", None), (None, None),
])
def test_slurm_number(raw: object, number: int | None) -> None:
    """Every version's spelling of a number; unset, infinite and booleans are not numbers."""
    assert slurm_number(raw) == number


@pytest.mark.parametrize(("ids", "key"), [
    ((9, 7, 2), "7_2"), ((7, 7, 0), "7_0"), ((9, None, None), "9"), ((9, 0, 2), "9"),
])
def test_job_key(ids: tuple[int, int | None, int | None], key: str) -> None:
    """Array tasks are keyed ``A_T``; a job without an array id keeps its own id."""
    assert job_key(*ids) == key


@pytest.mark.parametrize(
    ("pattern", "expected", "needs"),
    [
        ("logs/%x_%j.out", "/w/logs/train_7.out", False),
        ("/abs/%u/%8j.log", "/abs/alice/00000007.log", False),
        ("100%%_%j.out", "/w/100%_7.out", False),
        ("%N_%j.out", "%N_%j.out", True),  # node name: only slurmctld knows it
        ("", "/w/slurm-7.out", False),
    ],
)
def test_expand_stdout_rules(pattern: str, expected: str, needs: bool) -> None:
    """A record's raw pattern goes through expand_pattern; an unexpandable one stays raw."""
    record = SchedulerRecord(cluster="c", job_id="7", name="train", user="alice",
                             state=JobState.RUNNING, workdir="/w", stdout_path=pattern or None)
    out = expand_stdout(record)
    assert out.stdout_path == expected and needs_scontrol(out) is needs


def test_expand_stdout_of_a_plain_format_array_task() -> None:
    """A record only keyed ``A_T`` (squeue -o) gets SLURM's array default name."""
    record = SchedulerRecord(cluster="c", job_id="7_2", name="train", user="alice",
                             state=JobState.RUNNING, workdir="/w")
    assert expand_stdout(record).stdout_path == "/w/slurm-7_2.out"


@pytest.mark.parametrize(
    ("job", "since", "dropped"),
    [
        ({"job_state": "COMPLETED", "end_time": 100}, 200.0, True),
        ({"job_state": ["TIMEOUT"], "end_time": {"set": True, "infinite": False,
                                                  "number": 100}}, 200.0, True),
        ({"job_state": "COMPLETED", "end_time": 300}, 200.0, False),  # ended after the cutoff
        ({"job_state": "RUNNING", "end_time": 100}, 200.0, False),  # end_time = limit, not end
        ({"job_state": ["COMPLETED", "COMPLETING"], "end_time": 100}, 200.0, False),
        ({"job_state": "PENDING", "end_time": 0}, 200.0, False),
        ({"job_state": "FAILED"}, 200.0, False),  # no end time: kept
        ({"job_state": "COMPLETED", "end_time": 100}, None, False),  # no cutoff asked
    ],
)
def test_ended_before(job: dict[str, object], since: float | None, dropped: bool) -> None:
    """Only jobs that really ended before the cutoff are dropped before records are built."""
    assert ended_before(job, since) is dropped
