"""The launch checks of a job whose inference engine writes a log of its own.

Policy: the collector reads the engine's own log (``probes.remote.engine_logs``: ``vllm serve
... > vllm_$SLURM_JOB_ID.log`` beside a Harbor job's StdOut). Its engine lines (POSTs answered,
running-request snapshots, SGLang batches) fill the summary's engine checks when the job's own
log holds none: a job log that prints the engine's lines itself is the engine's log already.
The engine's times stay on the engine log's own clock (its newest stamp and its mtime ride in
``InfraSignals.engine_log_newest``/``engine_log_mtime``), as the two files' stamps need not
share a clock or a zone. Only the job's own attempt of the file counts (an appended file holds
earlier attempts').
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from probes.log_facts import LogSummary
from probes.logs.attempts import own_part
from probes.logs.parse import parse_log
from probes.models import ACTIVE_STATES, SchedulerRecord

_ENGINE_FIELDS = ("engine_ok_requests", "last_engine_ok_at", "engine_running_requests",
                  "engine_zero_since", "engine_stuck_since", "engine_busy_at",
                  "engine_5xx_recent", "engine_recent_responses", "engine_auth_failures")


def _has_engine_lines(summary: LogSummary) -> bool:
    infra = summary.infra
    return (infra.engine_ok_requests is not None or infra.engine_running_requests is not None
            or infra.engine_busy_at is not None)


def with_engine_log(summary: LogSummary, raw: Any, record: SchedulerRecord) -> LogSummary:
    """``summary`` with the engine checks read from the job's engine log ``raw`` (the
    collector's ``log.engine``), when the job log itself says nothing of the engine."""
    if (not isinstance(raw, Mapping) or raw.get("status") != "ok" or not raw.get("text")
            or _has_engine_lines(summary)):
        return summary
    mtime_s = raw.get("mtime")
    mtime = (datetime.fromtimestamp(mtime_s, UTC)
             if isinstance(mtime_s, int | float) and not isinstance(mtime_s, bool) else None)
    text, _ = own_part(str(raw["text"]), record.job_id, live=record.state in ACTIVE_STATES)
    engine = parse_log(text, mtime=mtime)
    if not _has_engine_lines(engine):
        return summary
    update: dict[str, Any] = {name: getattr(engine.infra, name) for name in _ENGINE_FIELDS}
    # the engine's refusals of the agents' key are auth failures the job log did not see
    update["auth_failures"] = summary.infra.auth_failures + engine.infra.engine_auth_failures
    update.update(engine_log_newest=engine.last_timestamp, engine_log_mtime=mtime,
                  engine_log_path=str(raw.get("path") or "") or None)
    return summary.model_copy(update={"infra": summary.infra.model_copy(update=update)})
