"""Logs of any size in a real trainer's shape, and the retained size of a model (tests, bench).

``rl_log`` writes a SkyRL run (Ray prefixes, loguru colour, pprint step dicts, tqdm bars, vLLM
and raylet noise) whose start names an agentic object-store trial dir, whose middle holds a
tally line and a traceback, and whose last 600 lines are noise: everything a report reads from
above a bounded tail. ``deep_size`` is a deterministic recursive ``sys.getsizeof``: what a kept
object graph costs in this interpreter, each object counted once.
"""

from __future__ import annotations

import io
import random
import sys
from collections.abc import Mapping
from datetime import date, datetime, timedelta
from enum import Enum
from typing import Any

from pydantic import BaseModel

RAY = "(skyrl_entrypoint pid=48213) "
ESC = "\x1b"
NOISE = (
    "(raylet) [2026-02-12 14:31:07,445 I 395 395] node_manager.cc:1049: heartbeat ok\n",
    "(vLLMEngine pid=5101) INFO 12-29 13:12:50 [loggers.py:123] Avg prompt throughput: 4.1 "
    "tokens/s, Running: 12 reqs, Waiting: 0 reqs\n",
    "/usr/lib/python3/site-packages/transformers/training_args.py:1541: FutureWarning: x\n",
    f"{RAY}INFO 12-29 13:12:51 generator: rollout batch sampled 64 prompts\n",
)
HEAD = (
    f"{RAY}trainer.policy.model.path: Qwen/Qwen3-8B\n"
    f"{RAY}generator.harbor.trials_dir: s3://team-bucket/rl-agentic-7/trials/\n"
)
FAULT = (
    f"{RAY}Traceback (most recent call last):\n"
    f'{RAY}  File "/app/skyrl/train/trainer.py", line 412, in train\n'
    f"{RAY}    self.policy.step()\n"
    f"{RAY}RuntimeError: CUDA error: an illegal memory access was encountered\n"
)
TALLY = f"{RAY}uploaded 6,977 rows to s3://team-bucket/rl-agentic-7/rollouts\n"


def step_block(step: int, rng: random.Random) -> str:
    """One SkyRL step: reward line, coloured loguru header, pprint dict, progress bar."""
    values = {
        "generate/avg_num_tokens": rng.uniform(500, 900),
        "policy/grad_norm": rng.uniform(0.1, 0.5),
        "policy/loss_metrics/clip_ratio": rng.uniform(0, 0.01),
        "policy/policy_entropy": rng.uniform(0.4, 0.6),
        "policy/policy_loss": rng.uniform(-0.02, 0.02),
        "reward/avg_pass_at_8": rng.uniform(0, 1),
        "reward/avg_raw_reward": rng.uniform(0, 1),
    }
    items = [f"'{k}': '{v:.4f}'" for k, v in values.items()] + [f"'trainer/global_step': {step}"]
    return "".join([
        f"{RAY}2026-02-12 14:31:07.412 | INFO     | skyrl.train.trainer:postprocess:1116 - "
        f"reward/avg_pass_at_8: {values['reward/avg_pass_at_8']}, "
        f"reward/avg_raw_reward: {values['reward/avg_raw_reward']}\n",
        f"{RAY}{ESC}[32m2026-02-12 14:31:08.001{ESC}[0m | INFO     | "
        f"skyrl.train.utils.tracking:log:189 - Step {step}: \n",
        f"{RAY}{{{items[0]},\n",
        *(f"{RAY} {item},\n" for item in items[1:-1]),
        f"{RAY} {items[-1]}}}\n",
        f"{RAY}Training Batches Processed:  12%|█▏        | {step}/100000 "
        f"[31:02<3:47:35, 155.18s/it]\n",
    ])


def rl_log(nbytes: int, *, seed: int = 7) -> str:
    """About ``nbytes`` of log (at least the fixed parts): head, steps, tally and fault
    half-way, steps, then 600 noise lines."""
    rng = random.Random(seed)
    out = io.StringIO()
    out.write(HEAD)
    tail = "".join(rng.choice(NOISE) for _ in range(600))
    step = 0
    while out.tell() < nbytes - len(tail):
        step += 1
        out.write(step_block(step, rng))
        out.write("".join(rng.choice(NOISE) for _ in range(4)))
        if step == 20:
            out.write(TALLY + FAULT)
    out.write(tail)
    return out.getvalue()


_SHARED = (type(None), bool, Enum, type)


def deep_size(obj: Any, seen: set[int] | None = None) -> int:
    """Bytes ``obj`` holds in this interpreter, recursively, each object once (singletons
    such as ``None``, booleans, enum members and classes are free)."""
    seen = set() if seen is None else seen
    if isinstance(obj, _SHARED) or id(obj) in seen:
        return 0
    seen.add(id(obj))
    size = sys.getsizeof(obj)
    if isinstance(obj, str | bytes | int | float | datetime | date | timedelta):
        return size
    if isinstance(obj, BaseModel):
        return size + deep_size(obj.__dict__, seen) + deep_size(obj.__pydantic_fields_set__, seen)
    if isinstance(obj, Mapping):
        return size + sum(deep_size(k, seen) + deep_size(v, seen) for k, v in obj.items())
    if isinstance(obj, tuple | list | set | frozenset):
        return size + sum(deep_size(x, seen) for x in obj)
    if hasattr(obj, "__dict__"):
        return size + deep_size(vars(obj), seen)
    return size
