"""``jobtables probe`` as text and JSON: the verdict, its quoted reasons, what was read.

Policy: pure presentation. The text is the verdict line, the reasons (each already quoting its
evidence, escaped and cut by ``report.deep_probe.quote``) wrapped to the width, then what was
read. The JSON is the job's contract object (CONTRACT §3) with its ``deep_probe`` key. A job
that is no RL run was not probed (``report.deep_probe.not_applicable``): the text says so with
its row's verdict and trend, and the JSON is its contract object without ``deep_probe`` (the
contract's key for a probe that has run).
"""

from __future__ import annotations

import json

from report.cells import one_line, printable, shown_json
from report.deep_probe import not_applicable
from report.linebreaks import wrap_prose
from report.models import JobDetail
from report.render import job_object


def _wrap(text: str, width: int, indent: str = "") -> list[str]:
    # In display cells: a reason quoting a CJK completion is twice its length.
    return wrap_prose(text, width, indent or "", " " * len(indent) + "  ")


def render_probe_text(detail: JobDetail, *, width: int = 100) -> str:
    """The probe for a terminal: the name, paths and quotes are the cluster's text, so no
    control character of theirs is printed (``printable``; a name's line break as ␤)."""
    return printable(_probe_text(detail, width))


def _probe_text(detail: JobDetail, width: int) -> str:
    job = detail.report
    name = one_line(job.name)
    probe = job.deep_probe
    if probe is None:
        why = not_applicable(job)
        if why is None:
            return f"{job.cluster}:{job.job_id}: no deep probe has run"
        lines = _wrap(f"NOT AN RL RUN — no deep probe of {job.cluster}:{job.job_id} {name} "
                      f"({job.state.value})", width)
        lines += ["", *_wrap(why, width)]
        row = f"row: {job.verdict}" + (f" · {job.trend}" if job.trend else "")
        return "\n".join([*lines, "", *_wrap(row, width)])
    lines = _wrap(f"{probe.verdict} — deep probe of {job.cluster}:{job.job_id} {name} "
                  f"({job.state.value}, step {job.step if job.step is not None else '—'})", width)
    lines += ["", "Reasons:"]
    for reason in probe.reasons:
        lines += _wrap(reason, width, "- ")
    read = probe.read
    lines += ["", "Read:"]
    # Paths are cluster text: a line break in one shows as ␤, never starts a line of its own.
    lines += _wrap(f"log {one_line(read.get('log') or 'none')} "
                   f"({read.get('log_steps', 0)} logged steps)",
                   width, "  ")
    trials = read.get("trials") or {}
    if trials.get("listed"):
        running = f" (and {trials['unfinished']} unfinished)" if trials.get("unfinished") else ""
        lines += _wrap(f"trials: {trials.get('sampled', 0)} sampled of {trials['listed']} "
                       f"listed{running} under {one_line(', '.join(trials.get('roots') or []))}",
                       width, "  ")
    for dump in read.get("dumps") or []:
        steps = dump.get("steps_read") or []
        lines += _wrap(f"{dump['kind']} ({dump['role']}) {one_line(dump['path'])}: "
                       f"{dump['samples']} "
                       f"samples from steps {', '.join(map(str, steps)) or 'none'} of "
                       f"{dump['steps_listed']} listed", width, "  ")
    # No elapsed time: nothing ran on a login node (Kubernetes, or the reader never answered).
    elapsed = read.get("elapsed_s")
    lines += _wrap(f"cost: {read.get('files_opened', 0)} files, {read.get('bytes_read', 0)} bytes"
                   + (f", {elapsed} s on the login node" if elapsed is not None else ""),
                   width, "  ")
    for skipped in read.get("skipped") or []:
        lines += _wrap(f"skipped: {one_line(str(skipped))}", width, "  ")
    return "\n".join(lines)


def render_probe_json(detail: JobDetail) -> str:
    return shown_json(json.dumps(job_object(detail.report), indent=2, ensure_ascii=False,
                                 allow_nan=False))
