"""What a sweep judges with, imported while its clusters answer rather than with ``bot.sweep``.

Policy: judging (``report.judge``, ``report.memory``) is imported by :func:`_import_judging`
on the event loop's thread before it goes to a worker thread, never at this module's import
(a cold CLI sweep imports it meanwhile, ``bot.preload``). :func:`build_report` and
:func:`next_memory` are the seams tests and benchmarks wrap; a sweep of recordings only is
judged at the recording time (:func:`_judging_time`).
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from probes.models import ClusterFacts

if TYPE_CHECKING:
    from report.memory import SweepMemory
    from report.models import JobDetail, Report


JUDGING = ("report.judge", "report.memory")
"""Imported by :func:`_import_judging`, not with this module: a cold CLI sweep imports them
while its clusters answer (``bot.preload``), not before it asks them."""


def _import_judging() -> None:
    """:data:`JUDGING`, imported on the event loop's thread before judging goes to a worker
    thread: never first in that thread while ``bot.preload`` imports on the loop's (two
    threads importing one module graph at once could meet a half-initialised module)."""
    for name in JUDGING:
        importlib.import_module(name)


def build_report(facts: Sequence[ClusterFacts], **kwargs: Any,
                 ) -> tuple[Report, dict[tuple[str, str], JobDetail]]:
    """``report.judge.build_report`` (see :data:`JUDGING`): the seam tests and benchmarks
    wrap."""
    from report.judge import build_report as judge  # (JUDGING)

    return judge(facts, **kwargs)


def next_memory(report: Report, details: Mapping[tuple[str, str], JobDetail],
                facts: Sequence[ClusterFacts], memory: SweepMemory | None) -> SweepMemory:
    """``report.memory.next_memory``, imported at its first use (as :func:`build_report`)."""
    from report.memory import next_memory as remember  # (JUDGING)

    return remember(report, details, facts, memory)

def _judging_time(facts: Sequence[ClusterFacts], now: datetime) -> datetime:
    """A sweep of recordings only is judged at the recording time, so stalls read as live."""
    ok = [f for f in facts if f.status == "ok"]
    if ok and all(f.kind == "replay" for f in ok):
        return max(f.collected_at for f in ok)
    return now
