"""An OpenRLHF < 0.8.1 run resumed from a checkpoint: its first Episode bar counts what is left.

Up to 0.8.0 a resumed PPO run (``--load_checkpoint``) restores ``consumed_samples`` (the actor
prints ``consumed_samples: N``; 0.6 to 0.7.4 ``Loaded the checkpoint: <path>, consumed_samples:
N``), sets ``steps = consumed_samples // rollout_batch_size + 1`` and
``sampler.set_epoch(start_episode, consumed_samples=...)``, whose ``__len__`` is then the
batches *left* in that episode: ``tqdm(range(len(prompts_dataloader)), desc=f"Episode [{k}/{N}]")``
starts at 0 of the remaining batches (``openrlhf/trainer/ppo_trainer.py``, v0.8.0 ``fit``;
``openrlhf/utils/distributed_sampler.py``). So a run resumed at step 28 of 40 (2 episodes of
20) draws ``Episode [2/2]`` at 0/13, and read as a fresh episode gave step 14-26 of 26.

The step is ``consumed_samples // rollout_batch_size`` + the bar's count, and the full
episode ``(steps before + bar total) / k``, when the log prints ``rollout_batch_size`` (0.7.5+
print the args ``Namespace``); otherwise that first bar gives no step and no total.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from probes.logs.incremental import parse_increment
from probes.logs.parse import parse_log
from probes.models import LogSummary
from tests.probes.logs.pieces import fold_in_pieces

TRAINER = "(PPOTrainer pid=2871) "
ACTOR = "(ActorModelRayActor pid=3012) "
MTIME = datetime(2026, 12, 4, 11, 0, tzinfo=UTC)
NAMESPACE = ("Namespace(ref_num_nodes=1, ref_num_gpus_per_node=8, actor_num_nodes=1, "
             "vllm_num_engines=2, colocate_all_models=True, save_path='./ckpt', "
             "ckpt_path='./ckpt/checkpoints_ppo_ray', load_checkpoint=True, "
             "micro_train_batch_size=8, train_batch_size=128, micro_rollout_batch_size=16, "
             "rollout_batch_size=16, n_samples_per_prompt=8, num_episodes=2, max_epochs=1, "
             "prompt_max_len=1024, generate_max_len=1024, advantage_estimator='group_norm')\n")


def _bar(episode: int, count: int, total: int, elapsed_s: int, tail: str) -> str:
    pct = 100 * count // total
    filled = "\u2588" * (pct // 10)
    rate = "?it/s" if count == 0 else "95.00s/it"
    return (f"{TRAINER}Episode [{episode}/2]: {pct:3d}%|{filled:<10}| {count}/{total} "
            f"[{elapsed_s // 60:02d}:{elapsed_s % 60:02d}<12:00, {rate}{tail}]\n")


def _resumed(done_before: int, upto: int, *, namespace: bool = True,
             loaded_line: bool = False) -> str:
    """The resumed attempt's log: 2 episodes of 20 batches, ``done_before`` steps banked.
    Each step: ``set_postfix(status)`` at the count before it, then ``update()``."""
    consumed = done_before * 16
    out = NAMESPACE if namespace else ""
    out += f"{ACTOR}Loading the checkpoint: ./ckpt/checkpoints_ppo_ray/_actor\n"
    out += (f"{ACTOR}Loaded the checkpoint: ./ckpt/checkpoints_ppo_ray/_actor, consumed_samples: "
            f"{consumed}\n" if loaded_line else f"{ACTOR}consumed_samples: {consumed}\n")
    step = done_before + 1
    for episode in (done_before // 20 + 1, done_before // 20 + 2):
        if episode > 2:
            break
        left = 20 - done_before % 20 if episode == done_before // 20 + 1 else 20
        out += _bar(episode, 0, left, 0, "")
        for count in range(left):
            if step > upto:
                return out
            status = f", policy_loss=0.0185, reward={0.2 + 0.01 * step:.3g}, kl={0.001 * step:.3g}"
            out += _bar(episode, count, left, count * 95, status)
            out += _bar(episode, count + 1, left, (count + 1) * 95, status)
            step += 1
    return out


def _folded(text: str, pieces: int = 5) -> LogSummary:
    return fold_in_pieces(text, pieces, mtime=MTIME)


READS = pytest.mark.parametrize("read", [lambda t: parse_log(t, mtime=MTIME), _folded],
                                ids=["cold", "folded"])


@READS
@pytest.mark.parametrize("upto", [32, 40])
def test_resumed_episode_steps_count_from_the_checkpoint(read, upto: int) -> None:
    """Resumed at step 28 of 40 with ``rollout_batch_size=16`` printed: steps 28.., of 40."""
    summary = read(_resumed(27, upto))
    assert [p.step for p in summary.points] == list(range(28, upto + 1))
    assert summary.points[-1].values["reward"] == pytest.approx(0.2 + 0.01 * upto, abs=1e-3)
    assert summary.total_steps == 40
    assert summary.progress is not None
    assert (summary.progress.current, summary.progress.total) == (upto, 40)


@READS
def test_resumed_in_the_first_episode_then_the_next(read) -> None:
    """Resumed at step 6 (episode 1's bar counts 15 left), read in episode 2: 25 of 40."""
    summary = read(_resumed(5, 25, loaded_line=True))
    assert [p.step for p in summary.points] == list(range(6, 26))
    assert summary.total_steps == 40
    assert summary.progress is not None
    assert (summary.progress.current, summary.progress.total) == (25, 40)


@READS
def test_no_batch_size_printed_gives_no_step_from_the_resumed_bar(read) -> None:
    """Without ``rollout_batch_size`` the resumed bar's count is no step of the run and its
    total no episode's: the row claims neither (never 14-18 of 26)."""
    summary = read(_resumed(27, 32, namespace=False))
    assert summary.total_steps is None
    assert summary.progress is None
    assert summary.steps_unanchored
    assert summary.points[-1].values["reward"] == pytest.approx(0.2 + 0.01 * 32, abs=1e-3)


@READS
def test_a_fresh_run_printing_consumed_samples_zero_is_unchanged(read) -> None:
    """``consumed_samples: 0`` (a run with --load_checkpoint and no checkpoint yet) is no
    resume: the bar numbers the steps as before."""
    text = _resumed(0, 12)
    summary = read(text)
    assert [p.step for p in summary.points] == list(range(1, 13))
    assert summary.total_steps == 40 and not summary.steps_unanchored


@pytest.mark.parametrize("fold", [False, True], ids=["cold", "folded"])
def test_a_cut_tail_takes_the_resume_from_the_head(fold: bool) -> None:
    """A tail cut inside the resumed episode (the sweep reads the last 1 MiB, the collector
    sends the first 256 KiB beside it): the resume line, the batch size and the resumed bar's
    first redraw are in the head only, and still place the tail's steps."""
    text = _resumed(27, 36)
    cut = text.index("reward=0.5,")  # step 30's first redraw
    head, tail = text[:cut], text[cut:]
    if fold:
        summary, _ = parse_increment(None, tail.encode(), mtime=MTIME, log_start=False,
                                     head=head)
    else:
        summary = parse_log(tail, mtime=MTIME, log_start=False, head=head)
    assert [p.step for p in summary.points] == list(range(30, 37))
    assert summary.total_steps == 40
    assert summary.progress is not None
    assert (summary.progress.current, summary.progress.total) == (36, 40)
