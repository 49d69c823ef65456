"""What the SLURM probe's commands answered: capabilities found missing, answers read.

Policy: a cluster feature that failed (``squeue --json``, ``sacct``) is believed missing for
a while (``Capability.recheck``, by the probe's clock) and then tried again: clusters get
upgraded, accounting gets switched on, and one failed command (a transient plugin error) must
not turn a feature off for good. Only stderr that says the option or the service does not
exist counts as missing; any other failure is the command's failure.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from probes.errors import CommandError, ProbeError
from probes.models import SchedulerRecord
from probes.remote.script import build_collector_script
from probes.slurm.answer import AnswerReader, OnJob, stream_answer
from probes.slurm.parse import past_banner
from probes.slurm.transport import Runner

NO_JSON = ("unrecognized option", "invalid option", "unknown option", "serializer", "plugin")
NO_SACCT = ("accounting storage is disabled", "unrecognized option", "invalid option",
            "could not start", "command not found", "not found")
RECHECK = timedelta(hours=1)
"""How long a missing feature is believed missing before it is probed again."""


@dataclass
class Capability:
    """One optional cluster feature: available until it fails, then re-probed after a while."""

    recheck: timedelta = RECHECK
    missing_since: datetime | None = None

    def worth_trying(self, now: datetime) -> bool:
        """True unless it failed less than ``recheck`` ago."""
        return self.missing_since is None or now - self.missing_since >= self.recheck

    def missing(self, now: datetime) -> None:
        self.missing_since = now

    def found(self) -> None:
        self.missing_since = None

    @property
    def believed(self) -> bool:
        """Believed available right now (nothing failed since it last worked)."""
        return self.missing_since is None


def mentions(text: str, needles: Sequence[str]) -> bool:
    low = text.lower()
    return any(n in low for n in needles)


def first_probe_error(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """The first ProbeError of a failed fan-out (one reason is enough for the report)."""
    for exc in group.exceptions:
        if isinstance(exc, BaseExceptionGroup):
            return first_probe_error(exc)
        if isinstance(exc, ProbeError):
            return exc
    return group


def queue_answer(reader: AnswerReader) -> dict[str, Any] | None:
    """The one-trip collector's answer (maybe partial: jobs it did not reach are missing from
    ``jobs``), or ``None`` when it printed no readable head with squeue's outcome."""
    answer = reader.answer()
    if answer is None:
        return None
    out = answer.get("squeue")
    if not isinstance(out, dict) or not isinstance(out.get("exit"), int) \
            or isinstance(out.get("exit"), bool):
        return None
    return answer


def json_document(text: str) -> dict[str, Any]:
    """squeue's ``--json`` text, parsed once; unreadable JSON is a :class:`CommandError`."""
    try:
        data = json.loads(past_banner(text))
    except (ValueError, RecursionError) as exc:  # RecursionError: nested past the parser
        raise CommandError(f"squeue --json printed invalid JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise CommandError("squeue --json output has no 'jobs' list")
    return data


def check_document(data: dict[str, Any], stderr: str, target: str) -> dict[str, Any]:
    """``data`` unless squeue reported errors in it (it exits 0 with an ``errors`` list and no
    jobs when, for example, munged is down): then a :class:`CommandError` saying why."""
    errors = data.get("errors")
    if not isinstance(errors, list) or not errors:
        return data
    said = "; ".join(
        f"{e.get('source') or 'squeue'}: {e.get('description') or e.get('error') or e}"
        if isinstance(e, dict) else str(e) for e in errors[:3])
    lines = [ln.strip() for ln in stderr.splitlines() if "error" in ln.lower()]
    detail = f" ({' / '.join(lines[-3:])})" if lines else ""
    raise CommandError(f"`squeue --json` on {target} reported: {said}{detail}"[:600])


async def run_collector(runner: Runner, request: Mapping[str, Any],
                        started: Sequence[SchedulerRecord], *,
                        on_job: OnJob | None = None,
                        ) -> dict[str, Any]:
    """The collector's answer per job id, read as it streams in (``on_job`` called for each
    job's entry as it arrives). One run, and a second for the jobs the first did not answer
    (killed midway, or no answer at all); a job neither answered is ``failed`` with the
    reason (fetch-failed, never "dead"), never dropped."""
    jobs: dict[str, Any] = {}
    error = "collector did not run"
    wanted = {r.job_id for r in started}
    for _attempt in (1, 2):
        left = [job for job in request.get("jobs", []) if str(job.get("id")) not in jobs]
        if not left:
            break
        reader = AnswerReader(on_job=on_job)
        res = await stream_answer(runner, build_collector_script({**request, "jobs": left}),
                                  reader)
        jobs.update({k: v for k, v in reader.jobs.items() if k in wanted})
        if reader.head is None:
            said = f" (its output began {reader.banner!r})" if reader.banner else ""
            error = (str(res.failure(runner.target)) if res.exit_status != 0 else
                     f"{reader.error or 'collector printed no answer'} on {runner.target}"
                     + said)
        elif not reader.ended:
            why = str(res.failure(runner.target)) if res.exit_status != 0 else \
                f"its answer ended early on {runner.target}"
            error = f"collector stopped before this job: {why}"
    return {r.job_id: jobs.get(r.job_id) or
            {"log": {"requested": r.stdout_path, "status": "failed", "error": error,
                     "attempts": 2}} for r in started}
