"""The report as text (``--format text``), as JSON (``--format json``), and one job in depth.

Policy: pure presentation, no I/O. Text is the sweep header line followed by each titled box
table from :mod:`report.tables`; every line fits the requested width. JSON is exactly the
contract's §3 object: ``generated_at`` in UTC with a ``Z`` suffix and no microseconds; the SFT
grid rollup is not part of it (the CLI adds it as ``grids``, and the ``groups``). Non-finite
metric values (a NaN loss, an infinite grad norm) are **dropped from** ``metrics`` so that every
consumer's ``json.loads`` gets plain numbers and strict parsers never see ``NaN``: the run's
``nan-loss``/``grad-explosion`` flags carry that fact. In the per-job detail JSON (history,
evidence) a non-finite value becomes ``null``, so a NaN step stays visible in the history.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from rich.cells import cell_len

from probes.logs.metric_names import CONTRACT_NAMES
from report.boxes import NUMBER_HEAD_MIN
from report.cells import DASH, format_number, one_line, printable, shown_json
from report.linebreaks import wrap_prose
from report.models import ClusterReport, JobDetail, JobReport, Report
from report.tables import (
    BUCKET_TITLES,
    Column,
    RenderedTable,
    Row,
    is_buffering,
    job_label,
    render_box,
    render_bucket,
    render_tables,
)
from report.trend import sparkline

__all__ = [
    "job_detail_pieces", "render_job_detail", "render_job_json", "render_json", "render_tables",
    "render_text",
]

HISTORY_POINTS = 10

# The metrics worth a history column per bucket: (canonical name, header, decimals).
_HISTORY_METRICS: Mapping[str, tuple[tuple[str, str, int], ...]] = {
    "rl": (("reward", "reward", 3), ("policy_loss", "pol_loss", 4), ("loss", "loss", 4),
           ("entropy", "entropy", 3),
           ("grad_norm", "grad_norm", 3), ("log_ratio_abs_mean", "log_ratio", 3),
           ("imp_ratio_mean", "imp_ratio", 2)),
    "sft": (("loss", "loss", 3), ("grad_norm", "grad_norm", 3), ("learning_rate", "lr", 3)),
    "datagen": (("trials", "trials", 0), ("avg_turns", "avg_turns", 1),
                ("mean_reward", "mean", 2), ("exc_pct", "exc%", 0)),
    "eval": (("trials", "trials", 0), ("pass_rate", "pass-rate", 2)),
    "other": (),
}


def format_timestamp(moment: datetime) -> str:
    """``2026-11-30T16:00:00Z``: UTC, no microseconds (naive datetimes are taken as UTC)."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).replace(microsecond=0).strftime("%Y-%m-%dT%H:%M:%SZ")


def _wrap(text: str, width: int) -> list[str]:
    # In display cells (a CJK name is twice its length), broken as the tables' cells are.
    return wrap_prose(text, width)


def read_in_part(cluster: ClusterReport) -> str | None:
    """What an ok cluster could not read (a Kubernetes Role refusing JobSets), said in the
    headers; ``None`` for a whole read. A replay's detail is where it was recorded from: its
    provenance, no trouble, so the headers stay as for any ok cluster."""
    if cluster.status != "ok" or cluster.kind == "replay":
        return None
    return cluster.detail or None


def _header_line(report: Report) -> str:
    parts = [f"Jobs at {format_timestamp(report.generated_at)}"]
    inactive = [c.name for c in report.clusters if c.status == "inactive"]
    for cluster in report.clusters:
        if cluster.status == "ok":  # what it could not read (JobSets refused), if anything
            partial = read_in_part(cluster)
            parts.append(f"{cluster.name} ok" + (f" ({partial})" if partial else ""))
        elif cluster.status == "unreachable":
            parts.append(f"{cluster.name} UNREACHABLE ({cluster.detail or 'no reason given'})")
    if inactive:
        parts.append("inactive: " + ", ".join(inactive))
    return " · ".join(parts)


def render_text(
    report: Report, details: Mapping[tuple[str, str], JobDetail], *, width: int = 100,
) -> str:
    """The sweep as plain text: a header line, then each titled table (or a no-jobs line).

    The header (a cluster's detail) and the titles (a grid is named from its jobs' names) are
    cluster text: no control character of theirs reaches the terminal (``printable``)."""
    lines = _wrap(printable(_header_line(report)), width)
    tables = render_tables(report, details, width=width)
    if not tables:
        return "\n".join([*lines, "", "No active or recent jobs."])
    for table in tables:
        lines += ["", *_wrap(printable(table.title), width), table.text]
    return "\n".join(lines)


def _history_table(detail: JobDetail, width: int) -> tuple[RenderedTable, list[str]]:
    """The last points' table and one sparkline line per metric shown."""
    points = detail.history[-HISTORY_POINTS:]
    wanted = _HISTORY_METRICS.get(detail.report.bucket, ())
    if not wanted:
        names = sorted({name for point in points for name in point.values})[:5]
        wanted = tuple((name, name, 3) for name in names)
    shown = [m for m in wanted if any(m[0] in point.values for point in points)]
    steps = [DASH if detail.steps_unanchored else str(point.step) for point in points]
    values = [[format_number(point.values.get(name), d) for point in points]
              for name, _, d in shown]
    # As many metric columns as fit with whole numbers (a cut number misleads); the
    # sparkline lines below name every metric, with its first and last value.
    kept = len(shown)
    while kept > 1 and _columns_width([steps, *values[:kept]]) > width:
        kept -= 1
    columns = [Column("step", lambda r: "")] + [Column(m[1], lambda r: "") for m in shown[:kept]]
    cells = [[step, *(column[i] for column in values[:kept])] for i, step in enumerate(steps)]
    table = render_box(columns, cells, width=width)
    sparks = []
    label_width = max((len(header) for _, header, _ in shown), default=0)
    for name, header, decimals in shown:
        series = [p.values[name] for p in points if name in p.values]
        first, last = format_number(series[0], decimals), format_number(series[-1], decimals)
        line = f"{header:<{label_width}}  {sparkline(series, HISTORY_POINTS)}  {first} → {last}"
        sparks.extend(_wrap(line, width))
    return table, sparks


def _columns_width(columns: Sequence[Sequence[str]]) -> int:
    """The narrowest box of these numeric columns (headers wrap, values never)."""
    return sum(max([NUMBER_HEAD_MIN, *map(cell_len, column)]) + 3 for column in columns) + 1


def _evidence_table(detail: JobDetail, width: int) -> RenderedTable | str:
    """The signals' evidence as a table, or, when its numbers and a readable ``why`` cannot
    fit the width (six columns in 40), one wrapped line per signal and step."""
    columns = [Column("signal", lambda r: ""), Column("step", lambda r: ""),
               Column("value", lambda r: ""), Column("window mean", lambda r: ""),
               Column("fired", lambda r: ""), Column("why", lambda r: "", numeric=False)]
    cells = [
        [e.signal, DASH if detail.steps_unanchored else str(e.step), format_number(e.value, 4),
         format_number(e.window_mean, 4), "✓" if e.fired else "×", e.why or DASH]
        for e in detail.evidence  # (unanchored: a point's count, no step, as in the history)
    ]
    numbers = list(zip(*(row[:5] for row in cells), strict=True))
    if _columns_width(numbers) + 3 + EVIDENCE_WHY_MIN <= width:
        return render_box(columns, cells, width=width)
    return "\n".join(line for signal, step, value, mean, fired, why in cells
                     for line in _wrap(f"{fired} {signal} step {step}: {value} vs window "
                                       f"{mean} — {why}", width))


EVIDENCE_WHY_MIN = 12
"""The ``why`` column's narrowest readable width; narrower, evidence is told in lines."""


def _facts(detail: JobDetail, width: int) -> list[str]:
    job = detail.report
    facts = [f"Flags: {', '.join(job.flags) if job.flags else 'none'}"]
    if job.banked_step is not None:
        facts.append(f"Banked step: {job.banked_step}")
    if job.successor:
        facts.append(f"Successor: {job.successor}")
    if detail.collapse_step is not None and not detail.steps_unanchored:
        facts.append(f"Collapse rule fired at step {detail.collapse_step}")
    if detail.faults:
        facts.append("Faults: " + "; ".join(detail.faults))
    log = f"Log: {job.log_path or 'not found'}"
    facts.append(log + (f" (workdir {detail.workdir})" if detail.workdir else ""))
    if detail.note:
        facts.append(f"Note: {detail.note}")
    rec = job.recommendation
    facts.append(f"Recommendation: {rec.action} — {rec.why}" if rec else "Recommendation: none")
    # Each fact is one line: the paths, note, faults and why hold cluster text, and a line
    # break in one (sbatch -D $'/w\nx') must not start a line of its own (a forged fact), so
    # it shows as ␤, as in a name.
    return [line for fact in facts for line in _wrap(printable(one_line(fact)), width)]


def job_detail_pieces(detail: JobDetail, *, width: int = 100) -> list[str | RenderedTable]:
    """``jobtables job ID`` as pieces: plain text blocks and whole tables, in reading order.

    Chunkers (Slack) split the tables between rows and the text between lines; the CLI joins them.
    """
    job = detail.report
    label = job_label(job, detail)
    heading = (f"{label} — {job.cluster}:{job.job_id} · {BUCKET_TITLES[job.bucket]} · "
               f"{job.state.value} · verdict {job.verdict}")
    layout = "buffer" if is_buffering(job) else job.bucket
    pieces: list[str | RenderedTable] = [
        "\n".join(_wrap(printable(heading), width)),  # a name, a path: cluster text
        render_bucket(layout, [Row(job, detail, label)], width=width),
    ]
    if detail.history:
        table, sparks = _history_table(detail, width)
        pieces += [f"\nHistory (last {min(len(detail.history), HISTORY_POINTS)} points)",
                   table, "\n".join(sparks)]
    if detail.evidence:
        pieces += ["\nSignal evidence (value vs window)", _evidence_table(detail, width)]
    pieces.append("\n" + "\n".join(_facts(detail, width)))
    if detail.log_excerpt.strip():
        excerpt = printable(detail.log_excerpt.rstrip("\n")).split("\n")[-HISTORY_POINTS:]
        pieces.append("\n".join(["", "Log excerpt:"] + [
            piece for line in excerpt for piece in _wrap("  " + line, width)
        ]))
    return [p for p in pieces if not isinstance(p, str) or p]


def render_job_detail(detail: JobDetail, *, width: int = 100) -> str:
    """``jobtables job ID``: the row, recent history with sparklines, flags, evidence, advice."""
    return "\n".join(p if isinstance(p, str) else p.text
                     for p in job_detail_pieces(detail, width=width))


def _finite_or_none(value: Any) -> Any:
    """Replace non-finite floats anywhere in a JSON-ready structure with ``None``."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite_or_none(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite_or_none(v) for v in value]
    return value


def job_object(job: JobReport) -> dict[str, Any]:
    """One job exactly as the contract's §3 table lists it (non-finite metrics dropped):
    ``metrics`` holds §4's canonical names only. The built-in aliases' other targets (the
    positional ``log_ratio_pos_N``, ``log_ratio_batch_max``, ``z_clip_triggered``) are judged
    and shown in the text and in ``jobtables job``'s ``history``, never under a name a script
    holding the contract's list has no meaning for."""
    obj = job.model_dump(mode="json")
    if obj.get("deep_probe") is None:  # CONTRACT §3: the key is absent until a probe has run
        obj.pop("deep_probe", None)
    obj["metrics"] = {
        name: value for name, value in job.metrics.items()
        if name in CONTRACT_NAMES and (isinstance(value, str) or math.isfinite(value))
    }
    return obj


def _dumps(obj: Any) -> str:
    return shown_json(json.dumps(obj, indent=2, ensure_ascii=False, allow_nan=False))


def render_json(report: Report) -> str:
    """The contract's §3 object: ``generated_at``, ``clusters``, ``jobs`` (no grid)."""
    return _dumps({
        "generated_at": format_timestamp(report.generated_at),
        "clusters": [cluster.model_dump(mode="json") for cluster in report.clusters],
        "jobs": [job_object(job) for job in report.jobs],
    })


def _history_objects(history: Sequence[Any], *, steps: bool = True) -> list[dict[str, Any]]:
    """``steps`` False: the points' steps are their order only (``steps_unanchored``): null."""
    return [
        {"step": p.step if steps else None, "values": _finite_or_none(dict(p.values)),
         "wall_time": None if p.wall_time is None else format_timestamp(p.wall_time)}
        for p in history
    ]


def render_job_json(detail: JobDetail) -> str:
    """The job's contract object plus ``history``, ``evidence`` and the detail fields."""
    obj = job_object(detail.report)
    obj["history"] = _history_objects(detail.history, steps=not detail.steps_unanchored)
    obj["evidence"] = [_finite_or_none(e.model_dump(mode="python")) for e in detail.evidence]
    if detail.steps_unanchored:  # a point's count is no step (as in the history)
        for item in obj["evidence"]:
            item["step"] = None
    obj["collapse_step"] = None if detail.steps_unanchored else detail.collapse_step
    obj["faults"] = list(detail.faults)
    obj["workdir"] = detail.workdir
    obj["note"] = detail.note
    obj["infra"] = detail.infra
    obj["log_excerpt"] = detail.log_excerpt
    return _dumps(obj)
