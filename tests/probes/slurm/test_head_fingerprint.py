"""A long run's fingerprint: the config dump printed at start-up is read from the log's head.

The log is verl's REAL start-up output (``verl-0.9.1/config_a.log``: the pprint'ed config and
its first steps) followed by enough step lines (the fixture's own, renumbered) that the bounded
tail no longer holds the dump. It is read by the collector in process (the login node's code)
and assembled as a sweep assembles it.
"""

from __future__ import annotations

from pathlib import Path

from probes.models import JobState, SchedulerRecord
from probes.remote.collector import DEFAULT_HEAD_BYTES, collect
from probes.slurm.assemble import job_facts

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
TAIL = 1 << 20


def _long_log(tmp: Path, extra_steps: int) -> Path:
    start = (FIXTURES / "verl-0.9.1" / "config_a.log").read_text(encoding="utf-8")
    step = next(ln for ln in start.splitlines() if " step:5 - " in ln)
    body = "".join(step.replace(" step:5 - ", f" step:{n} - ", 1) + "\n"
                   for n in range(6, 6 + extra_steps))
    path = tmp / "verl_7.out"
    path.write_text(start + body, encoding="utf-8")
    return path


def _read(path: Path, **request: int) -> dict[str, object]:
    job = {"id": "7", "stdout": str(path), "workdir": str(path.parent), "offset": 0}
    job.update({k: v for k, v in request.items() if k == "offset"})
    req = {"tail_bytes": TAIL, "min_lines": 1,
           "jobs": [job], **{k: v for k, v in request.items() if k != "offset"}}
    answer: dict[str, object] = collect(req)["jobs"]["7"]  # type: ignore[assignment]
    return answer


def _record(path: Path) -> SchedulerRecord:
    return SchedulerRecord(cluster="c", job_id="7", name="rl-verl-long", user="me",
                           state=JobState.RUNNING, stdout_path=str(path))


def test_dump_only_in_the_head_still_gives_the_fingerprint(tmp_path: Path) -> None:
    """The tail (1 MiB) has steps only; the head's dump names the model and the geometry."""
    path = _long_log(tmp_path, extra_steps=2500)
    assert path.stat().st_size > 2 * TAIL
    collected = _read(path)
    log = collected["log"]
    assert isinstance(log, dict)
    assert "actor_rollout_ref" not in log["text"]  # the dump fell out of the tail
    assert len(log["head"].encode()) <= DEFAULT_HEAD_BYTES
    facts = job_facts(_record(path), collected, aliases={}, benign_patterns=())
    assert facts.summary is not None and facts.summary.fingerprint is not None
    fingerprint = facts.summary.fingerprint
    assert (fingerprint.trainer, fingerprint.model, fingerprint.rollouts_per_step) == (
        "verl", "Qwen/Qwen2.5-7B-Instruct", 256)
    assert facts.summary.points[-1].step == 2505  # the steps still come from the tail


def test_without_the_head_there_is_no_fingerprint(tmp_path: Path) -> None:
    """The same log with no head sent (``head_bytes = 0``): the tail alone has no dump."""
    path = _long_log(tmp_path, extra_steps=2500)
    collected = _read(path, head_bytes=0)
    assert "head" not in collected["log"]  # type: ignore[operator]
    facts = job_facts(_record(path), collected, aliases={}, benign_patterns=())
    assert facts.summary is not None and facts.summary.fingerprint is None


def test_head_is_not_resent_on_incremental_reads(tmp_path: Path) -> None:
    """A read from the bot's byte offset (only new bytes) carries no head."""
    path = _long_log(tmp_path, extra_steps=2500)
    collected = _read(path, offset=path.stat().st_size - 5000)
    log = collected["log"]
    assert isinstance(log, dict) and log["status"] == "ok" and "head" not in log


def test_a_short_log_sends_no_head(tmp_path: Path) -> None:
    """A log the tail holds whole is not sent twice: its dump is in the tail already."""
    path = _long_log(tmp_path, extra_steps=10)
    collected = _read(path)
    log = collected["log"]
    assert isinstance(log, dict) and "head" not in log
    facts = job_facts(_record(path), collected, aliases={}, benign_patterns=())
    assert facts.summary is not None and facts.summary.fingerprint is not None
