"""Catch-all: a tqdm rate is not a tally, and a running upload names what it uploads.

Replayed on the real SLURM (sbatch, read through ``jobtables sweep``):

- ``pretokenize-sft-mix-v2`` (COMPLETED) ended on ``Saved 52002 tokenized examples (118.4M
  tokens) to /data/pretok/sft-mix-v2``; its Note read the datasets progress bar above it,
  ``Running tokenizer on dataset (num_proc=16): 100%|██████████…``, because the bar's rate
  ``4213.33 examples/s`` counted as a tally of examples and a count with a word before its
  noun (``52002 tokenized examples``) did not;
- ``upload-rl-grpo-qwen3-8b`` (RUNNING, ``huggingface-cli upload org/... <dir> .`` echoed by
  ``set -x``, then huggingface_hub's hashing lines and an LFS progress bar) read ``Finished
  hashing 17 files.``: the rulebook's own row is ``RL upload running 3m <model>``.
"""

from __future__ import annotations

from probes.logs.excerpt import TALLY
from probes.logs.parse import parse_log
from probes.models import JobFacts, JobState
from tests.report.factories import judge, log, record

PRETOK = (
    "Loading dataset sft-mix-v2 (52002 examples)\n"
    "Running tokenizer on dataset (num_proc=16): 100%|██████████| 52002/52002 "
    "[00:12<00:00, 4213.33 examples/s]\n"
    "Saved 52002 tokenized examples (118.4M tokens) to /data/pretok/sft-mix-v2\n"
)
UPLOAD = (
    "+ huggingface-cli upload org/rl-grpo-qwen3-8b-step400 checkpoints/global_step_400/hf .\n"
    "Start hashing 17 files.\n"
    "Finished hashing 17 files.\n"
    "model-00001-of-00004.safetensors:  37%|███▋      | 1.84G/4.97G [01:02<01:46, 29.4MB/s]\n"
)


def _trend(name: str, text: str, state: JobState) -> str:
    facts = JobFacts(record=record(name, state=state, exit_code=0), log=log(text=text),
                     summary=parse_log(text))
    report = judge(facts).report
    assert report.bucket == "other"
    return report.trend


def test_a_rate_is_not_a_tally() -> None:
    """``4213.33 examples/s``, ``812 rows/s``: a speed, not a count."""
    assert TALLY.search("100%|██████████| 52002/52002 [00:12<00:00, 4213.33 examples/s]") is None
    assert TALLY.search("Map: 40%| 400/1000 [00:01<00:01, 812.5 rows/s]") is None
    assert TALLY.search("Saved 52002 tokenized examples to /data") is not None
    assert TALLY.search("pushed 6,977 rows to org/x") is not None


def test_a_completed_pretokenize_notes_what_it_saved() -> None:
    trend = _trend("pretokenize-sft-mix-v2", PRETOK, JobState.COMPLETED)
    assert trend.startswith("Saved 52002 tokenized examples"), trend


def test_a_running_hf_upload_names_its_repo() -> None:
    trend = _trend("upload-rl-grpo-qwen3-8b", UPLOAD, JobState.RUNNING)
    assert "org/rl-grpo-qwen3-8b-step400" in trend, trend
