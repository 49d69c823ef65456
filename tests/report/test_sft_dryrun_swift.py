"""ms-swift's per-step dict names its step: the history is at the trainer's steps.

ms-swift prints the HF Trainer's logs with ``'global_step/max_steps': 'N/T'`` added
(swift/trainers/patcher.py ``add_train_message``; its Megatron callback adds ``'iteration':
'N/T'``). Replayed on the real SLURM (tests/fixtures/sft-dryrun/swift_sft.log: logging_steps 5,
60 of 250 steps), jobtables job's history listed steps 3..12, the count of dicts, for dicts
printed at steps 15..60.
"""

from __future__ import annotations

from pathlib import Path

from probes.logs.parse import parse_log
from tests.report.factories import judge
from tests.report.test_judge_rl_rulebook import _from_log

LOG = Path(__file__).resolve().parents[1] / "fixtures" / "sft-dryrun" / "swift_sft.log"


def test_swift_history_is_at_the_logged_steps() -> None:
    summary = parse_log(LOG.read_bytes())
    assert [p.step for p in summary.points] == list(range(5, 61, 5))
    assert summary.total_steps == 250 and summary.progress is not None
    assert summary.progress.current == 60
    # the save spike at step 51 does not move the trailing rate (6.2 s/step)
    assert summary.sec_per_step is not None and 6.0 < summary.sec_per_step < 6.5


def test_swift_megatron_iteration_string_is_the_step() -> None:
    text = "\n".join(f"{{'loss': {1.5 - 0.01 * s}, 'grad_norm': 0.8, 'learning_rate': 1e-05, "
                     f"'iteration': '{s}/500', 'elapsed_time': '1m 2s', 'train_speed(s/it)': 3.1}}"
                     for s in range(10, 101, 10))
    assert [p.step for p in parse_log(text).points] == list(range(10, 101, 10))


def test_swift_run_reads_healthy() -> None:
    report = judge(_from_log(LOG.read_bytes(), name="sft-swift-qwen")).report
    assert (report.step, report.total_steps) == (60, 250)
    assert report.verdict == "healthy" and "ETA" in report.trend
