"""A long HF Trainer run with ``disable_tqdm=True`` (dicts only, no bar) read as the sweeps read
it: the collector in process (the login node's code) sends the last 1 MiB and the log's head,
the CLI assembles it cold (``job_facts``), the bot folds it read by read (``fold_job``). The
dicts' steps came from counting from the tail's first line (step ~14,034 of a 20,000-step
run, no total, the same on every sweep as the log grew)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from probes.models import JobFacts, JobState, SchedulerRecord
from probes.remote import collector
from probes.slurm.assemble import job_facts
from probes.slurm.cursors import LogState, decode_state, encode_state, fold_job
from tests.probes.logs.test_hf_cut_tail import _log

RECORD = SchedulerRecord(cluster="c", job_id="7", name="sft-long", state=JobState.RUNNING)


def _read(log: Path, prior: LogState | None, *, tracked: bool) -> dict[str, Any]:
    spec: dict[str, Any] = {"id": "7", "stdout": str(log), "workdir": str(log.parent),
                            "checkpoint_roots": [], "trial_roots": []}
    if tracked:
        spec["cursor"] = prior.cursor.model_dump(mode="json") if prior else None
    answer = collector.collect({"tail_bytes": 1 << 20, "min_lines": 1, "jobs": [spec]})
    job: dict[str, Any] = answer["jobs"]["7"]
    return job


def _cold(log: Path) -> JobFacts:
    record = RECORD.model_copy(update={"stdout_path": str(log)})
    return job_facts(record, _read(log, None, tracked=False), aliases={}, benign_patterns=())


def _warm(log: Path, prior: LogState | None) -> tuple[JobFacts, LogState | None]:
    record = RECORD.model_copy(update={"stdout_path": str(log)})
    facts, state = fold_job(record, _read(log, prior, tracked=True), prior, aliases={},
                            benign_patterns=())
    stored = encode_state(state) if state is not None else None
    return facts, decode_state(stored) if stored is not None else None


def _last(facts: JobFacts) -> tuple[int | None, int | None, bool]:
    summary = facts.summary
    assert summary is not None and summary.points
    return summary.points[-1].step, summary.total_steps, summary.steps_unanchored


def test_long_bar_less_run_reads_its_step_from_the_heads_banner(tmp_path: Path) -> None:
    """Cold and folded (a first read of 18,000 steps, then 2,000 more): step 20,000 of
    100,000, from the banner in the head (the tail holds none)."""
    text = _log(20_000)
    cut = text.index("{'loss': 1.910000")  # step 18,000's dict
    log = tmp_path / "sft.out"
    log.write_text(text[:cut])
    _, state = _warm(log, None)
    assert state is not None
    log.write_text(text)
    assert _last(_cold(log)) == (20_000, 100_000, False)
    folded, _ = _warm(log, state)
    assert _last(folded) == (20_000, 100_000, False)


def test_without_banner_a_checkpoint_save_anchors_the_dicts(tmp_path: Path) -> None:
    """No banner nor epoch: the last ``Saving model checkpoint to .../checkpoint-N`` and the
    head's ``logging_steps`` give the steps; with nothing at all, no step is claimed."""
    log = tmp_path / "sft.out"
    log.write_text(_log(200_000, every=10, banner=False, epoch=False, saves=500))
    assert _last(_cold(log))[::2] == (200_000, False)
    assert _last(_warm(log, None)[0])[::2] == (200_000, False)
    bare = _log(20_000, banner=False, epoch=False)
    log.write_text(bare[bare.index(")\n") + 2:])  # no TrainingArguments printed either
    assert _last(_cold(log))[2] and _last(_warm(log, None)[0])[2]
