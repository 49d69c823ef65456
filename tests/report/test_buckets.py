"""Bucket routing by job-name regex, first bucket in contract order wins."""

from __future__ import annotations

import pytest

from report.buckets import bucket_for
from report.settings import BucketRules

CONTRACT_RULES = BucketRules(
    rl=("^rl-", "grpo", "ppo"), sft=("^sft-",), datagen=("^datagen-",), eval=("^eval-",),
)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("rl-qwen-7b", "rl"),
        ("RL-Qwen-7B", "rl"),  # case-insensitive
        ("my-grpo-run", "rl"),  # search, not match
        ("sft-grpo-warmstart", "rl"),  # rl is tried before sft
        ("sft-llama-2ep", "sft"),
        ("xsft-llama", "other"),  # near-miss: ^sft- anchored
        ("datagen-swe-chunk3", "datagen"),
        ("eval-qwen-swebench", "eval"),
        ("eval_qwen", "other"),  # near-miss: underscore is not the configured dash
        ("consolidate-rows", "other"),
        ("", "other"),
    ],
)
def test_contract_rules(name: str, expected: str) -> None:
    """Each name lands in the first bucket whose regex it contains."""
    assert bucket_for(name, CONTRACT_RULES) == expected


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("rl_run", "rl"),
        ("dapo-math", "rl"),
        ("sft_cold_start", "sft"),
        ("datagen_swe", "datagen"),
        ("eval_swebench", "eval"),
        ("gpu-ci", "other"),
    ],
)
def test_default_rules(name: str, expected: str) -> None:
    """The built-in defaults accept both separators."""
    assert bucket_for(name, BucketRules()) == expected


def test_empty_rules_route_everything_to_other() -> None:
    """With no patterns at all every job is catch-all."""
    assert bucket_for("rl-run", BucketRules(rl=(), sft=(), datagen=(), eval=())) == "other"
