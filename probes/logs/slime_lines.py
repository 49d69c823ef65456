"""slime's metric lines: ``step N: {...}`` for a training step, ``rollout R: {...}`` for its data.

Policy: slime (THUDM/slime 624b824, 2026-08) logs through Python logging
(``[%(asctime)s] %(filename)s:%(lineno)d - %(message)s``, behind Ray's prefix):

- each optimizer step of the actor, ``logger.info(f"{role_tag}step {accumulated_step_id}:
  {log_dict}")`` (``backends/megatron_utils/model.py``): ``train/pg_loss``,
  ``train/entropy_loss`` (the mean entropy), ``train/pg_clipfrac``, ``train/ppo_kl``,
  ``train/train_rollout_logprob_abs_diff``, ``train/tis``, ``train/grad_norm``, ... at the
  step ``rollout_id x num_steps_per_rollout + step_id`` (counted from 0, as its tracker's
  ``train/step``); a critic's line is ``critic-step N:``, no step of the policy;
- each rollout's training data, ``logger.info(f"rollout {rollout_id}: {reduced_log_dict}")``
  (``observability/train_metric_utils.py``), before the steps trained on it:
  ``rollout/raw_reward``, ``rollout/response_lengths``, ...: held and given to each of them.

Other ``<name> R: {...}`` lines (``perf``, ``eval``, ``multi_turn``, ``passrate``) are no step.

The run's total: its driver's ``parse_args`` runs Megatron's ``validate_args``, which prints
every argument, ``'  {} {} {}'.format(arg, '.' * (48 - len(arg)), value)`` (``_print_args``,
rank 0), among them ``num_rollout`` (``None`` when ``--num-epoch`` sets it later, unprinted),
``rollout_batch_size``, ``n_samples_per_prompt``, ``global_batch_size`` and
``num_steps_per_rollout``: the steps are ``num_rollout x num_steps_per_rollout``, the latter
``rollout_batch_size x n_samples_per_prompt // global_batch_size`` when not given
(``slime/utils/arguments.py``, ``slime_validate_args``).
"""

from __future__ import annotations

import re
from typing import NamedTuple

from probes.logs.lines import parse_pairs

SLIME_GATE = ": {'"
ARGS_GATE = " ....."
"""The substring of every line of Megatron's printed arguments (``SlimeArgs``)."""
_ARG_RE = re.compile(
    r"^\s{0,4}(num_rollout|rollout_batch_size|n_samples_per_prompt|global_batch_size"
    r"|num_steps_per_rollout) \.{2,64} (\d{1,12}|None)\s*$")
"""The substring every slime metric line holds."""
_LINE_RE = re.compile(r"(?:^| - )(step|rollout) (\d{1,12}): (\{'.*\})\s*$")


def parse_slime(body: str) -> tuple[str, int, dict[str, float]] | None:
    """(``step`` or ``rollout``, its number, the dict's numeric pairs) of a slime metric
    line, None for any other line."""
    found = _LINE_RE.search(body)
    if found is None:
        return None
    return found.group(1), int(found.group(2)), parse_pairs(found.group(3))


class SlimeArgs(NamedTuple):
    """The printed arguments that give slime's total steps (see the module)."""

    num_rollout: int | None = None
    rollout_batch_size: int | None = None
    n_samples_per_prompt: int | None = None
    global_batch_size: int | None = None
    num_steps_per_rollout: int | None = None

    def read(self, body: str) -> SlimeArgs:
        """These arguments with ``body``'s, if it is one of them (a printed ``None`` clears)."""
        found = _ARG_RE.match(body)
        if found is None:
            return self
        value = None if found.group(2) == "None" else int(found.group(2))
        return self._replace(**{found.group(1): value})

    @property
    def total(self) -> int | None:
        """``num_rollout x steps a rollout``, None until both are known (and positive)."""
        per = self.num_steps_per_rollout
        if per is None and None not in (self.rollout_batch_size, self.n_samples_per_prompt,
                                         self.global_batch_size) and self.global_batch_size:
            per = (self.rollout_batch_size or 0) * (self.n_samples_per_prompt or 0) \
                // self.global_batch_size
        if not per or not self.num_rollout or per < 0 or self.num_rollout < 0:
            return None
        return self.num_rollout * per
