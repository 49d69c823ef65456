"""PPO clip fractions onto ``clip_ratio`` (CONTRACT §4; §6 ``clip-ratio-high`` above 1 %).

The rulebook's clip ratio is the share of tokens whose importance ratio PPO clipped at
``1 ± eps`` (``policy/ppo_clip_ratio``, ~0 normally, > 1 % an LR / eps_clip mismatch). EasyR1
(hiyouga/EasyR1 ``verl/trainer/core_algos.py`` ``compute_policy_loss``) logs it as
``pg_clipfrac_higher`` = ``(pg_loss < pg_loss2)``, the tokens where ``max(-A·r, -A·clip(r))``
took the clipped term: verl's ``actor/pg_clipfrac`` = ``gt(pg_losses2, pg_losses1)``
(volcengine/verl ``verl/trainer/ppo/core_algos.py``). Both name their dual-clip share
``pg_clipfrac_lower``: tokens with A < 0 whose loss hit ``clip_ratio_dual`` (3.0) x A, a
bound that is not eps_clip and is disjoint from the clipped tokens, so no ``clip_ratio``.
"""

from __future__ import annotations

import pytest

from probes.logs.metric_names import canonical_values
from probes.logs.parse import parse_log
from tests.probes.logs.test_easyr1_real_dump import easyr1_log


@pytest.mark.parametrize(("raw", "canon"), [
    ("actor/pg_clipfrac_higher", "clip_ratio"),  # EasyR1
    ("actor/pg_clipfrac", "clip_ratio"),  # verl
])
def test_the_ppo_clip_fraction_is_the_clip_ratio(raw: str, canon: str) -> None:
    """EasyR1's and verl's eps-clip share is ``clip_ratio``."""
    assert canonical_values({raw: 0.002}, {}) == {canon: 0.002}


@pytest.mark.parametrize("raw", [
    "actor/pg_clipfrac_lower", "response_length/clip_ratio", "prompt_length/clip_ratio",
])
def test_the_dual_clip_share_and_length_clips_are_not(raw: str) -> None:
    """The dual-clip share and the truncated-length shares are no clip ratio."""
    assert canonical_values({raw: 0.5}, {}) == {}


def test_easyr1_block_reads_its_clip_ratio() -> None:
    """A real EasyR1 console block's ``actor/pg_clipfrac_higher`` (a numpy scalar) is the
    step's ``clip_ratio``; its ``pg_clipfrac_lower`` and length clips add nothing."""
    last = parse_log(easyr1_log(6)).points[-1].values
    assert last["clip_ratio"] == pytest.approx(0.002)
