"""Datagen rules: the realness gate, stranded traces and the hung chunk.

Policy (seed §Datagen; CONTRACT §6):

- ``dead-engine``: avg_turns <= ``dead_engine_turns`` -> do NOT consolidate (verdict
  ``warning`` while running, ``failed`` once terminal: the output is not real); over the run,
  or over its last ``pass_rate_trials`` trials (an engine that died mid-run: the run's mean
  hides its single-turn tail; the avg_turns column stays the run's). A running run needs
  ``_RECENT_TURNS_MIN`` trials with a turn count (its quickest, single-turn trials end first),
  unless every trial of it has ended.
- ``stranded-traces``: a datagen TIMEOUT with no chain successor killed the terminal upload ->
  ``consolidate_manually`` (unless the engine was dead: garbage is not consolidated); not when
  its trial tree, read whole, holds no finished trial: nothing was generated (``diagnose``).
- Datagen hung chunk: RUNNING, and neither a new result.json nor a log line for
  ``datagen_hung_minutes`` -> ``stall``; in a run of several Harbor job dirs (an array's tasks
  under one root) the new result.json may be another chunk's, so an unfinished chunk whose own
  newest result.json is that old, under this job's silent log, is the hung chunk (named).
  Eval stall: RUNNING and the newest result.json (or the
  start, when there is none) older than ``eval_stall_minutes``. Both silences are timed from no
  earlier than the job's own start: a resumed run or chain successor inherits older files
  (and a restart appending to its predecessor's log, its mtime the predecessor's). A run hung
  before its first trial is no bring-up: out of the buffer table.
- Trials that never started at least half of the last ``pass_rate_trials``: ``instant-fail``
  (``harbor_trials.never_started_rule``), for a running datagen run too, and for a COMPLETED
  one: ``diagnose``, never its cleanup (it generated nothing to consolidate).
"""

from __future__ import annotations

from probes.harbor import TrialStats, never_started
from probes.models import JobFacts, JobState, TrialResult
from report.cells import format_duration, format_value
from report.findings import Findings, JudgeContext, Priority, minutes_since
from report.harbor_engine import engine_failing_rule, engine_idle_rule
from report.harbor_trials import (
    count_bound_note,
    counted_trials,
    harbor_silent_minutes,
    is_kubernetes,
    last_activity_minutes,
    never_started_rule,
    results_silent_since,
    timeout_note,
    trial_stats,
    unreadable_error,
    unreadable_note,
)
from report.judge_eval import written_before
from report.log_progress import offline_generation
from report.rules import buffer_rule


def fresh_run_trials(facts: JobFacts) -> JobFacts:
    """A datagen run's job dirs are its chunks whenever written (a chain successor, submitted
    before its predecessor's last write, continues the same run), unless the whole tree was
    last written before the job was submitted: then none of it is this job's yet (a new run
    started in a finished one's workdir), only the job dirs it can have written (none, in
    its bring-up). Once it writes a chunk the whole tree counts again."""
    tree = facts.trials
    if tree is None or tree.own_run is None or not written_before(tree, facts.record.submit_time):
        return facts
    return facts.model_copy(update={"trials": tree.own_run})


def judge_datagen(ctx: JudgeContext, f: Findings) -> None:
    """Apply the datagen rules to one job."""
    th = ctx.settings.thresholds
    stats = trial_stats(ctx)
    _datagen_metrics(ctx, f, stats)
    if ctx.state is JobState.PENDING:
        buffer_rule(ctx, f)
    avg_turns = f.metrics.get("avg_turns")
    # a running run's first trials to end are its quickest (one turn and give up): too few
    # with a turn count to call the engine dead (a finished run's, or a run's whose every
    # trial has ended, are all there is)
    dead = (isinstance(avg_turns, float) and avg_turns <= th.dead_engine_turns
            and (not ctx.running or _turn_counted(ctx) >= _RECENT_TURNS_MIN
                 or _all_ended(stats)))
    recent = _recent_turns(ctx, stats) if not dead else None
    if dead or recent is not None:
        f.flag("dead-engine")
        f.verdict("warning" if ctx.running else "failed")
        text = (f"DEAD ENGINE: avg_turns {format_value(float(avg_turns or 0))}; do NOT consolidate"
                if recent is None else
                f"DEAD ENGINE: last {recent[0]} trials {format_value(recent[1])} turns; "
                "do NOT consolidate")
        dead = True
        f.trend(Priority.TERMINAL + 2, text)
        f.recommend(Priority.DIAGNOSE + 2, "diagnose", text + " (the rollouts are not real)")
    if ctx.state is JobState.TIMEOUT and ctx.successor is None:
        _stranded_rule(ctx, f, dead)
    if ctx.running:
        _datagen_running(ctx, f, stats)
    elif ctx.state is JobState.COMPLETED and never_started_rule(
            ctx, f, trial_stats(ctx, last_n=ctx.settings.thresholds.pass_rate_trials)):
        # A finished run whose sandboxes never came up generated nothing: its consolidation
        # (the cleanup routine's) would upload no traces, and reap the evidence.
        f.recommend(Priority.DIAGNOSE + 2, "diagnose", f.settled_trend()
                    + "; it generated nothing: do NOT consolidate; diagnose before its cleanup")
    timeout_note(f, stats, Priority.BACKGROUND - 1)  # below the chunks to go
    count_bound_note(f, stats)
    unreadable_note(ctx, f)

def _stranded_rule(ctx: JudgeContext, f: Findings, dead: bool) -> None:
    """A datagen TIMEOUT with no chain successor killed the terminal upload: its traces are on
    disk, to consolidate by hand. A trial tree read whole with no finished trial (and no
    Harbor row counting one) holds none: the run generated nothing before its walltime."""
    tree = ctx.facts.trials
    if tree is not None and tree.exists and not f.metrics.get("trials"):
        text = "TIMEOUT with no trial finished: nothing generated"
        f.trend(Priority.TERMINAL + 1, text)
        f.recommend(Priority.DIAGNOSE + 1, "diagnose",
                    f"{text} under {tree.root}; find why no trial returned (engine, sandboxes)")
        return
    f.flag("stranded-traces")
    root = tree.root if tree else "the trial tree"
    f.trend(Priority.TERMINAL + 1, "TIMEOUT stranded traces; consolidate manually")
    if not dead:
        f.recommend(Priority.DIAGNOSE + 1, "consolidate_manually",
                    f"TIMEOUT killed the terminal upload: traces are on disk at {root}")


_RECENT_TURNS_MIN = 10
"""Trials with a turn count the recent window needs before it can call the engine dead."""


def _all_ended(stats: TrialStats | None) -> bool:
    """Every trial of the run has ended (its whole count read): no slower trial is to come."""
    return (stats is not None and stats.count_complete and bool(stats.trials_total)
            and stats.completed >= (stats.trials_total or 0))


def _turn_counted(ctx: JudgeContext) -> int:
    """The run's trials with a turn count (the collector's whole-run count, else the records)."""
    tree = ctx.facts.trials
    if tree is None:
        return 0
    if tree.counts is not None:
        return tree.counts.turns_n
    return sum(t.n_turns is not None for t in tree.trials)


def _recent_turns(ctx: JudgeContext, stats: TrialStats | None) -> tuple[int, float] | None:
    """``(window, avg_turns)`` when the last ``pass_rate_trials`` trials average at most
    ``dead_engine_turns`` while the run's average does not: an engine that died mid-run leaves
    single-turn trials behind real ones, and the run's mean hides them. None otherwise (too few
    trials, or a run no longer than the window: the run's own gate is the same test)."""
    th = ctx.settings.thresholds
    window = th.pass_rate_trials
    if stats is None or window <= 0 or stats.trials <= window:
        return None
    recent = trial_stats(ctx, last_n=window)
    if recent is None or recent.avg_turns is None:
        return None
    counted = sum(t.n_turns is not None for t in ctx.facts.trials.trials[-window:]) \
        if ctx.facts.trials else 0
    if counted < _RECENT_TURNS_MIN or recent.avg_turns > th.dead_engine_turns:
        return None
    return min(window, recent.trials), recent.avg_turns


def _datagen_metrics(ctx: JudgeContext, f: Findings, stats: TrialStats | None) -> None:
    tree, summary = ctx.facts.trials, ctx.facts.summary
    if tree is not None:
        for key in ("chunks_done", "chunks_total"):
            value = getattr(tree, key)
            if value is not None:
                f.metrics[key] = float(value)
    harbor_done = summary.harbor_done if summary else None
    if stats is not None and stats.trials:
        f.metrics["trials"] = float(counted_trials(ctx, stats))
    elif harbor_done is not None:
        f.metrics["trials"] = float(harbor_done)
    if stats is not None and stats.avg_turns is not None:
        f.metrics["avg_turns"] = stats.avg_turns
    # The run's Mean: Harbor's own, from its job result.json(s), else ours over the trials.
    tree = ctx.facts.trials
    own = tree.job_mean if tree is not None else None
    run_mean = own if own is not None else (stats.mean_reward if stats else None)
    mean = summary.harbor_mean if summary and summary.harbor_mean is not None else run_mean
    line_total = summary.harbor_total if summary else None
    several = tree is not None and (tree.chunks_total or 0) > 1 and bool(tree.trials_total)
    if (line_total is not None and run_mean is not None
            and ((stats is not None and stats.trials > line_total)
                 or (several and tree is not None and line_total != tree.trials_total))):
        # The line counts fewer trials than the tree holds, or out of another total: one
        # chunk's line (a run of several Harbor job dirs prints one per chunk; an array task
        # its own). The Mean is the run's, over the Trials column.
        mean = run_mean
    if summary is not None and summary.harbor_metric not in (None, "Mean") \
            and run_mean is not None:
        # Reward files of several keys: the row shows the first key in sorted order ('Format'
        # before 'reward'); the trials' own reward (their 'reward' key first) is the mean reward.
        mean = run_mean
    if (stats is not None and stats.completed and stats.mean_reward is None
            and tree is not None and any(_ran_unscored(t) for t in tree.trials)):
        # Trials whose agent ran went unscored: no verifier. Harbor's Mean counts a None
        # reward as 0 and prints "Mean: 0.000"; the rulebook marks this — instead. (Trials
        # that all never started are an outage, not a missing verifier: Harbor's 0 stands.)
        mean = None
    if mean is not None:
        f.metrics["mean_reward"] = mean
    if stats is not None and stats.trials and stats.exc_pct is not None:
        f.metrics["exc_pct"] = stats.exc_pct


def _ran_unscored(trial: TrialResult) -> bool:
    """A trial that ended after its agent ran, with no reward: what no verifier leaves."""
    ended = trial.finished_at is not None or trial.exception_type is not None
    return ended and trial.reward is None and not never_started(trial)


def _datagen_running(ctx: JudgeContext, f: Findings, stats: TrialStats | None) -> None:
    th = ctx.settings.thresholds
    hung = _hung_rule(ctx, f, stats)
    engine_idle_rule(ctx, f, bring_up_minutes=th.datagen_hung_minutes)
    engine_failing_rule(ctx, f)
    if not f.metrics.get("trials") and not (stats and stats.trials):
        # A run hung past the window is no bring-up: it stays out of the buffer table.
        if hung or offline_generation(ctx, f):
            return
        f.flag("buffer-filling")
        f.verdict("buffering")
        f.trend(Priority.BACKGROUND, "Engine bring-up; no trial yet")
        return
    f.verdict("healthy")
    never_started_rule(ctx, f, trial_stats(ctx, last_n=th.pass_rate_trials))
    _chunks_trend(f)


def _hung_rule(ctx: JudgeContext, f: Findings, stats: TrialStats | None) -> bool:
    """The hung chunk: neither a new result.json nor a log line for ``datagen_hung_minutes``,
    both silences timed from no earlier than the job's start; True when it fired."""
    th = ctx.settings.thresholds
    tree = ctx.facts.trials
    results_age = minutes_since(ctx.now, results_silent_since(ctx)[0])
    log_age = last_activity_minutes(ctx)
    unread = unreadable_error(ctx) is not None
    if unread:
        results_age = log_age  # the trials are unknown: the log's silence alone speaks
    counted = stats is None or stats.count_complete  # a cut-short count may miss the newest
    if not counted and not unread:  # then Harbor's job result.json (rewritten as trials end)
        results_age = harbor_silent_minutes(ctx)
        counted = results_age is not None
    # A Kubernetes job has no trial tree to list: without a log time nothing says hung. (On
    # SLURM a missing tree is a trial root not made yet, which the age alone judges.)
    seen = tree is not None or log_age is not None or not is_kubernetes(ctx)
    chunk = ""
    chunk_age = _stalest_chunk_minutes(ctx)
    if (chunk_age is not None and (results_age is None or results_age <= th.datagen_hung_minutes)
            and log_age is not None and log_age > th.datagen_hung_minutes):
        # A chunk that stopped returning trials beside live ones (an array's other tasks keep
        # the tree's newest result.json fresh), under this job's silent log: the hung chunk.
        results_age, chunk = chunk_age, f" in {tree.stalest_chunk}" if tree else ""
    if not (seen and results_age is not None and results_age > th.datagen_hung_minutes
            and counted and (log_age is None or log_age > th.datagen_hung_minutes)):
        return False
    f.flag("stall")
    f.verdict("stalled")
    quiet = format_duration(results_age * 60)
    text = (f"HUNG: no new trial{chunk} for {quiet}, no log line for "
            f"{format_duration(log_age * 60)}"
            if log_age is not None and round(log_age) != round(results_age) and not unread
            else f"HUNG: no log line for {quiet} (trial tree unreadable)" if unread
            else f"HUNG: no new trial{chunk} for {quiet} (no log found)" if _no_log(ctx)
            else f"HUNG: no new trial{chunk} or log line for {quiet}")
    f.trend(Priority.DIAGNOSE, text)
    f.recommend(Priority.DIAGNOSE, "diagnose", text + "; find the chunk whose trial never returns")
    return True


def _no_log(ctx: JudgeContext) -> bool:
    """No log was found at all (``log-missing``): nothing says when it last spoke."""
    log = ctx.facts.log
    return log is not None and log.status == "missing"


def _chunks_trend(f: Findings) -> None:
    """A running run's progress by its chunks: those to go, or all done (Harbor finished every
    chunk it wrote: what runs now is no generation, but the terminal upload, another step of
    the script, or a hang the hung-chunk rule times)."""
    done, total = f.metrics.get("chunks_done"), f.metrics.get("chunks_total")
    if isinstance(done, float) and isinstance(total, float) and total > max(done, 1):
        left = int(total - done)
        f.trend(Priority.BACKGROUND, f"{left} chunk{'' if left == 1 else 's'} to go")
    elif isinstance(done, float) and isinstance(total, float) and done >= total >= 1:
        chunks = "chunk" if total == 1 else f"all {int(total)} chunks"
        f.trend(Priority.BACKGROUND, f"{chunks} done; job still running")
    else:
        f.trend(Priority.BACKGROUND, "Generating")


def _stalest_chunk_minutes(ctx: JudgeContext) -> float | None:
    """Minutes since the stalest unfinished chunk's newest result.json (None: not a run of
    several chunks, nothing timed, or a chunk whose newest result predates this job's start:
    one abandoned before it ran, by a killed earlier run, is not a chunk this job writes)."""
    tree = ctx.facts.trials
    at = tree.stalest_chunk_at if tree is not None else None
    if at is None:
        return None
    start = ctx.facts.record.start_time
    if start is not None and at < start:
        return None
    return minutes_since(ctx.now, at)
