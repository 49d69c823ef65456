"""A restart appended to its old log is not warned about the old launch's traceback.

Replayed on the real SLURM (``sbatch -o run.out --open-mode=append``, the restart ``afterany``
the first attempt): the first attempt died on a traceback and exit 1, which leaves no
slurmstepd marker to end its part of the shared log (``probes.logs.attempts``), so the
running restart read the whole file and its row said ``traceback in log: RuntimeError: CUDA
error...`` (verdict warning, flag ``traceback``) while it was stepping healthily. The trainer's
start line printed again (verl's ``Total training steps``) marks the new launch
(``LogSummary.relaunch_line``); a live job's faults above it are the earlier launch's. The
ended attempt keeps its own traceback.
"""

from __future__ import annotations

from probes.models import JobState
from tests.probes.logs.test_restart_segment import _all_same, _reads, _verl_launch, _verl_run
from tests.report.factories import facts, judge, log, record

TRACEBACK = ("Traceback (most recent call last):\n"
             "  File \"/app/verl/trainer/main_ppo.py\", line 42, in main\n"
             "    run_ppo(config)\n"
             "RuntimeError: CUDA error: an illegal memory access was encountered\n")
OLD = _verl_launch(40) + _verl_run(1, 15, 0.6) + TRACEBACK


def _judged(text: str, state: JobState):
    summary = _all_same(_reads(text))  # cold, reference and folded reads agree
    job = facts(record("rl-verl-append", "1823", state), summary.points,
                log_fetch=log(text=text))
    return summary, judge(job.model_copy(update={"summary": summary}))


def test_the_running_restart_reads_no_traceback_of_the_launch_before() -> None:
    text = OLD + _verl_launch(40, resume=10) + _verl_run(11, 14, 0.9)
    summary, detail = _judged(text, JobState.RUNNING)
    assert summary.relaunch_line is not None
    assert [f.kind for f in summary.faults] == ["traceback"]  # the log still says it
    assert summary.faults[0].line_no < summary.relaunch_line
    assert "traceback" not in detail.report.flags
    assert detail.report.verdict == "healthy"
    assert detail.report.step == 14


def test_the_ended_attempt_keeps_its_own_traceback() -> None:
    text = OLD + _verl_launch(40, resume=10) + _verl_run(11, 14, 0.9)
    _, detail = _judged(text, JobState.FAILED)
    assert "traceback" in detail.report.flags
    assert detail.report.verdict == "failed"


def test_a_traceback_of_the_new_launch_is_still_its_own() -> None:
    text = OLD + _verl_launch(40, resume=10) + _verl_run(11, 14, 0.9) + TRACEBACK
    _, detail = _judged(text, JobState.RUNNING)
    assert "traceback" in detail.report.flags
    assert detail.report.verdict == "warning"


def test_one_launch_has_no_relaunch_line() -> None:
    summary, detail = _judged(_verl_launch(40) + _verl_run(1, 5, 0.6) + TRACEBACK,
                              JobState.RUNNING)
    assert summary.relaunch_line is None
    assert "traceback" in detail.report.flags


def _collected(tmp_path, text: str, tail_bytes: int, head_bytes: int) -> tuple[dict, str]:
    """The log written to a file and read as the collector reads a long one: its last
    ``tail_bytes`` (the cut first line dropped) and, beside them, its first ``head_bytes``."""
    from probes.remote.logread import read_tail

    path = tmp_path / "run.out"
    path.write_text(text)
    answer = read_tail(str(path), tail_bytes, 0, head_bytes=head_bytes)
    assert answer["offset"] > 0 and answer["head"]  # a cut tail, its head sent
    return answer, str(path)


def _cut_reads(answer: dict) -> list:
    """The cut tail read cold, by the reference and folded, each seeded with the head's part
    before the tail (``head_before``, as the sweep passes it)."""
    from probes.logs.incremental import parse_increment
    from probes.logs.parse import _parse_reference, head_before, parse_log
    from tests.probes.logs.test_incremental import cut, fold

    text, head = answer["text"], head_before(answer["head"], answer["offset"])
    data = text.encode()
    return [parse_log(text, log_start=False, head=head),
            _parse_reference(text, log_start=False, head=head),
            parse_increment(None, data, log_start=False, head=head)[0],
            fold(cut(data, list(range(0, len(data), 997))), log_start=False, head=head)[0]]


def _facts_of(answer: dict, state: JobState):
    from probes.slurm.assemble import job_facts

    return judge(job_facts(record("rl-verl-append", "1823", state), {"log": answer},
                           aliases={}, benign_patterns=()))


def test_a_cut_tail_with_one_start_line_under_a_relaunched_head(tmp_path) -> None:
    """A long log (over the collector's tail) of a restart appended to its old log: its tail
    holds the old run's last steps (20-400), its traceback, and ONE start line (the restart's,
    steps 11-14 after it); the first launch's start line is in the log's head only, which the
    collector sends beside the tail. The tail's start line is the trainer's second: the
    running restart does not take the old run's traceback as its own."""
    old = _verl_launch(400) + _verl_run(1, 400, 0.6) + TRACEBACK
    new = _verl_launch(400, resume=10) + _verl_run(11, 14, 0.9)
    answer, _ = _collected(tmp_path, old + new, tail_bytes=len((_verl_run(300, 400, 0.6)
                                                                + TRACEBACK + new).encode()),
                           head_bytes=4096)
    assert answer["text"].count("Total training steps") == 1
    assert "Total training steps" in answer["head"]
    summary = _all_same(_cut_reads(answer))
    assert summary.relaunch_line is not None
    assert [f.kind for f in summary.faults] == ["traceback"]
    assert summary.faults[0].line_no < summary.relaunch_line
    detail = _facts_of(answer, JobState.RUNNING)
    assert "traceback" not in detail.report.flags
    assert detail.report.verdict == "healthy" and detail.report.step == 14
    assert "traceback" in _facts_of(answer, JobState.FAILED).report.flags


def test_a_head_that_runs_into_the_tail_is_no_earlier_launch(tmp_path) -> None:
    """A log a little longer than the tail read: the head sent beside it runs into the tail,
    and its one start line is in both. Read once, it is the only launch, and what the log
    says above it (a traceback printed while setting up) stays the running job's own."""
    setup = "".join(f"(TaskRunner pid=1) setting up worker {n}\n" for n in range(8))
    text = setup + TRACEBACK + _verl_launch(400) + _verl_run(1, 30, 0.6)
    tail = len(text.encode()) - 100
    answer, _ = _collected(tmp_path, text, tail_bytes=tail, head_bytes=len(text.encode()))
    assert "Total training steps" in answer["head"] and "Total training steps" in answer["text"]
    summary = _all_same(_cut_reads(answer))
    assert summary.relaunch_line is None
    assert "traceback" in _facts_of(answer, JobState.RUNNING).report.flags


def test_the_collectors_cut_tail_of_a_long_relaunched_log(tmp_path) -> None:
    """Through the collector (in process, as on the login node: the last 1 MiB and the log's
    head), assembled cold (``job_facts``, the CLI) and folded (``fold_job``, the bot's warm
    sweeps): a 1.6 MiB log whose running restart's start line is the tail's only one."""
    from probes.remote import collector
    from probes.slurm.cursors import fold_job

    old = _verl_launch(8000) + _verl_run(1, 6800, 0.6) + TRACEBACK
    new = _verl_launch(8000, resume=6700) + _verl_run(6701, 6704, 0.9)
    path = tmp_path / "run.out"
    path.write_text(old + new)
    assert path.stat().st_size > (1 << 20) + (256 << 10)
    spec = {"id": "1823", "stdout": str(path), "workdir": str(tmp_path),
            "checkpoint_roots": [], "trial_roots": []}

    def collected(tracked: bool) -> dict:
        job = {**spec, "cursor": None} if tracked else spec
        answer = collector.collect({"tail_bytes": 1 << 20, "min_lines": 1, "jobs": [job]})
        return answer["jobs"]["1823"]

    running = record("rl-verl-append", "1823", JobState.RUNNING, stdout_path=str(path))
    cold = collected(False)
    assert cold["log"]["text"].count("Total training steps") == 1
    from probes.slurm.assemble import job_facts

    for read in (job_facts(running, cold, aliases={}, benign_patterns=()),
                 fold_job(running, collected(True), None, aliases={}, benign_patterns=())[0]):
        assert read.summary is not None and read.summary.relaunch_line is not None
        detail = judge(read)
        assert "traceback" not in detail.report.flags
        assert detail.report.verdict == "healthy" and detail.report.step == 6704
