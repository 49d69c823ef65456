"""Log parsing never runs on the event loop's thread (issue 12): a sweep's CPU work must not
delay a Slack ack. The real probes run on a real loop; parse_log records the thread it ran on."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from bot.cli import DEMO_RECORDING
from probes.config import ReplayCluster
from probes.logs import parse
from probes.slurm import assemble
from probes.slurm.replay import ReplayProbe


async def test_replay_sweep_parses_off_the_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    threads: list[threading.Thread] = []
    real = parse.parse_log

    def recording(*args: Any, **kw: Any) -> Any:
        threads.append(threading.current_thread())
        return real(*args, **kw)

    monkeypatch.setattr(assemble, "parse_log", recording)
    probe = ReplayProbe(ReplayCluster(name="demo", path=str(DEMO_RECORDING)))
    facts = await probe.collect()
    assert facts.status == "ok" and any(job.summary for job in facts.jobs)
    assert threads and threading.main_thread() not in threads
