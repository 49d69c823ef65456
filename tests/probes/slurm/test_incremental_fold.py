"""A log read sweep by sweep (resumed reads folded onto a state that went through its stored
JSON) gives the facts a cold read of the whole log gives, on real trainer logs grown at
arbitrary byte cuts (mid-line, mid-character): the collector and ``probes.slurm.cursors``
together, in process on real files (no SLURM needed)."""

from __future__ import annotations

import os
import random
from pathlib import Path
from typing import Any

import pytest

from probes.logs.excerpt import TALLY, cut_line
from probes.models import JobFacts, JobState, SchedulerRecord
from probes.remote import collector
from probes.slurm.assemble import job_facts
from probes.slurm.cursors import (
    RECENT_CHARS,
    LogState,
    decode_state,
    encode_state,
    fold_job,
    last_tally,
)
from report.failure_text import log_excerpt

FIX = Path(__file__).resolve().parents[2] / "fixtures"
LOGS = [
    "hf-transformers-5.24.0/sft_healthy.out", "hf-transformers-5.24.0/sft_nan.out",
    "trl-1.16.0/grpo_healthy.out", "trl-1.16.0/grpo_collapse.out",
    "trl-1.16.0/probe_corrupt.out", "torch-2.13.0/childfailed.out",
    "verl-0.4.1/console.log", "verl-0.9.1/console.log", "skyrl-rebuilt/console_v03_collapse.log",
    "megatron-rebuilt/args.log", "pytest-9.2.0/gpu_ci_failed.out", "verl-0.9.1/config_a.log",
]
MTIME = 1_790_000_000  # one mtime for every read: year-less stamps then read alike
RECORD = SchedulerRecord(cluster="c", job_id="7", name="run", state=JobState.RUNNING)


def same(a: object, b: object) -> bool:
    """Equal facts, a NaN equal to a NaN (a NaN loss is evidence: both must show it)."""
    return repr(a) == repr(b)


def read(log: Path, prior: LogState | None, *, tracked: bool = True,
         tail_bytes: int = 1 << 20) -> dict[str, Any]:
    """One collector read of ``log`` as job 7 (``tracked``: with a cursor, as the bot asks)."""
    spec: dict[str, Any] = {"id": "7", "stdout": str(log), "workdir": str(log.parent),
                            "checkpoint_roots": [], "trial_roots": []}
    if tracked:
        spec["cursor"] = prior.cursor.model_dump(mode="json") if prior else None
    answer = collector.collect({"tail_bytes": tail_bytes, "min_lines": 1, "jobs": [spec]})
    job: dict[str, Any] = answer["jobs"]["7"]
    return job


def warm(log: Path, prior: LogState | None, **kw: Any) -> tuple[JobFacts, LogState | None]:
    """A warm sweep of ``log``, the state stored and loaded again as Redis holds it."""
    record = RECORD.model_copy(update={"stdout_path": str(log)})
    facts, state = fold_job(record, read(log, prior, **kw), prior, aliases={},
                            benign_patterns=())
    if state is None:
        return facts, None
    stored = encode_state(state)
    assert stored is not None
    return facts, decode_state(stored)


def cold(log: Path, **kw: Any) -> JobFacts:
    """What the CLI's cold sweep makes of the log now (``parse_log`` on its tail)."""
    record = RECORD.model_copy(update={"stdout_path": str(log)})
    return job_facts(record, read(log, None, tracked=False, **kw), aliases={},
                     benign_patterns=())


def grow(log: Path, data: bytes, cuts: list[int], **kw: Any) -> tuple[JobFacts, LogState]:
    """Write ``data`` to ``log`` piece by piece (ending at each cut), a warm sweep each time."""
    prior: LogState | None = None
    facts: JobFacts | None = None
    start = 0
    for end in [*cuts, len(data)]:
        with log.open("ab") as fh:
            fh.write(data[start:end])
        os.utime(log, (MTIME, MTIME))
        facts, prior = warm(log, prior, **kw)
        assert prior is not None
        start = end
    assert facts is not None and prior is not None
    return facts, prior


@pytest.mark.parametrize("name", LOGS)
def test_sweep_by_sweep_equals_a_cold_read_of_the_whole_log(tmp_path: Path, name: str) -> None:
    """Grown at six random byte cuts (seeded), swept after each: the last warm sweep's summary
    is the cold read's, and so is what it keeps of the log (last lines, fault contexts,
    tally, markers: ``probes.logs.excerpt``) but for the offset it read from."""
    data = (FIX / name).read_bytes()
    cuts = sorted(random.Random(name).sample(range(1, len(data)), 6))
    log = tmp_path / "run.out"
    facts, state = grow(log, data, cuts)
    whole = cold(log)
    assert same(facts.summary, whole.summary)
    assert facts.log is not None and whole.log is not None
    assert facts.log.model_copy(update={"offset": whole.log.offset}) == whole.log
    assert len(state.recent) <= RECENT_CHARS
    assert state.cursor.offset == len(data)


def test_the_state_keeps_the_latest_lines_with_their_offset(tmp_path: Path) -> None:
    """The state's window is the log's last lines from a line start, and knows at which byte
    and line of the file it starts (an ASCII log: exact)."""
    data = (FIX / "verl-0.9.1/console.log").read_bytes()
    log = tmp_path / "run.out"
    _, state = grow(log, data, [40_000, 70_000, 90_000])
    assert data[state.recent_offset:].decode() == state.recent
    assert data[state.recent_offset - 1:state.recent_offset] == b"\n"
    assert state.recent_line == data[:state.recent_offset].count(b"\n") + 1
    assert 0 < len(state.recent) <= RECENT_CHARS


def test_a_head_only_fingerprint_survives_warm_sweeps(tmp_path: Path) -> None:
    """A config dump above a cut tail is read from the head on the cold read only; warm
    sweeps keep showing it (the state carries it), as the cold read does."""
    data = (FIX / "verl-0.9.1/config_a.log").read_bytes()
    log = tmp_path / "run.out"
    facts, state = grow(log, data, [len(data) - 3000, len(data) - 1000], tail_bytes=16 << 10)
    whole = cold(log, tail_bytes=16 << 10)
    assert whole.summary is not None and whole.summary.fingerprint is not None
    assert facts.summary is not None and facts.summary.fingerprint == whole.summary.fingerprint
    assert state.head_fingerprint == whole.summary.fingerprint


def test_a_fresh_read_starts_a_new_fold(tmp_path: Path) -> None:
    """After a rotation the old carry is not used: the facts are the new file's alone."""
    log = tmp_path / "run.out"
    _, state = grow(log, (FIX / "trl-1.16.0/grpo_collapse.out").read_bytes(), [9000])
    log.rename(tmp_path / "run.out.1")
    log.write_bytes((FIX / "hf-transformers-5.24.0/sft_healthy.out").read_bytes())
    os.utime(log, (MTIME, MTIME))
    facts, after = warm(log, state)
    assert same(facts.summary, cold(log).summary) and after is not None
    assert after.cursor.ino != state.cursor.ino


def test_an_ended_job_gets_no_state(tmp_path: Path) -> None:
    """An untracked read (an ended job: no cursor asked) gives the cold facts and no state."""
    log = tmp_path / "run.out"
    log.write_bytes((FIX / "trl-1.16.0/grpo_healthy.out").read_bytes())
    record = RECORD.model_copy(update={"stdout_path": str(log), "state": JobState.COMPLETED})
    facts, state = fold_job(record, read(log, None, tracked=False), None, aliases={},
                            benign_patterns=())
    assert state is None and same(facts.summary, cold(log).summary)


def test_a_warm_excerpt_shows_the_faults_own_lines(tmp_path: Path) -> None:
    """A crash below a long healthy log: the warm sweep shows only its latest lines, yet its
    excerpt is the cold read's (the text's first line is numbered as the fold numbers it)."""
    healthy = (FIX / "verl-0.9.1/console.log").read_bytes()
    crash = (FIX / "torch-2.13.0/childfailed.out").read_bytes()
    log = tmp_path / "run.out"
    facts, state = grow(log, healthy + crash, [len(healthy) - 500, len(healthy) + 100])
    whole = cold(log)
    assert facts.summary is not None and facts.summary.faults
    assert log_excerpt(facts) == log_excerpt(whole) != ""
    assert state.recent_line > 1 and state.contexts


def test_what_was_read_above_the_window_is_still_shown(tmp_path: Path) -> None:
    """A crash's context, a tally line and an agent marker printed early, then far more than
    the state's window of other lines: the warm sweep keeps them as the cold read finds them
    anywhere in the tail."""
    crash = (FIX / "torch-2.13.0/childfailed.out").read_bytes()
    early = b"agent_config=terminus-2\npushing 6,977 rows to the hub\n" + crash
    filler = b"".join(b"[rank0] still alive %d\n" % n for n in range(3000))
    log = tmp_path / "run.out"
    facts, state = grow(log, early + filler, [len(early), len(early) + 30_000])
    whole = cold(log)
    assert facts.log is not None and whole.log is not None
    assert len(filler) > 2 * RECENT_CHARS and state.recent_line > 100
    assert whole.log.contexts and whole.log.tally_line and whole.log.agent_marked
    assert facts.log.model_copy(update={"offset": whole.log.offset}) == whole.log
    assert log_excerpt(facts) == log_excerpt(whole)


def test_an_unchanged_log_reuses_its_summary_until_it_changes(tmp_path: Path) -> None:
    """In one process, a sweep finding nothing appended (same mtime) keeps the state and the
    summary it had; a touched or grown log is folded again, still as a cold read."""
    log = tmp_path / "run.out"
    data = (FIX / "trl-1.16.0/grpo_healthy.out").read_bytes()
    log.write_bytes(data[:20_000])
    os.utime(log, (MTIME, MTIME))
    record = RECORD.model_copy(update={"stdout_path": str(log)})

    def sweep(prior: LogState | None) -> tuple[JobFacts, LogState | None]:
        return fold_job(record, read(log, prior), prior, aliases={}, benign_patterns=())

    first, state = sweep(None)
    again, kept = sweep(state)
    assert kept is state and again.summary is first.summary
    os.utime(log, (MTIME + 60, MTIME + 60))
    touched, refolded = sweep(kept)
    assert refolded is not state and same(touched.summary, cold(log).summary)
    with log.open("ab") as fh:
        fh.write(data[20_000:])
    grown, _ = sweep(refolded)
    assert same(grown.summary, cold(log).summary)


def test_unchanged_sweeps_keep_what_a_stored_state_keeps(tmp_path: Path) -> None:
    """Sweeps finding nothing appended, again and again in one process, keep of the log
    (excerpts, contexts read above the window, tally, markers) what a sweep resuming the same
    state from its stored JSON keeps (it folds the nothing appended, reusing nothing)."""
    crash = (FIX / "torch-2.13.0/childfailed.out").read_bytes()
    early = b"agent_config=terminus-2\npushing 6,977 rows to the hub\n" + crash
    filler = b"".join(b"[rank0] still alive %d\n" % n for n in range(3000))
    log = tmp_path / "run.out"
    _, state = grow(log, early + filler, [len(early), len(early) + 30_000])
    assert state.recent_line > 100 and state.contexts
    record = RECORD.model_copy(update={"stdout_path": str(log)})

    def sweep(prior: LogState) -> tuple[JobFacts, LogState | None]:
        return fold_job(record, read(log, prior), prior, aliases={}, benign_patterns=())

    first, live = sweep(state)
    assert live is not None
    stored = decode_state(encode_state(live) or "")
    assert stored is not None
    expected, _ = sweep(stored)
    for _ in range(3):
        again, kept = sweep(live)
        assert kept is live and again.summary is first.summary
        assert again.log == expected.log and same(again.summary, expected.summary)


@pytest.mark.parametrize("text", [
    "", "no tally\n", "12 passed\nthen an error\n", "x\r3 failed, 2 passed\rtail\n",
    "pushing 6,977 rows\n" + "error: 1.5\n" * 50, "İstanbul 4 files\nİ\n",
    "1 passed\n2 passed\n", "7 passed" + "x" * 600,
])
def test_last_tally_is_the_last_matching_line(text: str) -> None:
    """The gated search finds what a line-by-line regex finds (lines end at \\n and \\r)."""
    lines = text.replace("\r", "\n").split("\n")
    want = next((cut_line(ln) for ln in reversed(lines) if TALLY.search(ln)), None)
    assert last_tally(text) == want


@pytest.mark.parametrize("change", ["rotate", "truncate"])
def test_bar_less_dicts_after_a_rotation_claim_no_step(tmp_path: Path, change: str) -> None:
    """HF Trainer dicts with no progress bar (``disable_tqdm``) are numbered by their count
    from the log's first byte. After the log was rotated (``mv`` and a new file) or truncated
    under the running job, the new file's first byte is not the run's: its dicts counted from
    1 again are no steps of the run (the bot would merge them into the stored history by step
    and keep showing the old file's newest point). Replayed on the real SLURM with the bot's
    sweeper and Redis (sft-rot: 31 dicts, then a rotation and 5 new ones): the row kept
    step 31 and its loss 1.4 while the log read 9.54."""
    log = tmp_path / "run.out"
    old = "".join(f"{{'loss': 1.{i:02d}, 'grad_norm': 0.5, 'learning_rate': 1e-05, "
                  f"'epoch': 0.{i:02d}}}\n" for i in range(10, 41)).encode()
    _, state = grow(log, old, [len(old) // 2])
    if change == "rotate":
        log.rename(tmp_path / "run.out.1")
    else:
        log.write_bytes(b"")
    log.write_bytes("".join(f"{{'loss': 9.{i:02d}, 'grad_norm': 0.9, 'learning_rate': 1e-05, "
                            f"'epoch': 0.{i:02d}}}\n" for i in range(50, 55)).encode())
    os.utime(log, (MTIME, MTIME))
    facts, after = warm(log, state)
    assert facts.summary is not None and after is not None
    assert facts.summary.points[-1].values["loss"] == 9.54
    assert facts.summary.steps_unanchored


def test_a_restart_below_the_points_kept_is_read_afresh_next_sweep(tmp_path: Path) -> None:
    """A run restarted in the same log back below the 32 points the fold keeps: the cold
    read keeps the old run's points below the resume step, which the fold dropped long ago
    (``LogCarry.afresh``). That sweep keeps no state, and the next reads the log afresh, as a
    rotated one: the history ``jobtables job`` shows."""
    from tests.probes.logs.test_nemo1_bar import _mixed_log

    data, log = _mixed_log(142, 600), tmp_path / "job.out"
    log.write_bytes(data[:51611])
    _, state = warm(log, None)
    assert state is not None and not state.carry.afresh
    log.write_bytes(data)
    _, after = warm(log, state)
    assert after is None
    facts, again = warm(log, after)
    assert again is not None and facts.summary is not None
    expected = cold(log).summary
    assert expected is not None and expected.points[0].step < 3
    assert [p.step for p in facts.summary.points] == [p.step for p in expected.points]
