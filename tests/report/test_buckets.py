"""Bucket routing by job-name regex: the leading token first, then inner keywords in order."""

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
        ("sft-grpo-warmstart", "sft"),  # the leading token decides before an inner keyword
        ("my-grpo-sft-warmstart", "rl"),  # inner keywords only: rl is tried before sft
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


@pytest.mark.parametrize("rules", [CONTRACT_RULES, BucketRules()], ids=["contract", "defaults"])
@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("eval-grpo-qwen7b-gsm8k", "eval"),  # leading eval beats the inner rl keyword
        ("datagen-grpo-traces-c3", "datagen"),
        ("datagen-ppo-rollouts", "datagen"),
        ("sft-ppo-warmstart", "sft"),
        ("grpo-eval-suite", "rl"),  # leading rl keyword beats the inner eval
        ("rl-datagen-mix", "rl"),
        ("qwen-grpo-eval", "rl"),  # no leading match: inner keywords in bucket order
        ("xeval-grpo", "rl"),  # near-miss: "xeval" is not a leading eval token
    ],
)
def test_leading_token_decides_before_inner_keywords(
    rules: BucketRules, name: str, expected: str
) -> None:
    """``eval-grpo-…`` is Eval and ``datagen-grpo-…`` Datagen; inner keywords come second."""
    assert bucket_for(name, rules) == expected


def test_unanchored_pattern_at_the_start_counts_as_leading() -> None:
    """A plain keyword matching at position 0 is the leading token too (``ppo`` below)."""
    rules = BucketRules(rl=("ppo",), sft=(), datagen=(), eval=("eval",))
    assert bucket_for("ppo-eval-arm", rules) == "rl"
    assert bucket_for("eval-ppo-arm", rules) == "eval"


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("datagen-consolidate-swe", "other"),  # the seed's catch-all "datagen-consolidate"
        ("rl-upload-qwen7b", "other"),  # "RL upload"
        ("sft-pretokenize-mix", "other"),
        ("gpu-ci-nightly", "other"),
        ("eval-image-build", "other"),
        ("rl-smoke-test", "rl"),  # near-miss: an RL smoke test stays RL (deep-probe rule)
        ("sft-pushkin-poems", "sft"),  # near-miss: "push" inside a word
        ("rl-cider-reward", "rl"),  # near-miss: "ci" inside a word
    ],
)
def test_catch_all_tasks_come_first(name: str, expected: str) -> None:
    """Consolidate, pretokenize, upload, GPU-CI and image builds are catch-all in any domain."""
    assert bucket_for(name, BucketRules()) == expected


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("smoke-sft-mix-0.5b", "other"),  # replayed: read as an SFT run, routed to sft cleanup
        ("sft-qwen-7b-smoke", "other"),
        ("sft-mix-grid-probe-mbs8", "other"),  # the seed's "grid probes"
        ("sft-qwen-7b-probe", "other"),
        ("datagen-swe-smoke", "other"),
        ("eval-tbench-measure-latency", "other"),
        ("rl-smoke-test", "rl"),  # an RL smoke test stays RL (deep-probe rule)
        ("rl-grpo-probe-corrupt", "rl"),
        ("grpo-qwen-smoke", "rl"),
        ("sft-smokey-mountains", "sft"),  # near-miss: "smoke" inside a word
        ("eval-probing-suite", "eval"),  # near-miss: "probe" inside a word
    ],
)
def test_smoke_tests_and_probes_are_catch_all_unless_rl(name: str, expected: str) -> None:
    """Feature smoke tests, measurement and grid probes are catch-all jobs (seed), whatever
    their SFT/datagen/eval prefix; RL ones stay RL, where the deep-probe rule needs them."""
    assert bucket_for(name, BucketRules()) == expected


def test_side_tasks_can_be_switched_off() -> None:
    """``side_tasks = []`` routes a smoke test by its domain again."""
    assert bucket_for("smoke-sft-mix-0.5b", BucketRules(side_tasks=())) == "sft"


def test_catch_all_keywords_can_be_switched_off() -> None:
    """``other = []`` restores the plain domain routing."""
    assert bucket_for("rl-upload-qwen7b", BucketRules(other=())) == "rl"


def test_bad_regex_is_rejected_at_load() -> None:
    """A bucket regex that does not compile is a config error, named with its pattern."""
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="bad regex"):
        BucketRules(other=("(",))
