"""Turn the collector's raw answer for one job into :class:`JobFacts`.

Policy: shared by every file-system backed probe (SLURM over SSH, SLURM local, replay), so a
recorded cluster is judged by exactly the code that judged it live. The log tail goes through
the one parser (``probes.logs.parse.parse_log``); checkpoints and trials through their parsers.
When the tail holds no start-up config dump, the log's head (the collector sends its first
256 KiB beside a cut tail, on whole-tail reads only) is read for the run fingerprint; a cut
tail is parsed as one (``parse_log``'s ``log_start``), its head read for HF Trainer's banner.
A log that could not be read gives a ``LogFetch`` with its status and no summary: never a
made-up "no metrics". Once parsed, the tail gives way to its bounded excerpts
(``probes.logs.excerpt.retain``): a job's facts do not grow with its log.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError

from probes.harbor import build_trial_tree
from probes.logs.attempts import own_part
from probes.logs.excerpt import retain
from probes.logs.fingerprint import read_fingerprint
from probes.logs.lines import strip_ansi
from probes.logs.parse import head_before, parse_log
from probes.models import (
    ACTIVE_STATES,
    STALE_SKEW,
    CheckpointListing,
    CompletionCheck,
    CompletionFile,
    JobFacts,
    LogFetch,
    LogSummary,
    RunFingerprint,
    SchedulerRecord,
    TrialTree,
)
from probes.slurm.checkpoints import build_listing, unreadable_dirs
from probes.slurm.engine_log import with_engine_log


def job_facts(
    record: SchedulerRecord,
    collected: Mapping[str, Any] | None,
    *,
    aliases: Mapping[str, str],
    benign_patterns: Sequence[str],
    summarise: Callable[[LogFetch], LogSummary] | None = None,
    whole_tail: bool = False,
) -> JobFacts:
    """Assemble one job's facts from its scheduler record and the collector's answer.

    The log keeps bounded excerpts of its tail (``probes.logs.excerpt``); ``whole_tail`` keeps
    the tail itself, for a one-job read that parses it again (the deep probe), or a warm
    sweep that retains with what earlier reads kept (``probes.slurm.cursors``), whose fold
    ``summarise`` replaces ``parse_log``."""
    if not collected:
        return JobFacts(record=record)
    log = _log_fetch(collected.get("log") or {})
    head = (collected.get("log") or {}).get("head")
    log_start = log.offset == 0
    if summarise is None:  # a fold (probes.slurm.cursors) hands its own part already
        cut = _own_attempt(log, record)
        log_start = log_start or cut.offset != log.offset  # the attempt's own start
        log = cut
    summary = None
    if log.status in {"ok", "mismatch"}:
        summary = summarise(log) if summarise is not None else parse_log(
            log.text, aliases=aliases, benign_patterns=benign_patterns, mtime=log.mtime,
            log_start=log_start,
            head=head_before(head, log.offset) if isinstance(head, str) else None)
        if summary.fingerprint is None and isinstance(head, str) and head:
            # A long run's config dump is in its head only (the collector's head read).
            summary = summary.model_copy(update={"fingerprint": head_fingerprint(head)})
        summary = with_stderr(summary, (collected.get("log") or {}).get("stderr"),
                              record, aliases=aliases, benign_patterns=benign_patterns)
        summary = with_engine_log(summary, (collected.get("log") or {}).get("engine"), record)
    return JobFacts(
        record=record,
        log=log if whole_tail else retain(log, summary),
        summary=summary,
        checkpoints=_checkpoints(collected.get("checkpoints") or {}),
        trials=trial_tree(collected.get("trials") or {}, **run_span(record)),
        completion=completion_check(collected.get("completion"), record.start_time),
    )


def with_stderr(summary: LogSummary, raw: Any, record: SchedulerRecord, *,
                aliases: Mapping[str, str], benign_patterns: Sequence[str]) -> LogSummary:
    """``summary`` with what the job's separate StdErr (``sbatch -e``) adds: its faults (a
    traceback, CUDA OOM or NCCL error goes to stderr while the trainer's step dicts go to
    stdout, so the stdout alone reads a dead run as healthy), and the progress bar where the
    stdout has none (HF Trainer ``tqdm.write``s its dicts to stdout, its bar to stderr: the
    total, the bar and the rate). Only the job's own attempt of it counts (an appended file
    holds earlier attempts'), and its faults are numbered after the stdout tail's lines: which
    of the two streams came first is not known, and a live job's fault is its own whatever its
    place (``report.findings.this_launch``)."""
    if not isinstance(raw, Mapping) or raw.get("status") != "ok" or not raw.get("text"):
        return summary
    text, _ = own_part(str(raw["text"]), record.job_id, live=record.state in ACTIVE_STATES)
    err = parse_log(text, aliases=aliases, benign_patterns=benign_patterns)
    update: dict[str, Any] = {}
    if err.faults:
        after = max(summary.line_count, summary.relaunch_line or 0)
        update["faults"] = summary.faults + tuple(
            f.model_copy(update={"line_no": after + f.line_no}) for f in err.faults)
    if summary.progress is None and err.progress is not None:
        update["progress"] = err.progress
        if summary.total_steps is None:
            update["total_steps"] = err.total_steps
        if summary.sec_per_step is None:
            update["sec_per_step"] = err.sec_per_step
    return summary.model_copy(update=update) if update else summary


def run_span(record: SchedulerRecord) -> dict[str, datetime | None]:
    """``trial_tree``'s ``started`` and ``ended`` for the job (a live job's end time is its
    time limit, not an end)."""
    ended = record.end_time if record.state not in ACTIVE_STATES else None
    return {"started": record.start_time, "ended": ended}


def _own_attempt(log: LogFetch, record: SchedulerRecord) -> LogFetch:
    """The log as far as it is the job's own (``probes.logs.attempts``): a chain's attempts
    appending to one file each read their own part; ``offset`` moves past what was cut."""
    text, cut = own_part(log.text, record.job_id, live=record.state in ACTIVE_STATES)
    if text is log.text:
        return log
    return log.model_copy(update={"text": text, "offset": log.offset + cut})


def completion_check(raw: Any, started: datetime | None = None) -> CompletionCheck | None:
    """The collector's completion files (``probes.remote.completion``); malformed ones dropped,
    and so are those last written before the job ``started`` (beyond :data:`STALE_SKEW`): an
    earlier run's ``trainer_state.json`` left in a reused output dir says nothing of whether
    this run reached its total."""
    if not isinstance(raw, Mapping):
        return None
    files = []
    for source in raw.get("sources") or ():
        with contextlib.suppress(ValidationError, TypeError, ValueError, OverflowError, OSError):
            mtime = source.get("mtime")
            written = (datetime.fromtimestamp(mtime, UTC)
                       if isinstance(mtime, int | float) and not isinstance(mtime, bool) else None)
            if written is not None and started is not None and written < started - STALE_SKEW:
                continue
            files.append(CompletionFile.model_validate(
                {k: source.get(k) for k in ("path", "kind", "current_steps", "total_steps")}
                | {"finished": bool(source.get("finished")), "written_at": written,
                   "early_stopped": source.get("early_stopped") is True}))
    return CompletionCheck(files=tuple(files))


def head_fingerprint(head: str) -> RunFingerprint | None:
    """The fingerprint printed in a log's head (ANSI stripped, as the tail's lines are)."""
    return read_fingerprint([strip_ansi(line) for line in head.splitlines()])


def _log_fetch(raw: Mapping[str, Any]) -> LogFetch:
    mtime = raw.get("mtime")
    return LogFetch(
        requested_path=raw.get("requested"),
        path=raw.get("path"),
        status=raw.get("status", "failed"),
        error=raw.get("error"),
        size=raw.get("size"),
        mtime=_utc(mtime),
        text=raw.get("text") or "",
        offset=int(raw.get("offset") or 0),
        attempts=int(raw.get("attempts") or 1),
    )


def _utc(epoch: Any) -> datetime | None:
    """An epoch from the collector; anything unusable (NaN, absurd years) is unknown."""
    if not isinstance(epoch, int | float) or isinstance(epoch, bool):
        return None
    try:
        return datetime.fromtimestamp(epoch, tz=UTC)
    except (OverflowError, OSError, ValueError):
        return None


def _checkpoints(raw: Mapping[str, Any]) -> CheckpointListing | None:
    """The banked steps found; a directory that could not be read is kept (its steps are
    unknown, not absent: the report says why there is no banked step)."""
    listings = raw.get("listings") or {}
    errors = raw.get("errors")
    unreadable = unreadable_dirs(errors) if isinstance(errors, Mapping) else []
    if not listings and not unreadable:
        return None
    return build_listing(
        listings,
        export_listings=raw.get("exports") or None,
        latest_markers=raw.get("markers") or None,
        logged=[d for d in raw.get("logged") or () if isinstance(d, str)],
        unreadable=unreadable,
        written=_written_maps(raw),
    )


def _written_maps(raw: Mapping[str, Any]) -> dict[str, Any]:
    """The collector's step and export mtimes (``{dir: {name: mtime}}``) as one map."""
    maps: dict[str, Any] = {}
    for field, suffix in (("written", ""), ("exports_written", "/exports")):
        found = raw.get(field)
        if isinstance(found, Mapping):
            maps.update({f"{root}{suffix}": names for root, names in found.items()})
    return maps


START_RESOLUTION_S = 1.0
"""SLURM gives start times in whole seconds: a write within the start's own second may be the
run before's (an ``afterany`` successor starts the moment its predecessor ends, after the
predecessor's last write), so a job dir counts as written since the start only from the
second after it (the run's own is rewritten at every trial start and end)."""


def _epoch(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


def _in_run(job: Mapping[str, Any], started: datetime | None, ended: datetime | None) -> bool:
    """Whether a Harbor job dir can be the run of a job that started at ``started`` (and
    ended at ``ended``): last written (its job result.json, rewritten at every trial start
    and end, or a trial's result.json) after the start's second (``START_RESOLUTION_S``), and
    started (its config.json, written as a Harbor run starts or resumes) by the end's.
    Unknown times keep it. A dir created (its config.json) within the start's second or later
    is the run's however soon it was last written: an ``afterany`` predecessor's was created
    when that run started, before it ended (a tree copied in at the job's start is its own)."""
    created = _epoch(job.get("created"))
    own_start = started is not None and created is not None \
        and created >= math.floor(started.timestamp())
    if started is not None and not own_start:
        stamps = [t for t in (_epoch(job.get("mtime")),
                              _epoch((job.get("tally") or {}).get("newest_mtime")))
                  if t is not None]
        if stamps and max(stamps) < started.timestamp() + START_RESOLUTION_S:
            return False
    return ended is None or created is None \
        or created < ended.timestamp() + START_RESOLUTION_S


def _own_jobs(root: str, jobs: Mapping[str, Any], started: datetime | None,
              ended: datetime | None) -> Mapping[str, Any]:
    """The Harbor job dirs under a jobs dir that this job can have written. Runs launched one
    after another from one directory share Harbor's default ``jobs/`` (one dir per launch,
    named by its time): a dir last written before the job started is an earlier run's (a
    resumed one is written again), one started after it ended a later run's. A root that is
    itself a job or trials dir is kept whole."""
    return {job_dir: job for job_dir, job in jobs.items()
            if job_dir.rstrip("/") == root.rstrip("/") or _in_run(job, started, ended)}


def trial_tree(raw: Mapping[str, Any], *, started: datetime | None = None,
               ended: datetime | None = None) -> TrialTree | None:
    """Merge every existing trial root; several Harbor job dirs under one root are chunks.
    When some of them cannot be the job's own run (``_own_jobs``, from ``started`` to
    ``ended``), ``own_run`` is the tree of those that can (an eval reads it: a datagen run's
    chunks or an array's tasks are one run written at other times)."""
    existing = {root: v for root, v in raw.items() if v.get("exists")}
    if not existing:
        # A root that could not be read is not an absent one: its trials are unknown.
        failed = next(((root, v["error"]) for root, v in raw.items()
                       if isinstance(v.get("error"), str) and v["error"]), None)
        if failed is not None:
            return TrialTree(root=failed[0], exists=False, error=failed[1][:300])
        return None
    root, value = _first_root(existing, started, ended)
    jobs: Mapping[str, Any] = value.get("jobs") or {}
    tree = _merged(root, jobs)
    own = _own_jobs(root, jobs, started, ended)
    if len(own) < len(jobs):
        mine = _merged(root, own).model_copy(update={"job_dirs": tuple(own)})
        tree = tree.model_copy(update={"own_run": mine})
    return tree


def _first_root(existing: Mapping[str, Any], started: datetime | None,
                ended: datetime | None) -> tuple[str, Any]:
    """The root the run's tree is read from: the first (the dirs its log names come before
    the configured roots), unless it holds nothing while a later one holds job dirs this run
    can have written (``_in_run``): a wrapper that made and printed a trials dir Harbor never
    wrote to, its trials under the default ``jobs/``. An earlier run's job dirs there are not
    this run's: the empty dir stands."""
    first = next(iter(existing.items()))
    if first[1].get("jobs"):
        return first
    for root, value in existing.items():
        jobs: Mapping[str, Any] = value.get("jobs") or {}
        if any(_in_run(job, started, ended) for job in jobs.values()):
            return root, value
    return first


def _below_root(root: str, job_dir: str) -> str:
    """A chunk's name: its job dir's path below the trial root (``chunk-03``, or
    ``qwen3-8b/chunk-03`` under ``harbor run -o jobs/qwen3-8b``: chunk names may repeat across
    models), else its last component."""
    top, path = root.rstrip("/") + "/", job_dir.rstrip("/")
    return path[len(top):] if path.startswith(top) else path.rsplit("/", 1)[-1]


def _merged(root: str, jobs: Mapping[str, Any]) -> TrialTree:
    """One tree of these Harbor job dirs under ``root`` (several: chunks)."""
    if not jobs:
        return TrialTree(root=root, exists=True)
    trials: dict[str, Mapping[str, Any]] = {}
    job_meta: Mapping[str, Any] | None = None
    total = 0
    done = 0
    chunked = len(jobs) > 1
    stalest: tuple[float, str] | None = None
    for job_dir, job in jobs.items():
        # Trial dir names repeat across chunks; key them by chunk so none is lost.
        prefix = f"{_below_root(root, job_dir)}/" if chunked else ""
        trials.update({prefix + name: t for name, t in (job.get("trials") or {}).items()})
        meta = job.get("job") or {}
        newest = (job.get("tally") or {}).get("newest_mtime")
        if (chunked and not meta.get("finished_at") and isinstance(newest, int | float)
                and not isinstance(newest, bool) and (stalest is None or newest < stalest[0])):
            stalest = (float(newest), _below_root(root, job_dir))
        if meta:
            job_meta = meta
            total += int(meta.get("n_total_trials") or 0)
            done += 1 if meta.get("finished_at") else 0
    merged_job = dict(job_meta or {})
    if chunked and total:
        merged_job["n_total_trials"] = total
    # A single Harbor job dir is a run of one chunk (the Chunks cell reads 0/1, then 1/1); a
    # flat trials dir (no job result.json, no config.json) has no chunks to count.
    counted = chunked or any(job.get("job") or job.get("created") is not None
                             for job in jobs.values())
    tree = build_trial_tree(
        root,
        trials,
        job=merged_job or None,
        chunks_done=done if counted else None,
        chunks_total=len(jobs) if counted else None,
        tallies=[job["tally"] for job in jobs.values() if "tally" in job],  # whole-run counts
    )
    keys = (k for job in jobs.values() for k in (job.get("job") or {}).get("eval_keys") or ()
            if isinstance(k, str))
    written = [float(m) for job in jobs.values() if job.get("job")
               and isinstance(m := job.get("mtime"), int | float) and not isinstance(m, bool)]
    update: dict[str, Any] = {"job_mean": _job_mean(jobs.values()),
                              "harbor_completed": _harbor_completed(jobs.values()),
                              "harbor_written_at": _utc(max(written)) if written else None,
                              "eval_keys": tuple(dict.fromkeys(keys))}
    at = _utc(stalest[0]) if stalest is not None else None
    if stalest is not None and at is not None:
        update.update(stalest_chunk=stalest[1], stalest_chunk_at=at)
    return tree.model_copy(update=update)


def _harbor_completed(jobs: Iterable[Mapping[str, Any]]) -> int | None:
    """Harbor's ``n_completed_trials`` summed over the job dirs; None unless every one that
    holds trials (or was not counted: a tally cut short before it) wrote one."""
    total = 0
    for job in jobs:
        done = (job.get("job") or {}).get("n_completed")
        if isinstance(done, int) and not isinstance(done, bool) and done >= 0:
            total += done
            continue
        tally = job.get("tally") or {}
        if job.get("trials") or tally.get("trials") or tally.get("complete") is False:
            return None
    return total


def _job_mean(jobs: Iterable[Mapping[str, Any]]) -> float | None:
    """Harbor's ``Mean`` over the chunks (their job result.json's), weighted by each one's
    completed trials; None unless every chunk holding trials wrote one for its one eval
    (several agents or models in a job: its first eval's mean is not the job's) and counted
    its completed trials."""
    total = weight = 0.0
    for job in jobs:
        meta = job.get("job") or {}
        means, done = meta.get("eval_means"), meta.get("n_completed")
        mean = next(iter(means.values())) if isinstance(means, dict) and len(means) == 1 \
            else None
        if (not isinstance(mean, int | float) or isinstance(mean, bool)
                or not math.isfinite(mean) or not isinstance(done, int)
                or isinstance(done, bool) or done <= 0):
            if job.get("trials") or (job.get("tally") or {}).get("trials"):
                return None
            continue
        total, weight = total + mean * done, weight + done
    return total / weight if weight else None
