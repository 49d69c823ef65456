"""A slime run's total steps, from the arguments Megatron prints at its start.

slime's driver (THUDM/slime ``train.py``) parses its arguments through Megatron's
``validate_args``, which prints each one, ``'  {} {} {}'.format(arg, '.' * (48 - len(arg)),
value)`` between ``---- arguments ----`` rules. slime's tracker step is ``rollout_id x
num_steps_per_rollout + step_id``; the run's steps are ``num_rollout x num_steps_per_rollout``
(``rollout_batch_size x n_samples_per_prompt // global_batch_size`` when not given). Before,
a slime run read no total: its step had no "of N".
"""

from __future__ import annotations

import pytest

from probes.logs.parse import parse_log
from probes.logs.slime_lines import SlimeArgs
from tests.probes.logs.pieces import fold_in_pieces
from tests.probes.logs.test_slime_lines import slime_log


def arguments(**values: object) -> str:
    """Megatron's ``_print_args("arguments", args)`` of ``values`` and a few others, sorted."""
    every = {"adam_beta1": 0.9, "hidden_size": 4096, "lr": 1e-06, "seed": 1234,
             "use_kl_loss": True, **values}
    lines = ["------------------------ arguments ------------------------"]
    lines += sorted((f"  {arg} {'.' * (48 - len(arg))} {value}" for arg, value in every.items()),
                    key=str.lower)
    lines.append("-------------------- end of arguments ---------------------")
    return "\n".join(lines) + "\n"


GEOMETRY = {"rollout_batch_size": 32, "n_samples_per_prompt": 8, "global_batch_size": 128}


@pytest.mark.parametrize("read", ["cold", "folded"])
def test_the_printed_arguments_give_the_total(read: str) -> None:
    """3000 rollouts of 32 x 8 // 128 = 2 steps: 6000 steps."""
    text = arguments(num_rollout=3000, num_steps_per_rollout=None, **GEOMETRY)
    text += slime_log(5, per_rollout=2)
    summary = parse_log(text) if read == "cold" else fold_in_pieces(text, 5)
    assert summary.points[-1].step == 9
    assert summary.total_steps == 6000


def test_steps_per_rollout_given() -> None:
    """``--num-steps-per-rollout 4`` counts as given (global batch derived from it)."""
    text = arguments(num_rollout=100, num_steps_per_rollout=4, rollout_batch_size=32,
                     n_samples_per_prompt=8, global_batch_size=64) + slime_log(3, per_rollout=4)
    assert parse_log(text).total_steps == 400


def test_a_tail_cut_below_the_arguments_takes_them_from_the_head() -> None:
    """A long log's tail holds no argument: the head the collector sends has them."""
    head = arguments(num_rollout=500, num_steps_per_rollout=None, **GEOMETRY)
    text = head + slime_log(40, per_rollout=2)
    cut = len(head) + text[len(head):].index("rollout 30:")
    tail = text[text.rindex("\n", 0, cut) + 1:]
    summary = parse_log(tail, log_start=False, head=text[:cut])
    assert summary.total_steps == 1000


def test_num_epoch_runs_print_no_total() -> None:
    """``--num-epoch`` leaves ``num_rollout`` None in the printed arguments (slime computes it
    later, unprinted): no total is claimed."""
    text = arguments(num_rollout=None, num_epoch=3, num_steps_per_rollout=None, **GEOMETRY)
    assert parse_log(text + slime_log(3)).total_steps is None


@pytest.mark.parametrize(("line", "args"), [
    ("  num_rollout ..................................... 3000", SlimeArgs(num_rollout=3000)),
    ("  train_iters ..................................... 3000", SlimeArgs()),
    ("num_rollout: 3000", SlimeArgs()),
])
def test_only_the_named_arguments_are_read(line: str, args: SlimeArgs) -> None:
    """Another argument, or another form, reads nothing."""
    assert SlimeArgs().read(line) == args
