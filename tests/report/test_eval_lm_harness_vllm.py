"""Eval: an lm-eval run on its vLLM backend shows vLLM's own generation progress.

Replayed on the real SLURM (sbatch, read through ``jobtables job ID --format json``):
``eval-lmeval-vllm`` ran lm-evaluation-harness with ``--model vllm --batch_size auto``. Its
``generate_until`` (lm_eval/models/vllm_causallms.py) draws ``Running generate_until requests``
and hands all of a chunk's requests to ``LLM.generate(..., use_tqdm=True if self.batch_size ==
"auto" else False)``: vLLM's ``Processed prompts`` bar moves while lm-eval's waits at 0 until the
chunk returns. The row read "lm-eval: 0/1319 requests (0%)" with 760 of 1319 prompts generated.
"""

from __future__ import annotations

from probes.logs.excerpt import retain
from probes.logs.parse import parse_log
from probes.models import JobFacts, JobState
from tests.report.factories import judge, log, record

HEAD = (
    "2026-11-30:15:40:01 INFO     [__main__:440] Selected Tasks: ['gsm8k']\n"
    "2026-11-30:15:40:05 INFO     [evaluator:223] Initializing vllm model, with arguments: "
    "{'pretrained': '/ckpt/qwen-sft', 'tensor_parallel_size': 1}\n"
    "2026-11-30:15:41:00 INFO     [evaluator:513] Running generate_until requests\n"
)


def _lm(n: int) -> str:
    return (f"\rRunning generate_until requests: {100 * n // 1319:3d}%|{'#' * (10 * n // 1319):<10}"
            f"| {n}/1319 [00:00<?, ?it/s]")


def _vllm(n: int) -> str:
    return (f"\rProcessed prompts: {100 * n // 1319:3d}%|{'#' * (10 * n // 1319):<10}| {n}/1319 "
            "[01:11<00:52, 10.71it/s, est. speed input: 1234.56 toks/s, output: 5678.90 toks/s]")


def _report(text: str):  # type: ignore[no-untyped-def]
    summary = parse_log(text)
    facts = JobFacts(record=record("eval-lmeval-vllm", state=JobState.RUNNING),
                     log=retain(log(text=text), summary), summary=summary)
    return judge(facts).report


def test_vllms_bar_moving_under_lm_evals_shows_its_progress() -> None:
    report = _report(HEAD + _lm(0) + "".join(_vllm(n) for n in range(0, 800, 40)) + "\n")
    assert report.verdict == "healthy", (report.verdict, report.trend)
    assert "760/1319 prompts" in report.trend, report.trend


def test_lm_evals_own_bar_moving_after_is_its_progress() -> None:
    """A chunk returned: lm-eval's bar moves past vLLM's finished one, and is the news."""
    text = HEAD + _lm(0) + _vllm(1319) + "".join(_lm(n) for n in range(0, 1319, 100)) + "\n"
    report = _report(text)
    assert report.trend.startswith("lm-eval: 1300/1319 requests"), report.trend
