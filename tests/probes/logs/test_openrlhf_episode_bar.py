"""OpenRLHF's ``Episode [k/N]`` bar gives the run's total steps, cold or folded.

OpenRLHF's PPO driver draws one tqdm bar a episode, ``tqdm(range(len(prompts_dataloader)),
desc=f"Episode [{episode + 1}/{num_episodes}]")``, and logs each step as ``✨ Global step N:
{status}`` (>= 0.8.5). The step lines were read, the bar was not: every OpenRLHF row read
``27/—``. What one count of the bar is depends on the version:

- 0.8.5 to 0.9.4 (and before): the dataloader yields rollout batches, ``pbar.update()`` once a
  step: the bar's total is the episode's steps;
- 0.9.5 and later: the dataloader yields single prompts, ``pbar.update(prompts_consumed)``
  after each step: the bar's total is the episode's prompts (an example count, CONTRACT §3),
  and it advances ``rollout_batch_size`` a step.

So the run's total is the episodes x the episode's total over what the bar advances a step (the
median of its moves); none until it has moved once (no example count is ever a total).
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from probes.logs.parse import parse_log
from probes.models import LogSummary
from tests.probes.logs.pieces import fold_in_pieces

RAY = "(PPOTrainer pid=2871) "
MTIME = datetime(2026, 12, 4, 11, 0, tzinfo=UTC)


def _status(step: int) -> str:
    return ("{'policy_loss': 0.0043, 'actor_lr': 1e-06, 'actor_grad_norm': 0.2058, "
            f"'entropy_loss': {0.9 - 0.005 * step:.4f}, 'ppo_clip_ratio': 0.0024, "
            f"'kl': 0.0{step:02d}, 'reward': {0.2 + 0.01 * step:.2f}, 'response_length': 726.0}}")


def _step_line(step: int) -> str:
    minute = 1 + (step * 95) // 60
    return (f"{RAY}INFO 12-04 {10 + minute // 60:02d}:{minute % 60:02d}:{step * 95 % 60:02d} "
            f"ppo_trainer.py:547] \u2728 Global step {step}: {_status(step)}\n")


def _bar(episode: int, count: int, total: int, elapsed_s: int, per_it: str) -> str:
    pct = 100 * count // total
    filled = "\u2588" * (pct // 10)
    return (f"{RAY}Episode [{episode}/2]: {pct:3d}%|{filled:<10}| {count}/{total} "
            f"[{elapsed_s // 60:02d}:{elapsed_s % 60:02d}<12:00, {per_it}]\n")


def _head(upto: int, prompts: int = 1280, batch: int = 64) -> str:
    """>= 0.9.5: the bar counts prompts, moved by ``batch`` after each step's line."""
    per_episode = prompts // batch
    out, step = "", 1
    for episode in (1, 2):
        out += _bar(episode, 0, prompts, 0, "?it/s")
        for done in range(1, per_episode + 1):
            if step > upto:
                return out
            out += _step_line(step)
            out += _bar(episode, done * batch, prompts, done * 95, " 1.48s/it")
            step += 1
    return out


def _v09(upto: int, per_episode: int = 20) -> str:
    """0.8.5 to 0.9.4: the bar counts rollout batches, ``update()`` before each step's line."""
    out, step = "", 1
    for episode in (1, 2):
        out += _bar(episode, 0, per_episode, 0, "?it/s")
        for done in range(1, per_episode + 1):
            if step > upto:
                return out
            out += _bar(episode, done, per_episode, done * 95, "95.00s/it")
            out += _step_line(step)
            step += 1
    return out


def _folded(text: str, pieces: int = 6) -> LogSummary:
    return fold_in_pieces(text, pieces, mtime=MTIME)


@pytest.mark.parametrize("read", [lambda t: parse_log(t, mtime=MTIME), _folded],
                         ids=["cold", "folded"])
@pytest.mark.parametrize(("text", "last_step"), [
    pytest.param(_head(27), 27, id="prompts-bar-episode-2"),
    pytest.param(_head(5), 5, id="prompts-bar-episode-1"),
    pytest.param(_v09(27), 27, id="batches-bar-episode-2"),
])
def test_episode_bar_gives_the_total(read, text: str, last_step: int) -> None:
    summary = read(text)
    assert summary.points[-1].step == last_step
    assert summary.total_steps == 40  # 2 episodes x 20 steps, never 2 x 1280 prompts
    assert summary.progress is not None and summary.progress.total == 40
    assert summary.progress.current <= last_step + 1
    assert "openrlhf" in summary.formats
    assert summary.sec_per_step == pytest.approx(95, rel=0.05)  # a step's, not a prompt's
    assert summary.progress.sec_per_it == pytest.approx(95, rel=0.05)


def test_a_bar_that_has_not_moved_gives_no_total() -> None:
    """Before its first move the bar's unit is unknown: its 1280 prompts are no total."""
    summary = parse_log(_bar(1, 0, 1280, 0, "?it/s"), mtime=MTIME)
    assert summary.total_steps is None and summary.progress is None


def test_the_train_epoch_bar_is_no_training_progress() -> None:
    """The actor's per-step ``Train epoch [1/1]`` bar (micro-batches) is never the run's."""
    text = "".join(f"{RAY}Train epoch [1/1]: {k * 10:3d}%|          | {k}/10 [00:0{k}<00:09, "
                   f" 1.00s/it, pg=0.01, rm=0.4]\n" for k in range(1, 10))
    summary = parse_log(_head(3) + text, mtime=MTIME)
    assert summary.total_steps == 40


def _v06(upto: int, per_episode: int = 20, *, dead: bool = False) -> str:
    """Before 0.8.5: no step line; the step's status is the bar's postfix, ``set_postfix(status)``
    (a redraw at the count before the step) then ``update()`` (the same postfix, one on).
    ``dead``: every step's status the same (tqdm prints 3 significant digits)."""
    out, step = "", 1
    for episode in (1, 2):
        out += _bar(episode, 0, per_episode, 0, "?it/s")
        for done in range(per_episode):
            if step > upto:
                return out
            status = (f", policy_loss=0.0185, actor_lr=1e-6, reward={0.2 + 0.01 * step:.3g}, "
                      f"kl={0.001 * step:.3g}, response_length=727]")
            if dead:
                status = ", policy_loss=0, actor_lr=1e-6, reward=0, kl=0, response_length=1]"
            for count in (done, done + 1):
                rate = "?it/s" if count == 0 else "95.00s/it"
                out += _bar(episode, count, per_episode, count * 95, rate)[:-2] + status + "\n"
            step += 1
    return out


@pytest.mark.parametrize("read", [lambda t: parse_log(t, mtime=MTIME), _folded],
                         ids=["cold", "folded"])
@pytest.mark.parametrize("upto", [27, 3])
def test_episode_bar_postfix_is_the_step_before_085(read, upto: int) -> None:
    """OpenRLHF < 0.8.5 prints a step's status only as the Episode bar's postfix: the run sat
    in "Filling buffer" at 27/40. Each new postfix is the step one past the count it is drawn
    at; the update's redraw repeats it (no step of its own)."""
    summary = read(_v06(upto))
    assert [p.step for p in summary.points] == list(range(1, upto + 1))
    last = summary.points[-1].values
    assert last["reward"] == pytest.approx(0.2 + 0.01 * upto, abs=1e-3)
    assert last["policy_loss"] == pytest.approx(0.0185) and last["learning_rate"] == 1e-6
    assert summary.total_steps == 40 and summary.progress is not None
    assert summary.progress.current == upto
    assert "openrlhf" in summary.formats


def test_other_bars_postfix_is_no_step() -> None:
    """Only OpenRLHF's Episode bar carries a step's status: an accelerate loop's postfix
    (``lr=..., step_loss=...``) or the actor's ``Train epoch`` bar (``pg=..., rm=...``) is none."""
    text = "".join(f"{RAY}Train epoch [1/1]: {k * 10:3d}%|          | {k}/10 [00:0{k}<00:09, "
                   f" 1.00s/it, policy_loss=0.01, reward=0.4]\n" for k in range(1, 10))
    text += "".join(f"Steps: {k}%|          | {k}/100 [00:0{k % 10}<01:39,  1.00s/it, lr=0.0001, "
                    f"reward=0.5]\n" for k in range(1, 10))
    assert parse_log(text, mtime=MTIME).points == ()


def test_a_finished_episode_run_totals_its_logged_steps() -> None:
    """Under dynamic filtering a step consumes more prompts than ``rollout_batch_size`` (it
    redraws filtered ones), so the median move only estimates the steps. Once the last
    episode's bar has reached its total the data is spent: the run's total is the steps it
    logged (a finished run never reads "short of total")."""
    moves = [64, 96, 64, 128, 64, 80, 64, 64, 96, 64, 64, 80, 64, 128, 64, 96]  # 1280 prompts
    out, step = "", 1
    for episode in (1, 2):
        out += _bar(episode, 0, 1280, 0, "?it/s")
        count = 0
        for move in moves:
            out += _step_line(step)
            count += move
            out += _bar(episode, count, 1280, step * 95, " 1.20s/it")
            step += 1
    for summary in (parse_log(out, mtime=MTIME), _folded(out)):
        assert summary.points[-1].step == 32
        assert summary.total_steps == 32
        assert summary.progress is not None and summary.progress.current == 32


@pytest.mark.parametrize("read", [lambda t: parse_log(t, mtime=MTIME), _folded],
                         ids=["cold", "folded"])
@pytest.mark.parametrize(("text", "upto"), [
    pytest.param(_v06(12, dead=True), 12, id="same-status-every-step"),
    pytest.param(_v06(1500, 1000), 1500, id="long-tail"),  # read back from its end
])
def test_each_postfix_step_once_even_when_they_read_the_same(read, text: str,
                                                             upto: int) -> None:
    """Two steps' postfixes can print the same (a dead run's zeros; 3 significant digits):
    the count's move, not the text, tells the update's redraw from the next step's."""
    steps = [p.step for p in read(text).points]
    assert steps[-1] == upto and steps == list(range(upto - len(steps) + 1, upto + 1))


@pytest.mark.parametrize("read", [lambda t: parse_log(t, mtime=MTIME), _folded],
                         ids=["cold", "folded"])
def test_the_last_step_under_way_keeps_the_total(read) -> None:
    """0.8.1 to 0.9.0 ``update()`` the bar right after a step's generation, before its training
    and its ``Global step`` line: the last episode's bar is full while the last step still
    trains. That bar leads the steps logged by one (a step under way), so the run's total
    stays 40, not the 39 logged (the still-running run read 39/39)."""
    text = _v09(40)
    running = text[:text.index(_step_line(40))]
    summary = read(running)
    assert summary.points[-1].step == 39
    assert summary.total_steps == 40
    assert summary.progress is not None and summary.progress.total == 40
    done = read(text)
    assert done.total_steps == 40 and done.progress is not None and done.progress.current == 40


_REAL_TQDM = (Path(__file__).parents[2] / "fixtures" / "tqdm-4.70.1"
              / "openrlhf_episode_postfix.out").read_bytes().decode()  # its \r kept
"""OpenRLHF <= 0.8.0's loop drawn by real tqdm 4.70.1 (generators/openrlhf_episode_tqdm.py):
3 episodes x 6 steps; episode 2's bar at position 1 (ESC[A), each old bar closed (redrawn
full with its last status) after the next one's first redraw, the last at the end."""


@pytest.mark.parametrize("read", [lambda t: parse_log(t, mtime=MTIME), _folded],
                         ids=["cold", "folded"])
def test_real_tqdm_episode_bars_every_step_once(read) -> None:
    """Episode 2's bar, made while episode 1's was alive, is drawn at tqdm position 1: it was
    taken for an inner loop's bar and dropped (steps 7 to 12 lost), and the bars' close()
    redraws (full, unmoved) each read as a step past them (7 and 19, phantoms of 6 and 18)."""
    summary = read(_REAL_TQDM)
    assert [p.step for p in summary.points] == list(range(1, 19))
    assert [p.values["reward"] for p in summary.points] == pytest.approx(
        [0.2 + 0.01 * step for step in range(1, 19)], abs=1e-3)
    assert summary.total_steps == 18
    assert summary.progress is not None and summary.progress.current == 18


@pytest.mark.parametrize("read", [lambda t: parse_log(t, mtime=MTIME), _folded],
                         ids=["cold", "folded"])
def test_real_tqdm_second_episode_under_way(read) -> None:
    """Read in episode 2 (after step 9's status): 9 of 18, the position-1 bar followed."""
    cut = _REAL_TQDM.index("reward=0.3,")  # step 10's set_postfix
    summary = read(_REAL_TQDM[:_REAL_TQDM.rindex("\r", 0, cut)])
    assert [p.step for p in summary.points] == list(range(1, 10))
    assert summary.total_steps == 18
    assert summary.progress is not None and summary.progress.current == 9


@pytest.mark.parametrize("read", [lambda t: parse_log(t, mtime=MTIME), _folded],
                         ids=["cold", "folded"])
def test_the_old_episode_bars_close_is_no_move(read) -> None:
    """As real tqdm draws an episode boundary (see ``_REAL_TQDM``): episode 2's bar, at
    position 1 (ESC[A), first, then episode 1's bar's close() redrawn full. Its 1280 after
    the new bar's 0 is no move of 1280 prompts (it read a step of 1280 prompts: total 2);
    until the new bar has moved the total is unknown, never a wrong one."""
    text = _head(20)
    text += (f"{RAY}Episode [2/2]:   0%|          | 0/1280 [00:00<?, ?it/s]\x1b[A"
             f"\rEpisode [1/2]: 100%|\u2588\u2588\u2588\u2588\u2588\u2588\u2588\u2588\u2588\u2588"
             f"| 1280/1280 [31:40<00:00,  1.48s/it]\n")
    summary = read(text)
    assert summary.points[-1].step == 20
    assert summary.total_steps in (None, 40)  # the new bar has not moved: no unit yet
    assert summary.progress is None or summary.progress.total == 40
    for step in (21, 22):
        text += (_step_line(step) + _bar(2, (step - 20) * 64, 1280, (step - 20) * 95,
                                         " 1.48s/it")[:-1] + "\x1b[A\n")
        summary = read(text)
        assert summary.total_steps in (None, 40)
    assert summary.total_steps == 40
    assert summary.progress is not None and summary.progress.current == 22
