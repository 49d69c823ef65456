"""A resumed Hugging Face Trainer run: its training bar's jump to the saved step is no pace.

On ``resume_from_checkpoint`` the Trainer prints ``Continuing training from global step N``
and draws a fresh ``tqdm(total=max_steps)`` at 0; ``ProgressCallback.on_step_end`` then updates
it by ``global_step - current_step``, so the first redraw after the resume jumps from 0 to
N + 1 in one step's time (transformers ``trainer_callback.py``). Taken as progress, that pair
made the trailing rate 301 steps in 6 s: 8 steps after a resume at 300 of 916 the rate read
0.07 s/step (an SFT ETA of 43 s, not 24 minutes) until the jump left the window.
"""

from __future__ import annotations

import pytest

from probes.logs.parse import parse_log
from probes.logs.progress import trailing_rate

TOTAL = 916
BANNER = (
    "***** Running training *****\n  Num examples = 14,650\n  Num Epochs = 2\n"
    "  Instantaneous batch size per device = 4\n"
    "  Total train batch size (w. parallel, distributed & accumulation) = 32\n"
    "  Gradient Accumulation steps = 8\n"
    f"  Total optimization steps = {TOTAL:,}\n"
    "  Number of trainable parameters = 1,543,714,304\n"
    "  Continuing training from checkpoint, will skip to saved global_step\n"
    "  Continuing training from epoch 0\n"
    "  Continuing training from global step 300\n"
    "  Will skip the first 0 epochs then the first 2400 batches in the first epoch.\n"
    f"  0%|          | 0/{TOTAL} [00:00<?, ?it/s]"
)


def _clock(seconds: float) -> str:
    whole = int(seconds)
    return f"{whole // 60:02d}:{whole % 60:02d}"


def resumed_log(steps: int, per_step: float = 2.35, skip_s: float = 4.0) -> str:
    """``steps`` steps after a resume at 300; tqdm's own smoothed rate as it prints it."""
    out, smoothed = [BANNER], None
    for i in range(1, steps + 1):
        step, elapsed = 300 + i, skip_s + per_step * i
        moved, spent = (301, skip_s + per_step) if i == 1 else (1, per_step)
        rate = moved / spent
        smoothed = rate if smoothed is None else 0.3 * rate + 0.7 * smoothed
        shown = f"{smoothed:.2f}it/s" if smoothed >= 1 else f"{1 / smoothed:5.2f}s/it"
        pct = 100 * step // TOTAL
        out.append(f"\r{pct:3d}%|{'█' * (pct // 10):<10}| {step}/{TOTAL} "
                   f"[{_clock(elapsed)}<{_clock((TOTAL - step) / smoothed)}, {shown}]")
        if step % 10 == 0:
            out.append("\n" + str({"loss": 1.1, "grad_norm": 0.8, "learning_rate": 1e-05,
                                   "epoch": round(2 * step / TOTAL, 2)}) + "\n")
    return "".join(out) + "\n"


@pytest.mark.parametrize("steps", [3, 8, 12])
def test_rate_after_a_resume_is_the_steps_pace(steps: int) -> None:
    """A few steps after a resume the trailing rate is the 2.35 s a step, not the jump's."""
    summary = parse_log(resumed_log(steps))
    assert summary.progress is not None and summary.progress.current == 300 + steps
    assert summary.sec_per_step == pytest.approx(2.35, rel=0.1)  # whole-second clock


@pytest.mark.parametrize(
    ("events", "expected"),
    [
        ([(0, 0.0), (301, 6.35), (302, 8.7), (303, 11.05)], 2.35),  # the jump left out
        ([(0, 0.0), (5, 1.0), (11, 2.0), (15, 3.0), (21, 4.0)], 0.19),  # fast steps, kept
        ([(1, 0.0), (41, 8.0), (81, 16.0)], 0.2),  # sparse redraws: every pair alike
    ],
)
def test_trailing_rate_leaves_out_a_count_jump(events: list[tuple[int, float]],
                                               expected: float) -> None:
    """A pair that moves far more steps than the others in far less time a step is a skip."""
    assert trailing_rate(events) == pytest.approx(expected, rel=0.01)
