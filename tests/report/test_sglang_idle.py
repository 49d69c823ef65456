"""Rulebook §Eval: "engine showing zero running requests for 10+ min -> agents not generating",
for an SGLang engine, which shows it by its silence.

SGLang's scheduler logs a ``Prefill batch`` line when it admits requests and a ``Decode batch``
line every ``decode_log_interval`` decode steps (``scheduler_metrics_mixin.log_prefill_stats`` /
``log_decode_stats``): an engine with nothing to run logs nothing at all, so its last batch line
still says ``#running-req: 3``. A ``Prefill batch`` line's ``#running-req`` is the batch running
beside the ``#new-seq`` it admits, so ``#running-req: 0`` there is one request starting, not an
empty engine. Lines are SGLang's shapes (its ``[%Y-%m-%d %H:%M:%S]`` prefix, ``TP0`` on
multi-rank servers) and uvicorn's stamp-less access line, as an eval's job log holds them.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from probes.logs.parse import parse_log
from probes.models import JobFacts
from tests.report.factories import NOW, judge, log, record, summary, tree, trial

POST = 'INFO:     127.0.0.1:40512 - "POST /v1/chat/completions HTTP/1.1" 200 OK'


def _decode(at: datetime, running: int, rank: str = "") -> str:
    return (f"[{at:%Y-%m-%d %H:%M:%S}{rank}] Decode batch. #running-req: {running}, "
            "#token: 48213, token usage: 0.31, cuda graph: True, gen throughput (token/s): "
            "1803.22, #queue-req: 0, ")


def _prefill(at: datetime, running: int, new: int = 1) -> str:
    return (f"[{at:%Y-%m-%d %H:%M:%S}] Prefill batch. #new-seq: {new}, #new-token: 8192, "
            f"#cached-token: 24576, token usage: 0.30, #running-req: {running}, #queue-req: 0, ")


def _busy(until: datetime, minutes: int = 20, rank: str = "") -> list[str]:
    """Agents generating: a prefill, a 200 and a decode line a minute up to ``until``."""
    out: list[str] = []
    for i in range(minutes, -1, -1):
        at = until - timedelta(minutes=i)
        out += [_prefill(at, 2), POST, _decode(at + timedelta(seconds=20), 3, rank)]
    return out


def _eval(lines: list[str], *, mtime: datetime) -> JobFacts:
    text = "\n".join(lines) + "\n"
    parsed = parse_log(text, mtime=mtime)
    return JobFacts(record=record("eval-qwen3-x-tbench"), log=log(text=text, mtime=mtime),
                    summary=summary(**parsed.model_dump(exclude={"points"})),
                    trials=tree([trial(1.0)] * 20, trials_total=300))


@pytest.mark.parametrize("rank", ["", " TP0"])
def test_an_sglang_engine_silent_for_the_idle_window_is_idle(rank: str) -> None:
    """Busy until 25 minutes ago, then not one batch line and no 200: SGLang's idle engine.
    It read healthy (replayed by a real sbatch eval job: 'engine✓'-less, no flag) because its
    last batch line says 3 running."""
    last = NOW - timedelta(minutes=25)
    detail = judge(_eval(_busy(last, rank=rank), mtime=last + timedelta(seconds=20)), now=NOW)
    assert "engine-idle" in detail.report.flags, (detail.report.flags, detail.report.trend)
    assert detail.report.verdict == "warning"
    assert "idle" in detail.report.trend.lower()
    assert detail.infra is not None and detail.infra.endswith("engine✗"), detail.infra


@pytest.mark.parametrize("quiet_min", [0, 6])
def test_an_sglang_engine_quiet_for_less_than_the_window_is_not_idle(quiet_min: int) -> None:
    last = NOW - timedelta(minutes=quiet_min)
    detail = judge(_eval(_busy(last), mtime=last + timedelta(seconds=20)), now=NOW)
    assert "engine-idle" not in detail.report.flags


def test_a_prefill_admitting_a_request_is_no_empty_engine() -> None:
    """A judge-style eval's prefill-only requests with uvicorn's access log off
    (``--log-level-http warning``): every line is a ``Prefill batch`` admitting a request
    beside ``#running-req: 0``. The engine is working: it is no run of zero snapshots."""
    lines = [_prefill(NOW - timedelta(minutes=i), 0) for i in range(30, -1, -1)]
    job = _eval(lines, mtime=NOW)
    assert job.summary is not None
    assert job.summary.infra.engine_running_requests == 1
    assert job.summary.infra.engine_zero_since is None
    assert "engine-idle" not in judge(job, now=NOW).report.flags


def test_the_silence_is_carried_across_incremental_reads() -> None:
    """The bot's warm sweeps fold a log in pieces: the last batch line's time is carried, so
    the folded reading equals the whole log's."""
    from tests.probes.logs.test_incremental import fold

    lines = _busy(NOW - timedelta(minutes=25))
    cut = len(lines) - 4
    chunks = ["\n".join(lines[:cut]) + "\n", "\n".join(lines[cut:]) + "\n"]
    folded, _ = fold(chunks, mtime=NOW)
    whole = parse_log(chunks[0] + chunks[1], mtime=NOW)
    assert folded.infra == whole.infra
    folded_again, _ = fold(["\n".join(lines) + "\n", POST + "\n"], mtime=NOW)
    assert folded_again.infra.engine_busy_at == whole.infra.engine_busy_at
