"""One job's squeue records merged with scontrol's, each log where slurmstepd wrote it.

Policy (``probes.slurm.onejob``, command 1): squeue's records are the job's; scontrol adds
their paths. A hetjob component ``123+1`` keeps the id squeue prints for it; scontrol names it
by its own job id, so its record is matched by HetJobId/HetJobOffset (an id two lines claim is
trusted for neither). A path holding a backslash or a ``%`` is filled from squeue's raw
``--output`` as slurmstepd fills it, since scontrol 22.05 may print such a path wrongly.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from probes.models import SchedulerRecord
from probes.slurm.parse import expand_stdout, stdout_final
from probes.slurm.scontrol import (
    known_from,
    merge_scontrol,
    parse_scontrol_all,
    parse_scontrol_record,
)

_HET_HEAD = re.compile(r"^JobId=\d+ HetJobId=(\d+) HetJobOffset=(\d+) ", re.MULTILINE)


def _het_lines(scontrol: str) -> dict[str, str]:
    """``A+N`` -> that component's scontrol record (one per line with ``-o``); an id that two
    lines claim (a forged name) is trusted for neither."""
    out: dict[str, str] = {}
    seen: set[str] = set()
    starts = [m for m in _HET_HEAD.finditer(scontrol)]
    for i, m in enumerate(starts):
        key = f"{m.group(1)}+{m.group(2)}"
        stop = starts[i + 1].start() if i + 1 < len(starts) else len(scontrol)
        if key in seen:
            out.pop(key, None)
        else:
            out[key] = scontrol[m.start():stop].rstrip("\n")
        seen.add(key)
    return out


def _stdout_argv(nonce: str, job_id: str) -> list[str]:
    """squeue's raw ``--output`` of the job's records (``-O``: 22.05 prints it unexpanded,
    where scontrol expands it), each ``ID<F:nonce>PATH<O:nonce>``."""
    return ["squeue", "-h", "-t", "all", "-j", job_id, "-O",
            f"JOBARRAYID:0<F:{nonce}>,STDOUT:0<O:{nonce}>"]


def _raw_outputs(text: str, nonce: str) -> dict[str, str]:
    """``job id -> raw --output`` of each record of :func:`_stdout_argv` holding a backslash
    or a ``%`` (the patterns scontrol 22.05 may print wrongly)."""
    out: dict[str, str] = {}
    for chunk in text.split(f"<O:{nonce}>")[:-1]:
        job, sep, raw = chunk.lstrip("\n").partition(f"<F:{nonce}>")
        if sep and ("\\" in raw or "%" in raw):
            out[job.strip()] = raw
    return out


def _own_path(record: SchedulerRecord, fields: Mapping[str, str] | None,
              raw: str | None) -> SchedulerRecord:
    """The merged record with its log where slurmstepd wrote it: squeue's raw ``--output``
    (``raw``, read when scontrol's text holds a backslash or a ``%``) filled as slurmstepd
    fills it (``probes.remote.stdio_pattern``). scontrol 22.05's StdOut names no file for
    such a pattern: it expands a path holding a backslash (``esc\\_%j.out`` as
    ``esc\\_836.out``) where slurmstepd expands nothing, keeps ``%%`` doubled, prints ``%%j``
    as ``%<id>``, leaves ``%3a``/``%5j`` raw. A pattern not expandable here keeps scontrol's
    path, as before. An array task's ``%j`` is its own id (scontrol's ``JobId``)."""
    if raw is None:
        return expand_stdout(record)
    own = (fields or {}).get("JobId", "")
    if "_" in record.job_id and own.isdigit() and "slurm_job_id" not in record.labels:
        record = record.model_copy(update={"labels": {**record.labels, "slurm_job_id": own}})
    pattern = record.model_copy(update={"stdout_path": raw})
    filled = expand_stdout(pattern)
    return filled if stdout_final(pattern, filled) else expand_stdout(record)


def _merged(records: list[SchedulerRecord], scontrol: str,
            escaped: Mapping[str, str] | None = None) -> list[SchedulerRecord]:
    """squeue's records with scontrol's paths (or the raw ``--output`` filled, where it holds
    a backslash or a ``%``: ``escaped``, :func:`_own_path`). A hetjob component (``A+N`` in
    squeue) has its own job id in scontrol, so its record is found by
    ``HetJobId``/``HetJobOffset``."""
    plain = {r.job_id: r for r in records if "+" not in r.job_id}
    fields = parse_scontrol_all(scontrol, wanted=plain.keys(),
                                known={k: known_from(r) for k, r in plain.items()})
    het = _het_lines(scontrol) if len(plain) < len(records) else {}
    out = []
    for r in records:
        if r.job_id in het:
            got: Mapping[str, str] | None = parse_scontrol_record(het[r.job_id], known_from(r))
        else:
            got = fields.get(r.job_id)
        out.append(_own_path(merge_scontrol(r, got), got, (escaped or {}).get(r.job_id)))
    return out
