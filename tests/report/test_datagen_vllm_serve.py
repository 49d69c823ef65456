"""Datagen: a client generating against a ``vllm serve`` engine is generating, not in bring-up.

Replayed on the real SLURM (sbatch, read through ``jobtables sweep --format json``):
``datagen-serve-ok`` started ``vllm serve`` (0.9.1: ``Starting vLLM API server 0 on
http://0.0.0.0:8000``, uvicorn's ``"POST /v1/chat/completions HTTP/1.1" 200 OK`` access lines,
the ``Engine 000: ... Running: 64 reqs, Waiting: 12 reqs`` stats every 10 s) and a client
script whose own tqdm bar counted the requests it had back (``Generating responses: 11%|...|
1140/10000``). It has no Harbor trial tree, and the row read verdict ``buffering``,
``buffer-filling``, "Engine bring-up; no trial yet" while the engine was answering 200s with 64
requests running: the rulebook's buffer table is for jobs with nothing yet.
"""

from __future__ import annotations

from datetime import timedelta

from probes.logs.excerpt import retain
from probes.logs.parse import parse_log
from probes.models import JobFacts, JobState
from tests.report.factories import NOW, judge, log, record

START = (
    "INFO 11-30 15:20:00 [api_server.py:1043] vLLM API server version 0.9.1\n"
    "INFO 11-30 15:20:00 [api_server.py:1090] Starting vLLM API server 0 on "
    "http://0.0.0.0:8000\n"
    "INFO:     Started server process [51234]\n"
    "INFO:     Waiting for application startup.\n"
    "INFO:     Application startup complete.\n"
    "Generating train split: 100%|██████████| 10000/10000 [00:00<00:00, 81234.56 examples/s]\n"
)


def _serving(minutes: int, done_per_tick: int = 30, total: int = 10000) -> str:
    """``minutes`` of a busy engine up to NOW: 200s, running-request stats, the client bar."""
    out, done = [], 0
    for tick in range(minutes * 6):
        at = NOW - timedelta(seconds=10 * (minutes * 6 - tick))
        out += ['INFO:     127.0.0.1:41234 - "POST /v1/chat/completions HTTP/1.1" 200 OK'] * 3
        out.append(f"INFO {at:%m-%d %H:%M:%S} [loggers.py:118] Engine 000: Avg prompt "
                   "throughput: 5123.4 tokens/s, Avg generation throughput: 1432.1 tokens/s, "
                   "Running: 64 reqs, Waiting: 12 reqs, GPU KV cache usage: 78.3%, Prefix "
                   "cache hit rate: 41.2%")
        done += done_per_tick
        pct = 100 * done // total
        out.append(f"Generating responses:  {pct:2d}%|{'█' * (10 * done // total):<10}| "
                   f"{done}/{total} [{tick // 6:02d}:00<30:00,  3.00it/s]")
    return "\n".join(out) + "\n"


def _report(text: str, state: JobState = JobState.RUNNING):  # type: ignore[no-untyped-def]
    summary = parse_log(text)
    facts = JobFacts(record=record("datagen-serve-ok", state=state),
                     log=retain(log(text=text), summary), summary=summary)
    return judge(facts).report


def test_a_served_engine_answering_requests_is_generating() -> None:
    report = _report(START + _serving(6))
    assert report.bucket == "datagen"
    assert report.verdict == "healthy", (report.verdict, report.trend)
    assert "buffer-filling" not in report.flags
    assert "bring-up" not in report.trend, report.trend
    assert "1080/10000" in report.trend, report.trend  # the client's request bar
    assert "trials" not in report.metrics  # requests are no Harbor trials


def test_the_dataset_bar_is_not_the_generation_progress() -> None:
    """A served engine whose client drew no bar of its own: the engine's work is the news, and
    the datasets library's load bar (10000/10000 examples) is not generation progress."""
    busy = "".join(line + "\n" for line in _serving(6).splitlines()
                   if not line.startswith("Generating responses"))
    report = _report(START + busy)
    assert report.verdict == "healthy", (report.verdict, report.trend)
    assert "buffer-filling" not in report.flags
    assert "10000/10000" not in report.trend, report.trend
    assert "64 running" in report.trend, report.trend


def test_an_engine_up_with_no_request_yet_is_bring_up() -> None:
    report = _report(START)
    assert report.verdict == "buffering" and "buffer-filling" in report.flags
    assert "bring-up" in report.trend
