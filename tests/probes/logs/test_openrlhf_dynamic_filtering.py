"""OpenRLHF with dynamic filtering: its Episode bar counts the prompt batches consumed.

In OpenRLHF's current ``fit`` (``openrlhf/trainer/ppo_trainer.py``, 2026-08) the Episode bar
is ``tqdm(range(len(prompts_dataloader)), ...)`` advanced by ``pbar.update(prompts_consumed)``
after each step's ``✨ Global step N: {status}`` line. With ``--algo.dynamic_filtering_enable``
a step may consume more than one batch (``SamplesGenerator.generate_samples`` draws until
enough groups pass the reward range), and the status then carries
``dynamic_filtering_pass_rate``: at global step 96 the bar read 120/200, and 120 was taken as
the step. The status lines number the steps; the bar counts for no more than the last one.
"""

from __future__ import annotations

from probes.logs.parse import parse_log
from tests.probes.logs.pieces import fold_in_pieces

RAY = "(PPOTrainer pid=2871) "


def _run(steps: int, *, filtering: bool) -> str:
    """``steps`` steps; with filtering every fourth step consumes two batches of 200."""
    out, consumed = [], 0
    for step in range(1, steps + 1):
        rate = 62.5 if step % 4 else 31.25
        extra = f", 'dynamic_filtering_pass_rate': {rate}" if filtering else ""
        out.append(f"{RAY}INFO 12-05 10:{step % 60:02d}:00 ppo_trainer.py:547] \u2728 Global step "
                   f"{step}: {{'policy_loss': 0.0043, 'actor_lr': 1e-06, 'actor_grad_norm': "
                   f"0.2058, 'entropy_loss': 0.8, 'reward': {0.2 + 0.001 * step:.3f}, "
                   f"'response_length': 726.0{extra}}}\n")
        consumed += 2 if filtering and step % 4 == 0 else 1
        elapsed = 95 * consumed
        pct = 100 * consumed // 200
        out.append(f"{RAY}Episode [1/1]: {pct:3d}%|{'█' * (pct // 10):<10}| {consumed}/200 "
                   f"[{elapsed // 3600}:{elapsed % 3600 // 60:02d}:{elapsed % 60:02d}<2:00:00, "
                   "95.00s/it]\n")
    return "".join(out)


def test_filtered_run_steps_by_its_status_lines() -> None:
    """96 steps, 24 of them on two batches: step 96, not the bar's 120."""
    text = _run(96, filtering=True)
    for summary in (parse_log(text), fold_in_pieces(text, 5)):
        assert summary.points[-1].step == 96
        assert summary.progress is not None and summary.progress.current == 96


def test_unfiltered_run_keeps_its_bar() -> None:
    """Without dynamic filtering one batch is one step: the bar and the lines agree."""
    summary = parse_log(_run(96, filtering=False))
    assert summary.progress is not None and summary.progress.current == 96
