"""An engine that came up and waits on agents still starting is bring-up, not engine-idle.

Rulebook: "A fresh launch still in bring-up (gang/queue admission, mesh load, ... transient
image-pull self-heal — all BENIGN) goes in the buffer-filling table with — until its first step
lands"; "engine showing zero running requests for 10+ min -> agents not generating". SGLang's
server answers its own warmup request at start (``_execute_server_warmup`` posts ``/generate``,
then logs 'The server is fired up and ready to roll!') and logs nothing more until a request
comes; an eval's or datagen run's agents reach it only once their sandboxes are up (images
pulled). Sixteen minutes after the warmup with no trial ended, both read warning
[engine-idle] 'Engine idle for 16m: no 200s, no engine stats logged' beside buffer-filling.
Past the bucket's stall window the stall rule ('no result.json at all') speaks instead.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from probes.logs.parse import parse_log
from probes.models import JobFacts, TrialTree
from tests.report.factories import NOW, judge, log, record, summary, tree, trial


def _stamp(at: datetime) -> str:
    return f"[{at:%Y-%m-%d %H:%M:%S}]"


def _sglang_up(start: datetime, up: datetime) -> list[str]:
    """SGLang's launch lines as a job log holds them: weights loaded, uvicorn up, the warmup."""
    return [
        f"{_stamp(start)} server_args=ServerArgs(model_path='Qwen/Qwen3-8B', tp_size=1, "
        "port=30000)",
        f"{_stamp(start + timedelta(seconds=20))} Load weight begin. avail mem=78.50 GB",
        f"{_stamp(up - timedelta(seconds=40))} Load weight end. type=Qwen3ForCausalLM, "
        "dtype=torch.bfloat16, avail mem=62.10 GB, mem usage=16.40 GB.",
        f"{_stamp(up - timedelta(seconds=5))} INFO:     Uvicorn running on http://0.0.0.0:30000 "
        "(Press CTRL+C to quit)",
        f"{_stamp(up)} Prefill batch. #new-seq: 1, #new-token: 6, #cached-token: 0, token "
        "usage: 0.00, #running-req: 0, #queue-req: 0, ",
        'INFO:     127.0.0.1:51234 - "POST /generate HTTP/1.1" 200 OK',
        f"{_stamp(up + timedelta(seconds=2))} The server is fired up and ready to roll!",
    ]


def _job(name: str, started: timedelta, trials: TrialTree) -> JobFacts:
    start = NOW - started
    up = start + timedelta(minutes=4)
    text = "\n".join(_sglang_up(start, up)) + "\n"
    mtime = up + timedelta(seconds=2)
    parsed = parse_log(text, mtime=mtime)
    return JobFacts(record=record(name, start_time=start), log=log(text=text, mtime=mtime),
                    summary=summary(**parsed.model_dump(exclude={"points"})), trials=trials)


NO_TRIAL = tree([], trials_total=300, newest_result_at=None)


@pytest.mark.parametrize("name", ["eval-qwen3-x-tbench", "datagen-tb-synth"])
def test_an_engine_waiting_on_agents_still_starting_is_bring_up(name: str) -> None:
    report = judge(_job(name, timedelta(minutes=20), NO_TRIAL)).report
    assert "engine-idle" not in report.flags, report.trend
    assert report.verdict != "warning", report.trend
    if name.startswith("eval-"):
        assert report.flags == ["buffer-filling"] and report.verdict == "buffering"


def test_past_the_stall_window_an_eval_with_no_trial_is_a_stall() -> None:
    report = judge(_job("eval-qwen3-x-tbench", timedelta(minutes=75), NO_TRIAL)).report
    assert "stall" in report.flags, report.trend


@pytest.mark.parametrize("name", ["eval-qwen3-x-tbench", "datagen-tb-synth"])
def test_once_trials_have_ended_an_idle_engine_is_engine_idle(name: str) -> None:
    """Near miss: the same engine silent 16 minutes after agents finished trials through it."""
    done = tree([trial(1.0)] * 20, trials_total=300, newest_result_at=NOW - timedelta(minutes=3),
                chunks_done=0, chunks_total=2)
    report = judge(_job(name, timedelta(minutes=20), done)).report
    assert "engine-idle" in report.flags and report.verdict == "warning", report.trend
