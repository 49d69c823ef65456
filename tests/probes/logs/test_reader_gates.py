"""The run readers' line gates change nothing: gated equals every line through every reader.

``read_fingerprint`` lets its readers see only the lines ``fingerprint_lines.READ_LINES`` keeps (a
dump's first line, images, the HF banner, ``pass_at_``), less one-line flat dicts, and
``read_outcome`` only the lines holding ``=`` or an upload word; the references
(``gated=False``) walk every line, as the readers did before.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from probes.logs.fingerprint import _read
from probes.logs.fingerprint_carry import FingerprintFold
from probes.logs.outcome import read_outcome
from tests.probes.logs.test_fuzz_fingerprint import FRAGMENTS

FIXTURES = Path(__file__).parents[2] / "fixtures"
FIXTURE_FILES = sorted(
    p for p in FIXTURES.rglob("*") if p.is_file() and p.suffix in {".out", ".log", ".txt"}
)
PROPERTY = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
CRAFTED = [
    "{'loss': '1.9', 'grad_norm': '0.3'}", "  {'loss': 1.5, 'epoch': 0.1}  ",
    "{'a': '}'", "{'a': '{'}", "{'x': 'DeepSpeedEngine configuration'}", "{'a': (1)}",
    "{'reward/avg_pass_at_8': 0.5}", "{'image': 'nvcr.io/x:1'}", '{"k": "v"}', "{}",
    "(TaskRunner pid=1) {'loss': 1.0}", "{'a': 1} [repeated 2x across cluster]",
    "trainer: [repeated 3x across cluster]", "trainer:[repeated 3x across cluster]",
    "\u3000{'a': 1}", "{'a': 1}\x1c", "  nnodes: 2", "  n_gpus_per_node: 8", "Trainer:",
    "  \u00fcber_key: 1", "  K_key: 1", "model: Qwen", "data:", "  train_batch_size: 64",
    "  - item", "***** Running training *****",
    "  Total train batch size (w. parallel, distributed & accumulation) = 1,024",
    "DeepSpeedEngine configuration:", "  train_batch_size ............ 32",
    "------------------------ arguments ------------------------",
    "===== 2 passed, 1 warning in 3.21s =====", "=== no tests ran in 0.01s ===", "=" * 20,
    "upload: ./a.bin to s3://bucket/a.bin", "To git@github.com:o/r.git",
    "https://huggingface.co/o/m/commit/abc", "pushing 1,204 rows -> o/dataset",
    "Pushed to the hub: o/m", "PUSHING 3 shards to hf.co/x", "pu\u0130sh", "Uploaded 2 files to gs://b/x",
]
BLOCKS = [
    "trainer:\n  nnodes: 2\n  n_gpus_per_node: 8\n  total_epochs: 3\n  project_name: x\n",
    "actor_rollout_ref:\n  model:\n    path: Qwen/Qwen3-8B\n  rollout:\n    n: 8\n"
    "    tensor_model_parallel_size: 2\n",
    "data:[repeated 2x across cluster]\n  train_batch_size: 64 [repeated 2x across cluster]\n"
    "  max_prompt_length: 512\n  seed: 1\n  shuffle: true\n",
    "(TaskRunner pid=7) {'actor_rollout_ref': {'model': {'path': 'Q'}},\n"
    "(TaskRunner pid=7)  'data': {'train_batch_size': 8}}\n",
    "GRPOConfig(\nnum_generations=4,\nper_device_train_batch_size=2,\n)\n",
]


@cache
def fixture_lines() -> list[str]:
    seen: dict[str, None] = dict.fromkeys(CRAFTED + [b for k in BLOCKS for b in k.splitlines()])
    for path in FIXTURE_FILES:
        seen.update(dict.fromkeys(re.split(r"\r\n?|\n", path.read_text(errors="replace"))))
    return list(seen)


def assert_same(lines: list[str]) -> None:
    assert repr(_read(lines)) == repr(_read(lines, gated=False))
    assert read_outcome(lines) == read_outcome(lines, gated=False)
    for size in (1, 7, 300):
        assert_fold_same(lines, size)


def assert_fold_same(lines: list[str], size: int) -> None:
    """``FingerprintFold`` over ``lines`` in chunks of ``size``: the gated walk carries and
    finishes exactly as the walk over every line (dumps cut by a chunk left pending)."""
    if not lines:
        return
    gated, every = FingerprintFold(), FingerprintFold()
    for start in range(0, len(lines) - 1, size):
        chunk = lines[start : min(start + size, len(lines) - 1)]
        gated.feed(chunk)
        every.feed(chunk, gated=False)
        assert gated.carry() == every.carry()
    assert repr(gated.fingerprint(lines[-1])) == repr(every.fingerprint(lines[-1]))


@pytest.mark.parametrize("path", FIXTURE_FILES, ids=lambda p: str(p.relative_to(FIXTURES)))
def test_fixture_gated_equals_every_line(path: Path) -> None:
    """Every fixture reads to the same fingerprint through the gates as without them."""
    assert_same(re.split(r"\r\n?|\n", path.read_text(errors="replace")))


@PROPERTY
@given(st.lists(st.integers(min_value=0), max_size=150))
def test_random_fixture_lines_gated_equals_every_line(picks: list[int]) -> None:
    """Any mix of real fixture lines and crafted edge lines reads the same."""
    pool = fixture_lines()
    assert_same([pool[i % len(pool)] for i in picks])


@PROPERTY
@given(st.lists(st.sampled_from(FRAGMENTS + CRAFTED + BLOCKS) | st.text(max_size=30),
                max_size=60))
def test_random_fragments_gated_equals_every_line(parts: list[str]) -> None:
    """Dump fragments and whole dumps (YAML, pprint, dataclass), cut and joined anywhere,
    and arbitrary text, read the same."""
    assert_same("".join(parts).splitlines())
