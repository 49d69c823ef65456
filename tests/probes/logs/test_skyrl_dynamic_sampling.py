"""SkyRL with dynamic sampling: its training bar counts batches, and the step is the global step.

With ``trainer.algorithm.dynamic_sampling.type=filter`` (DAPO) SkyRL's ``Training Batches
Processed`` bar is advanced for a batch that trains nothing (``Resample batch K, continue
sampling...``), so it runs ahead of ``global_step``, which names the step dicts and the
``global_step_N`` checkpoints. Read as the step, a run at global step 45 (bar 60/100) showed
step 60 with its newest checkpoint, global_step_45, "15 steps behind" (the fixtures:
``tests/fixtures/skyrl-dapo-rebuilt``, rebuilt from SkyRL's trainer).
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

from probes.logs.parse import parse_log
from probes.models import LogSummary
from tests.probes.logs.pieces import fold_in_pieces

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "skyrl-dapo-rebuilt"
REWARD_RE = re.compile(r"reward/avg_raw_reward: ([0-9.]+)")


def _text(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


def _rewards(text: str) -> list[float]:
    """The reward line's ``avg_raw_reward`` of each step that trained, in order (step 1 first)."""
    return [float(found) for found in REWARD_RE.findall(text)]


READS = pytest.mark.parametrize("read", [parse_log, lambda t: fold_in_pieces(t, 7)],
                                ids=["whole", "folded"])


@READS
@pytest.mark.parametrize("name", ["dapo_wandb.log", "dapo_console.log"])
def test_bar_of_batches_is_not_the_step(read, name: str) -> None:  # type: ignore[no-untyped-def]
    """60 batches, 15 of them resampled: global step 45 is the step, on the bar and the points."""
    summary: LogSummary = read(_text(name))
    assert summary.progress is not None
    assert summary.progress.current == 45
    assert summary.total_steps == 100
    assert summary.points[-1].step == 45
    assert max(summary.checkpoint_steps) == 45


@READS
def test_wandb_points_carry_their_own_steps_rewards(read) -> None:  # type: ignore[no-untyped-def]
    """With the wandb logger each step's reward line is placed at its global step."""
    text = _text("dapo_wandb.log")
    rewards = _rewards(text)
    summary: LogSummary = read(text)
    for point in summary.points:
        assert point.values["reward"] == pytest.approx(rewards[point.step - 1])


def test_tail_ending_after_a_reward_line_places_it_at_the_next_step() -> None:
    """A console tail cut after step 45's reward line, before its dict: the reward is step 45."""
    lines = _text("dapo_console.log").splitlines(keepends=True)
    last_reward = max(i for i, line in enumerate(lines) if "reward/avg_raw_reward" in line)
    summary = parse_log("".join(lines[:last_reward + 1]))
    assert summary.points[-1].step == 45
    assert summary.points[-1].values["reward"] == pytest.approx(_rewards("".join(lines))[-1])
    assert summary.progress is not None and summary.progress.current == 44


def test_tail_cut_mid_run_is_anchored_by_a_checkpoint_save() -> None:
    """A wandb tail cut from a longer log: a ``global_step_N`` save anchors the steps."""
    text = _text("dapo_wandb.log")
    lines = text.splitlines(keepends=True)
    summary = parse_log("".join(lines[len(lines) // 3:]), log_start=False)
    assert summary.progress is not None and summary.progress.current == 45
    rewards = _rewards(text)
    for point in summary.points:
        assert point.values["reward"] == pytest.approx(rewards[point.step - 1])


VERL = Path(__file__).resolve().parents[2] / "fixtures" / "verl-dapo-rebuilt" / "dapo_console.log"


@READS
def test_verl_dapo_bar_of_batches_is_not_the_step(read) -> None:  # type: ignore[no-untyped-def]
    """verl's DAPO recipe updates its ``Training Progress`` bar for each batch it generates
    again (``num_gen_batches=K. Keep generating...``): 120 batches, global step 96."""
    summary: LogSummary = read(VERL.read_text(encoding="utf-8"))
    assert summary.points[-1].step == 96
    assert summary.progress is not None and summary.progress.current == 96
    assert summary.total_steps == 200
    assert max(summary.checkpoint_steps) == 80


def test_verl_bar_behind_its_step_line_is_its_own() -> None:
    """verl without group filtering: its bar is the step (one drawn before the step's line,
    as Ray may forward tqdm's stderr first, still counts)."""
    text = "".join(
        f"(TaskRunner pid=1) step:{s} - actor/entropy:0.5 - critic/score/mean:0.4\n"
        f"(TaskRunner pid=1) Training Progress:  {s}%|█         | {s}/100 "
        f"[00:{s:02d}<01:00,  1.00s/it]\n" for s in range(1, 41))
    text += ("(TaskRunner pid=1) Training Progress:  41%|████      | 41/100 "
             "[00:41<01:00,  1.00s/it]\n")
    summary = parse_log(text)
    assert summary.progress is not None and summary.progress.current == 41


def test_read_back_deepens_to_where_the_lead_is_known() -> None:
    """A long wandb-logger run with no save and no ``Step N:`` dict: the bar's lead is known
    only from the log's start, so the read from the end goes back that far. Read back only the
    last few dozen steps' lines, the lead counted from there put the run at its bar's 188, not
    at global step 150; the fold of every line, and the whole read, say 150."""
    generator = _generator()
    lines = generator.run(False, batches=200, total=300, ckpt=1000)
    text = "\n".join(lines) + "\n"
    trained = len(_rewards(text))
    assert trained == 150  # 50 of the 200 batches resampled
    for summary in (parse_log(text), fold_in_pieces(text, 7)):
        assert summary.progress is not None and summary.progress.current == trained
        assert summary.points[-1].step == trained
        assert summary.points[-1].values["reward"] == pytest.approx(_rewards(text)[-1])


def _generator():  # type: ignore[no-untyped-def]
    """The fixtures' generator (``tests/fixtures/skyrl-dapo-rebuilt/generate.py``) as a module."""
    spec = importlib.util.spec_from_file_location("skyrl_dapo_generate", FIXTURES / "generate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
