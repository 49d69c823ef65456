"""A log that goes on with a restarted run reads the newest run (its new segment).

A run and its restart appended to one file (``sbatch -o run.out --open-mode=append``, a requeued
job, a rerun with the same ``-o``) log their steps again from 1, or from the step their
checkpoint resumes at. The step counter going back starts a new segment: the old run's points
from that step on are no longer the run's, so the newest step, the history the Trend and the
collapse window read, and the incremental (warm) read all follow the new run. A run resumed
from a checkpoint keeps the old run's steps before it. prime-rl's trainer logs each step after
its orchestrator logged the next ones: there a trainer start line marks the restart.
"""

from __future__ import annotations

import random

from probes.logs.incremental import parse_increment
from probes.logs.parse import _parse_reference, parse_log
from probes.models import LogSummary
from tests.probes.logs.test_incremental import assert_same, cut, fold

RAY = "(TaskRunner pid=4242) "


def _verl_step(step: int, reward: float) -> str:
    """verl's console logger line (``step:N - key:value - ...``) for one step."""
    return (f"{RAY}step:{step} - actor/entropy:np.float64(0.61) - actor/pg_loss:"
            f"np.float64(-0.0113) - actor/grad_norm:np.float64(0.19) - training/global_step:"
            f"{step} - critic/score/mean:np.float64({reward}) - critic/rewards/mean:"
            f"np.float64({reward})\n")


def _verl_launch(total: int, resume: int | None = None) -> str:
    head = f"{RAY}Size of train dataloader: {total}, Size of val dataloader: 1\n"
    head += f"{RAY}Total training steps: {total}\n"
    if resume is None:
        head += f"{RAY}Training from scratch\n"
    else:
        folder = f"/ckpt/run1/global_step_{resume}"
        head += (f"{RAY}Load from checkpoint folder: {folder}\n"
                 f"{RAY}Setting global step to {resume}\n{RAY}Resuming from {folder}\n")
    return head


def _verl_run(first: int, last: int, reward: float) -> str:
    return "".join(_verl_step(step, reward) for step in range(first, last + 1))


def _reads(text: str) -> list[LogSummary]:
    """The cold read, the whole-tail reference, one increment, and folds over random cuts."""
    data = text.encode()
    rng = random.Random(7)
    reads = [parse_log(text), _parse_reference(text), parse_increment(None, data)[0]]
    for _ in range(3):
        reads.append(fold(cut(data, [rng.randrange(len(data)) for _ in range(12)]))[0])
    lines = data.splitlines(keepends=True)
    reads.append(fold(lines)[0])  # line by line, as a job prints it
    return reads


def _all_same(reads: list[LogSummary]) -> LogSummary:
    for other in reads[1:]:
        assert_same(other, reads[0])
    return reads[0]


def test_a_run_started_afresh_in_the_same_log_reads_its_own_steps() -> None:
    old = _verl_launch(40) + _verl_run(1, 31, 0.6)
    new = _verl_launch(40) + _verl_run(1, 5, 0.2)
    summary = _all_same(_reads(old + new))
    assert [p.step for p in summary.points] == [1, 2, 3, 4, 5]
    assert {p.values["reward"] for p in summary.points} == {0.2}


def test_a_run_resumed_from_a_checkpoint_keeps_the_steps_before_it() -> None:
    old = _verl_launch(40) + _verl_run(1, 31, 0.6)
    new = _verl_launch(40, resume=20) + _verl_run(21, 24, 0.2)
    summary = _all_same(_reads(old + new))
    steps = [p.step for p in summary.points]
    assert steps == list(range(1, 25))
    assert [p.values["reward"] for p in summary.points if p.step > 20] == [0.2] * 4
    assert {p.values["reward"] for p in summary.points if p.step <= 20} == {0.6}


def test_a_long_old_run_and_a_short_restart_read_the_restart() -> None:
    """More old steps than a summary keeps: still only the new run's."""
    old = _verl_launch(400) + _verl_run(1, 300, 0.6)
    new = _verl_launch(400) + _verl_run(1, 3, 0.2)
    summary = _all_same(_reads(old + new))
    assert [p.step for p in summary.points] == [1, 2, 3]


def test_a_restart_without_a_banner_is_told_by_its_step_going_back() -> None:
    """OpenRLHF's ``Global step N`` lines: a step below the highest logged."""
    def line(step: int, reward: float) -> str:
        return (f"(PPOTrainer pid=9) INFO 12-04 10:{step % 60:02d}:00 ppo_trainer.py:547] "
                f"\u2728 Global step {step}: {{'policy_loss': 0.004, 'actor_grad_norm': 0.2, "
                f"'reward': {reward}, 'response_length': 700.0}}\n")
    text = "".join(line(s, 0.5) for s in range(1, 13)) + "".join(line(s, 0.1) for s in (7, 8))
    summary = _all_same(_reads(text))
    assert [p.step for p in summary.points] == list(range(1, 9))
    assert [p.values["reward"] for p in summary.points][-2:] == [0.1, 0.1]


def _prime(step: int, trainer: bool, value: float) -> str:
    if trainer:
        return (f"10:00:{step % 60:02d}  SUCCESS Step {step} |   55.3s | Loss {value:.4f} | "
                f"Entropy 0.6189 | Grad. Norm 0.1451 | LR 1.00e-06\n")
    return (f"10:00:{step % 60:02d}  SUCCESS Step {step} |   41.2s | Reward {value:.4f} | "
            f"Trainable 248/256 (96.9%)\n")


def _prime_run(first: int, last: int, reward: float) -> str:
    """The orchestrator one step ahead of the trainer, as prime-rl logs them."""
    out = ("10:00:00     INFO Starting orchestrator loop (max_steps=50)\n"
           "10:00:00     INFO Starting training loop (max_steps=50)\n")
    out += _prime(first, False, reward)
    for step in range(first + 1, last + 1):
        out += _prime(step, False, reward) + _prime(step - 1, True, 0.01)
    return out + _prime(last, True, 0.01)


def test_prime_rl_restart_is_told_by_its_start_lines_not_by_the_trainer_lag() -> None:
    text = _prime_run(1, 20, 0.3) + _prime_run(1, 4, 0.7)
    summary = _all_same(_reads(text))
    assert [p.step for p in summary.points] == [1, 2, 3, 4]
    for point in summary.points:  # both halves of each new step, none of the old run's
        assert point.values["reward"] == 0.7 and "loss" in point.values


def test_prime_rl_trainer_lag_alone_starts_no_segment() -> None:
    summary = _all_same(_reads(_prime_run(1, 20, 0.3)))
    assert [p.step for p in summary.points] == list(range(1, 21))
    assert all("reward" in p.values and "loss" in p.values for p in summary.points)
