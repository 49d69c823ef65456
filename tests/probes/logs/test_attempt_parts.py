"""A log several attempts of a chain appended to: each job's own part (probes.logs.attempts),
on slurmstepd's own lines (SLURM 22.05's wording), the same on the CLI's read and the bot's."""

from __future__ import annotations

import pytest

from probes.logs.attempts import own_part, own_span
from probes.models import JobState, SchedulerRecord
from probes.slurm.assemble import job_facts
from probes.slurm.cursors import fold_job

FIRST = ("***** Running training *****\n  Total optimization steps = 100\n"
         + "".join(f"{{'loss': 1.{9 - i}, 'grad_norm': 0.8{i}, 'learning_rate': 2e-05, "
                   f"'epoch': 0.0{i}}}\n" for i in range(1, 7)))
TIMEOUT_1332 = ("slurmstepd-gpu07: error: *** JOB 1332 ON gpu07 CANCELLED AT "
                "2026-12-04T03:41:46 DUE TO TIME LIMIT ***\n")
SECOND = "Resuming from checkpoint checkpoint-6\nLoading checkpoint shards: 4/4\n"
SHARED = FIRST + TIMEOUT_1332 + SECOND


def test_a_restart_reads_what_follows_its_predecessors_end() -> None:
    text, cut = own_part(SHARED, "1333")
    assert text == SECOND
    assert cut == len((FIRST + TIMEOUT_1332).encode())


def test_the_ended_attempt_reads_up_to_its_own_end() -> None:
    assert own_part(SHARED, "1332")[0] == FIRST + TIMEOUT_1332


def test_a_log_with_no_other_jobs_marker_is_whole() -> None:
    assert own_span(FIRST + TIMEOUT_1332, "1332") is None
    assert own_span(FIRST, "1333") is None
    assert own_span("", "1") is None


@pytest.mark.parametrize("marker", [
    "slurmstepd: error: *** JOB 1332 ON n1 CANCELLED AT 2026-12-04T03:41:46 ***\n",  # scancel
    "slurmstepd: error: *** JOB 1332 ON n1 CANCELLED AT 2026-12-04T03:41:46 DUE TO PREEMPTION "
    "***\n",
    "slurmstepd: error: *** STEP 1332.0 ON n1 CANCELLED AT 2026-12-04T03:41:46 DUE TO TIME "
    "LIMIT ***\n",
    "slurmstepd: error: Detected 1 oom_kill event in StepId=1332.batch. Some of the step tasks "
    "have been OOM Killed.\n",
])
def test_every_kind_of_slurm_end_divides_the_attempts(marker: str) -> None:
    assert own_part(FIRST + marker + SECOND, "1333")[0] == SECOND


def test_three_attempts_the_middle_one_reads_its_own() -> None:
    middle = "{'loss': 0.9, 'grad_norm': 0.5, 'learning_rate': 1e-05, 'epoch': 0.2}\n"
    end_1333 = TIMEOUT_1332.replace("1332", "1333")
    text = FIRST + TIMEOUT_1332 + middle + end_1333 + SECOND
    assert own_part(text, "1333")[0] == middle + end_1333
    assert own_part(text, "1334")[0] == SECOND


def test_a_step_end_of_the_job_itself_cuts_nothing_after_it() -> None:
    """A step of the job OOM-killed while the batch script goes on: all of it the job's."""
    oom = "slurmstepd: error: Detected 1 oom_kill event in StepId=1333.0.\n"
    assert own_span(FIRST + oom + SECOND, "1333") is None


def test_an_array_tasks_id_is_never_matched_against_a_raw_job_id() -> None:
    """``123_4``'s marker names its raw id, which the record does not hold: read whole."""
    assert own_span(SHARED, "1332_4") is None and own_span(SHARED, "1332+1") is None


def test_the_cut_counts_bytes_not_characters() -> None:
    text = "naïve ✓ step\n" + TIMEOUT_1332 + SECOND
    _, cut = own_part(text, "1333")
    assert cut == len(("naïve ✓ step\n" + TIMEOUT_1332).encode())


def _record(job_id: str, state: JobState) -> SchedulerRecord:
    return SchedulerRecord(cluster="c", job_id=job_id, name="sft-chain", state=state,
                           stdout_path="/logs/train.log")


def _collected(text: str) -> dict[str, object]:
    return {"log": {"requested": "/logs/train.log", "path": "/logs/train.log", "status": "ok",
                    "text": text, "offset": 0, "size": len(text.encode()), "lines": 11}}


def test_the_cli_read_of_a_restart_is_bring_up_and_the_timeout_keeps_its_steps() -> None:
    succ = job_facts(_record("1333", JobState.RUNNING), _collected(SHARED), aliases={},
                     benign_patterns=())
    assert succ.summary is not None and not succ.summary.points and not succ.summary.faults
    assert succ.log is not None and succ.log.offset == len((FIRST + TIMEOUT_1332).encode())
    pred = job_facts(_record("1332", JobState.TIMEOUT), _collected(SHARED + "{'loss': 0.1}\n"),
                     aliases={}, benign_patterns=())
    assert pred.summary is not None and [p.step for p in pred.summary.points][-1] == 6


def test_the_bots_first_read_folds_the_same_part_as_the_cli() -> None:
    raw = _collected(SHARED)
    raw["log"]["cursor"] = {  # type: ignore[index]
        "path": "/logs/train.log", "dev": 1, "ino": 2, "offset": len(SHARED.encode()),
        "digest": "ab" * 16}
    folded, state = fold_job(_record("1333", JobState.RUNNING), raw, None, aliases={},
                             benign_patterns=())
    cold = job_facts(_record("1333", JobState.RUNNING), _collected(SHARED), aliases={},
                     benign_patterns=())
    assert folded.summary == cold.summary
    assert state is not None and state.recent == SECOND


# --- review of 3e36c0f: a requeued job, and an earlier attempt that left no marker -----------

REQUEUE_1332 = ("slurmstepd-gpu07: error: *** JOB 1332 ON gpu07 CANCELLED AT "
                "2026-12-04T03:58:33 DUE TO JOB REQUEUE ***\n")
RERUN = ("Restart count is 1\nResuming from checkpoint checkpoint-6\n"
         + "".join(f"{{'loss': 0.{99 - i}, 'grad_norm': 0.5, 'learning_rate': 2e-05, "
                   f"'epoch': 0.{i}}}\n" for i in range(7, 31)))


def test_a_requeued_job_reads_on_past_its_own_requeue_marker() -> None:
    """``scontrol requeue`` (or --requeue after a preemption) reruns the job under its own id,
    appending to its log (--open-mode=append): what follows its own marker is its rerun."""
    assert own_span(FIRST + REQUEUE_1332 + RERUN, "1332") is None
    preempted = REQUEUE_1332.replace("JOB REQUEUE", "PREEMPTION")
    assert own_span(FIRST + preempted + RERUN, "1332", live=True) is None
    # ended (not requeued) at a preemption: its part still ends at its own end
    assert own_part(FIRST + preempted + SECOND, "1332")[0] == FIRST + preempted


def test_the_cli_read_of_a_requeued_running_job_has_its_rerun_steps() -> None:
    """Replayed on the real SLURM: a job requeued at step 6 and running again read 6/100
    (the steps before its own requeue marker) where its log was at step 30."""
    text = FIRST + REQUEUE_1332 + RERUN
    job = job_facts(_record("1332", JobState.RUNNING), _collected(text), aliases={},
                    benign_patterns=())
    assert job.summary is not None and job.summary.points[-1].step == 30
    raw = _collected(text)
    raw["log"]["cursor"] = {  # type: ignore[index]
        "path": "/logs/train.log", "dev": 1, "ino": 2, "offset": len(text.encode()),
        "digest": "ab" * 16}
    folded, _ = fold_job(_record("1332", JobState.RUNNING), raw, None, aliases={},
                         benign_patterns=())
    assert folded.summary == job.summary


FAILED_1331 = ("***** Running training *****\n  Total optimization steps = 100\n"
               "{'loss': 1.9, 'grad_norm': 0.8, 'learning_rate': 2e-05, 'epoch': 0.01}\n"
               "Traceback (most recent call last):\n  File \"train.py\", line 88, in <module>\n"
               "    trainer.train()\n"
               "RuntimeError: CUDA error: an illegal memory access was encountered\n")


def test_an_earlier_attempt_that_left_no_marker_keeps_its_own_lines() -> None:
    """A first attempt that ended on its own (a traceback, exit 1: no slurmstepd line), then a
    restart that hit its time limit, then a third attempt: the first reads its own lines (and
    what followed up to the later attempt's end, which no line marks), never only the third's
    (it read 'Resuming from checkpoint-6' only, or nothing with no third attempt yet)."""
    text = FAILED_1331 + FIRST + TIMEOUT_1332 + SECOND
    part = own_part(text, "1331")[0]
    assert part.startswith(FAILED_1331) and TIMEOUT_1332 not in part and SECOND not in part
    assert own_part(FAILED_1331 + FIRST + TIMEOUT_1332, "1331")[0].startswith(FAILED_1331)
    # the later attempts read as before (no line marks where the restart's lines begin)
    assert own_part(text, "1332")[0] == FAILED_1331 + FIRST + TIMEOUT_1332
    assert own_part(text, "1333")[0] == SECOND
    job = job_facts(_record("1331", JobState.FAILED), _collected(text), aliases={},
                    benign_patterns=())
    assert job.summary is not None and job.summary.faults
    assert any("illegal memory access" in (f.detail or f.excerpt) for f in job.summary.faults)
