"""OpenRLHF 0.9.0's Episode bar starts each episode at the run's global step.

In 0.9.0 alone (``openrlhf/trainer/ppo_trainer.py``, ``fit``) each episode's bar is
``tqdm(range(len(prompts_dataloader)), desc=f"Episode [{episode + 1}/{N}]", initial=steps)``,
``steps`` the next global step, and ``pbar.update()`` follows each step's generation (before
its ``✨ Global step`` line): episode 2 of a 2 x 20 run draws ``21/20``, ``22/20``, ... Read
as an in-episode count that was step 41+, and in the last episode a bar past its total read
as spent data: a run at step 25 of 40 showed ``25/25``. A bar past its total counts the run's
steps (the next one), never the episode's.
"""

from __future__ import annotations

from probes.logs.incremental import parse_increment
from probes.logs.parse import parse_log

RAY = "(PPOTrainer pid=2871) "


def _bar(episode: int, count: int, total: int, elapsed_s: int) -> str:
    pct = 100 * count // total
    return (f"{RAY}Episode [{episode}/2]: {pct:3d}%|{'█' * min(10, pct // 10):<10}| "
            f"{count}/{total} [{elapsed_s // 60:02d}:{elapsed_s % 60:02d}<12:00, 95.00s/it]\n")


def _step_line(step: int) -> str:
    return (f"{RAY}INFO 12-04 10:{step % 60:02d}:00 ppo_trainer.py:547] \u2728 Global step "
            f"{step}: {{'policy_loss': 0.0043, 'actor_lr': 1e-06, 'actor_grad_norm': 0.2058, "
            f"'entropy_loss': 0.8, 'reward': {0.2 + 0.01 * step:.2f}, 'response_length': 726.0}}\n")


def _v090(upto: int) -> str:
    out, steps = "", 1
    for episode in (1, 2):
        count = steps  # initial=steps
        out += _bar(episode, count, 20, 0)
        for done in range(1, 21):
            if steps > upto:
                return out
            count += 1
            out += _bar(episode, count, 20, done * 95) + _step_line(steps)
            steps += 1
    return out


def test_a_bar_past_its_total_is_no_spent_episode() -> None:
    for summary in (parse_log(_v090(25)), parse_increment(None, _v090(25).encode())[0]):
        assert summary.points[-1].step == 25
        assert summary.total_steps == 40
        assert summary.progress is not None
        assert summary.progress.total == 40 and summary.progress.current <= 26


def test_the_finished_run_reads_its_steps() -> None:
    summary = parse_log(_v090(40))
    assert summary.points[-1].step == 40 and summary.total_steps == 40
    assert summary.progress is not None and summary.progress.current == 40


def test_the_first_episode_reads_the_step_under_way_not_the_next() -> None:
    """Episode 1's bar starts at 1 (``initial=steps``) and is ``update()``d before each step's
    line: after ``Global step 5`` it reads 6/20 while step 6 is generated. That is step 5 done,
    as a 0-based bar's 5/20 is (0.8.10 and before): the row's Step read 6 (one ahead) until the
    second episode, where the count past its total already reads one back."""
    for upto in (1, 5, 19):
        text = _v090(upto)
        for summary in (parse_log(text), parse_increment(None, text.encode())[0]):
            assert summary.points[-1].step == upto
            assert summary.progress is not None
            assert (summary.progress.current, summary.progress.total) == (upto, 40)
        # the same, a step's generation under way in 0.8.11's plain lines
        plain = text.replace(RAY, "").replace("ppo_trainer.py:547]", "ppo_trainer.py:532]")
        summary = parse_log(plain)
        assert summary.progress is not None and summary.progress.current == upto


def test_a_bar_counted_from_zero_still_reads_its_count() -> None:
    """0.8.5-0.8.10: the same bar from 0 (no ``initial``), ``update()``d before the step's line:
    its count is the step."""
    out = _bar(1, 0, 20, 0)
    for step in range(1, 6):
        out += _bar(1, step, 20, step * 95) + _step_line(step)
    summary = parse_log(out)
    assert summary.progress is not None and summary.progress.current == 5
    assert summary.points[-1].step == 5
