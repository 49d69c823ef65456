"""Scheduler text whose bytes are not UTF-8: paths kept exact, every other text shown.

Policy: the login node decodes the scheduler's output with ``surrogateescape``
(``probes.remote.scheduler``), so a byte that is not UTF-8 is a lone surrogate, ``os.fsdecode``'s
form, and travels as ``\\udcXX`` (``scheduler.answer_bytes``): a record's workdir and StdOut
keep it, so the collector opens ``log\\xff_7.out`` itself (and an argv naming the job, such as
``squeue --name``, matches it). Every other text of a record (its name, user, reason, comment,
command, labels) is shown, and is made here what the sweep's document gives it on the login
node (``queue_document``): each such byte U+FFFD. The report shows the paths with ``\\xNN``
escapes (``report.cells.shown_path``).
"""

from __future__ import annotations

import re

from probes.models import JobFacts, SchedulerRecord

_SURROGATE = re.compile("[\ud800-\udfff]")
_SHOWN_FIELDS = ("name", "user", "reason", "dependency", "command", "comment", "nodes")
"""The record's texts that are shown, never opened (its paths are ``workdir``, ``stdout_path``)."""


def _shown(text: str) -> str:
    return _SURROGATE.sub("\ufffd", text)


def shown_record(record: SchedulerRecord) -> SchedulerRecord:
    """``record`` with each byte that is not UTF-8 in a text but its paths as U+FFFD (the
    same record when it holds none)."""
    update: dict[str, object] = {
        field: _shown(value) for field in _SHOWN_FIELDS
        if isinstance(value := getattr(record, field), str) and _SURROGATE.search(value)}
    if any(_SURROGATE.search(k + v) for k, v in record.labels.items()):
        update["labels"] = {_shown(k): _shown(v) for k, v in record.labels.items()}
    return record.model_copy(update=update) if update else record


def shown_facts(facts: JobFacts) -> JobFacts:
    """``facts`` with its record :func:`shown_record`."""
    record = shown_record(facts.record)
    return facts if record is facts.record else facts.model_copy(update={"record": record})
