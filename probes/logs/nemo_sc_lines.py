"""NeMo-RL's SingleController lines: a step's metrics dict, then its ``train step N/M`` line.

Policy: NeMo-RL's single-controller GRPO loop (NVIDIA-NeMo/RL
``nemo_rl/algorithms/single_controller.py``, 2026-08) prints no ``===== Step N/M =====``
banner and no ``📊 Training Results:`` bullets; after each optimizer step it prints its
``⏱️  Timing:`` bullets, then ``print(f"step_metrics={step_metrics}", flush=True)`` (a Python
dict repr: ``loss``, ``grad_norm``, ``lr``, ``reward``, ``token_mult_prob_error``, ...), then
``print(f"train step {self._train_steps}/{grpo_cfg.max_num_steps}  trainer_v=...  lag=...  ")``
with ``_train_steps`` already counting the step just taken. The dict is held until that line
names its step; N/M is the run's step and its ``max_num_steps``.
"""

from __future__ import annotations

import re

from probes.logs.lines import parse_pairs

METRICS_GATE = "step_metrics={"
STEP_GATE = "train step "
_STEP_RE = re.compile(
    r"^\s{0,8}train step (\d{1,12})/(\d{1,12})\s+trainer_v=\d{1,12}\s+lag=-?\d{1,12}\s*$")


def parse_metrics(body: str) -> dict[str, float] | None:
    """The numeric pairs of a ``step_metrics={...}`` line, None for any other line."""
    text = body.lstrip()
    if not text.startswith(METRICS_GATE):
        return None
    return parse_pairs(text[len(METRICS_GATE) - 1:])


def parse_step(body: str) -> tuple[int, int] | None:
    """(step, max_num_steps) of a ``train step N/M  trainer_v=K  lag=L`` line, else None."""
    found = _STEP_RE.match(body)
    if found is None:
        return None
    return int(found.group(1)), int(found.group(2))
