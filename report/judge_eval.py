"""Eval rules: stall, zombie, instant-fail, the hard-trial tail and never-started trials.

Policy (seed §Eval; CONTRACT §6):

- Datagen hung chunk: RUNNING, and neither a new result.json nor a log line for
  ``datagen_hung_minutes`` -> ``stall``; in a run of several Harbor job dirs (an array's tasks
  under one root) the new result.json may be another chunk's, so an unfinished chunk whose own
  newest result.json is that old, under this job's silent log, is the hung chunk (named).
  Eval stall: RUNNING and the newest result.json (or the
  start, when there is none) older than ``eval_stall_minutes``. Both silences are timed from no
  earlier than the job's own start: a resumed run or chain successor inherits older files.
  A count cut short by its time bound may have missed the newest result.json: the silence is
  then Harbor's own job result.json's, which it rewrites as each trial starts and ends.
  A nearly-done run (``TAIL_DONE_SHARE``) whose engine answered a 200 within the idle window
  and has requests running is serving its last, hard trials: its hard-trial tail, no stall
  (``_serving_tail``; seed: "verify the engine is actually down before blaming it"), for at
  most ``TAIL_STALL_FACTOR`` stall windows (then a trial that never returns).
- ``zombie``: every trial done but the job still RUNNING -> ``cancel_and_salvage``.
- ``instant-fail``: at least half of the last ``pass_rate_trials`` trials finished instantly with
  null output tokens, or after only their LLM client's retries ended in a connection failure
  (``probes.harbor.is_instant_fail``: terminus-2's take ~36 s): the tunnel carries no traffic.
  While a running eval's engine serves (a 200 within the idle window, requests running) the
  tunnel does carry traffic: fewer than ``INSTANT_FAIL_MIN`` instant trials (a fresh run's
  broken tasks end first) are a note; more are flagged, the diagnosis pointing at the agent.
- A high AgentTimeoutError share is not a problem: no flag; the trend says it is expected on
  hard sets. A burst of them among the latest trials of a nearly-done eval is its hard-trial
  tail (``_hard_tail_note``): said in the Trend, no flag. Only Harbor's passthrough
  exceptions (``PASSTHROUGH``: agent timeout, context or output length exceeded) are benign;
  any other exception with "timeout" in its name is not.
- Trials that never started (an exception, no agent phase or output, never scored: Harbor's
  null ``agent_result``/``verifier_result``, e.g. ``EnvironmentStartTimeoutError``): at least
  half of the last ``pass_rate_trials`` -> ``instant-fail`` (the agent never ran, null output:
  the same infra class), verdict ``warning``, ``diagnose`` the sandbox/environment provider.
  This holds for a running datagen run too: it generates nothing real ("Generating" would
  hide it, with avg_turns unknown the dead-engine gate cannot fire).
  Below that half, an eval whose recent trials include a share (``NEVER_STARTED_NOTE_SHARE``,
  at least 3) that never started says so in the Trend, no flag: infra, unscored, told apart
  from the agent timeouts the rulebook excuses.
"""

from __future__ import annotations

from datetime import datetime

from probes.harbor import TrialStats, never_started
from probes.models import InfraSignals, JobFacts, JobState, TrialTree
from report.cells import abbreviate_exception, format_duration
from report.eval_label import benchmarks, eval_suffix
from report.findings import Findings, JudgeContext, Priority, minutes_since
from report.harbor_engine import (
    engine_failing_rule,
    engine_idle_rule,
    fresh_ok,
    infra_marks,
    launch_checks,
)
from report.harbor_trials import (
    count_bound_note,
    counted_trials,
    harbor_silent_minutes,
    infra_signals,
    is_kubernetes,
    last_activity_minutes,
    never_started_rule,
    results_silent_since,
    timeout_note,
    trial_stats,
    unreadable_error,
    unreadable_note,
)
from report.log_progress import (
    LM_EVAL_DESCS,
    is_lm_eval_run,
    last_bar,
    lm_eval_progress,
    lm_eval_scores_note,
)
from report.rules import buffer_rule


def own_run_trials(facts: JobFacts) -> JobFacts:
    """An eval's trials are its own run's (``TrialTree.own_run``): evals launched one after
    another from one directory share Harbor's default ``jobs/``, and another eval's job dir
    is no chunk of this one (its trials made a running eval read ``12/12`` and ZOMBIE). An
    array task keeps the whole tree, its array's tasks being one run's chunks, unless the
    tree was last written before the array was submitted: then none of it is a wave of the
    array (an older eval's, read as its own before the task's job dir exists: ZOMBIE)."""
    tree = facts.trials
    if tree is None or tree.own_run is None:
        return facts
    if facts.record.array_job_id is not None:
        if written_before(tree, facts.record.submit_time):
            return facts.model_copy(update={"trials": tree.own_run})
        return facts
    if _log_vouches(facts, tree):
        return facts
    return facts.model_copy(update={"trials": tree.own_run})


def written_before(tree: TrialTree, submitted: datetime | None) -> bool:
    """Every result.json and Harbor job result.json of ``tree`` was last written before
    ``submitted`` (both known)."""
    stamps = [t for t in (tree.newest_result_at, tree.harbor_written_at) if t is not None]
    return submitted is not None and bool(stamps) and max(stamps) < submitted


def _log_vouches(facts: JobFacts, tree: TrialTree) -> bool:
    """No job dir was written since the job started, yet the job's own log counts trials done
    out of the tree's total (Harbor's ``<done>/<total>`` row): the tree is this run's, written
    within the start's second (a short run, a replay) or laid out with older times (copied
    with its times kept). A relaunch before its own job dir exists prints ``0/<total>``."""
    own, summary = tree.own_run, facts.summary
    if own is None or own.trials or (own.counts is not None and own.counts.trials):
        return False
    done = summary.harbor_done if summary is not None else None
    counted = tree.counts.trials if tree.counts is not None else len(tree.trials)
    return (done is not None and done > 0 and summary is not None
            and summary.harbor_total is not None and summary.harbor_total == tree.trials_total
            and done <= counted)


def judge_eval(ctx: JudgeContext, f: Findings) -> None:
    """Apply the eval rules to one job."""
    stats = trial_stats(ctx)
    _eval_metrics(ctx, f, stats)
    if ctx.facts.trials is not None:
        f.name_suffix += eval_suffix(ctx.facts.trials.eval_keys, ctx.facts.record.name)
        _mixed_benchmarks(ctx, f)
    idle = engine_idle_rule(ctx, f, bring_up_minutes=ctx.settings.thresholds.eval_stall_minutes)
    failing = engine_failing_rule(ctx, f)
    if ctx.state is JobState.PENDING:
        buffer_rule(ctx, f)
    no_traffic = _eval_running(ctx, f, stats) if ctx.running else False
    _completed_infra_rule(ctx, f)
    infra = infra_signals(ctx)
    f.infra = (None if infra == InfraSignals() and is_lm_eval_run(ctx)
               else infra_marks(infra, idle=idle or failing, fresh=fresh_ok(ctx),
                                no_traffic=no_traffic))
    launch_checks(ctx, f)
    timeout_note(f, stats)
    count_bound_note(f, stats)
    unreadable_note(ctx, f)
    if not f.metrics.get("trials"):
        lm_eval_scores_note(ctx, f)


def _mixed_benchmarks(ctx: JudgeContext, f: Findings) -> None:
    """A tree holding several benchmarks' Harbor jobs (an array's tasks writing into one
    ``jobs/``): no task's own benchmark can be told from it, so its counts and pass-rate are
    the benchmarks' together; the Trend says so, and how to keep them apart."""
    tree = ctx.facts.trials
    several = benchmarks(tree.eval_keys) if tree is not None else []
    if len(several) < 2:
        return
    f.trend(Priority.INFO - 1, f"{len(several)} benchmarks in one trial tree: pass-rate mixed")
    f.notes.append(f"trials of {', '.join(several)} in one trial tree: the counts and pass-rate "
                   "are theirs together; give each task its own trial root (a trial_roots "
                   "entry with {job_id}) to read one row per benchmark")


def _eval_metrics(ctx: JudgeContext, f: Findings, stats: TrialStats | None) -> None:
    summary, tree = ctx.facts.summary, ctx.facts.trials
    trials = counted_trials(ctx, stats) if stats else (summary.harbor_done if summary else None)
    total = (tree.trials_total if tree else None) or (stats.trials_total if stats else None)
    total = total or (summary.harbor_total if summary else None)
    if trials is not None:
        f.metrics["trials"] = float(trials)
    if total is not None:
        f.metrics["trials_total"] = float(total)
    if stats is not None and stats.pass_rate is not None:
        f.metrics["pass_rate"] = stats.pass_rate
    if stats is not None and stats.top_exception:
        f.metrics["top_exception"] = stats.top_exception


def _eval_running(ctx: JudgeContext, f: Findings, stats: TrialStats | None) -> bool:
    """The running eval's rules; True when its trials fail instantly with null output (the
    tunnel carries no traffic: the Infra column's ``tunnel✗``)."""
    trials, total = f.metrics.get("trials"), f.metrics.get("trials_total")
    if (isinstance(trials, float) and isinstance(total, float) and total > 0 and trials >= total
            and not _overfull(ctx, f, trials, total)):
        if _finishing(ctx, f, total):
            return False
        _flag_zombie(f, total)
        return False
    _progress_rule(ctx, f, stats, trials)
    recent = trial_stats(ctx, last_n=ctx.settings.thresholds.pass_rate_trials)
    instant = _instant_fail_rule(f, recent, serving=_engine_serving(ctx))
    if not never_started_rule(ctx, f, recent):
        _never_started_note(ctx, f)
    return instant


INSTANT_FAIL_MIN = 10
"""Instant trials a running eval needs for instant-fail while its engine serves the others:
instant failures end first, so a fresh run's first few (broken task images) are every trial
finished, beside agents the engine is answering."""


def _engine_serving(ctx: JudgeContext) -> bool:
    """The engine answered a 200 within the idle window and has requests running: traffic
    reaches it through the tunnel now."""
    return fresh_ok(ctx) and bool(infra_signals(ctx).engine_running_requests)


def _instant_fail_rule(f: Findings, recent: TrialStats | None, ended: str = "", *,
                       serving: bool = False) -> bool:
    """Half or more of the latest trials ended at once with null output: the tunnel carries
    no traffic (``ended``: what that makes of a finished eval's score). While the engine
    serves (``serving``), the tunnel does carry traffic: fewer than ``INSTANT_FAIL_MIN`` such
    trials are a note, more point at the agent; False then (the tunnel's mark stands)."""
    if recent is None or not recent.trials or 2 * recent.instant_fail < recent.trials:
        return False
    text = f"INSTANT-FAIL: {recent.instant_fail}/{recent.trials} trials, null output"
    if serving and recent.instant_fail < INSTANT_FAIL_MIN:
        note = (f"{recent.instant_fail}/{recent.trials} trials ended instantly "
                "(null output); engine serving")
        f.notes.append(note)
        f.trend(Priority.BACKGROUND + 2, note)
        return False
    f.flag("instant-fail")
    f.verdict("warning")
    f.trend(Priority.DIAGNOSE + 1, text)
    why = ("; the engine is serving other agents (fresh 200s): not the tunnel, check the "
           "agent and its sandbox" if serving else "; the tunnel is not carrying traffic")
    f.recommend(Priority.DIAGNOSE + 1, "diagnose", text + why + ended)
    return not serving


_NO_SCORE = "; its pass-rate is no score: diagnose before its cleanup reaps the evidence"


def _completed_infra_rule(ctx: JudgeContext, f: Findings) -> None:
    """A COMPLETED eval whose latest trials failed instantly or never started (the running
    eval's checks, over the finished run's trials): an infra failure, not a result."""
    if ctx.state is not JobState.COMPLETED:
        return
    recent = trial_stats(ctx, last_n=ctx.settings.thresholds.pass_rate_trials)
    if not _instant_fail_rule(f, recent, _NO_SCORE) and never_started_rule(ctx, f, recent):
        f.recommend(Priority.DIAGNOSE + 2, "diagnose",
                    f.settled_trend() + "; sandboxes never started" + _NO_SCORE)


def _overfull(ctx: JudgeContext, f: Findings, trials: float, total: float) -> bool:
    """More result.json files than the total while Harbor has not finished every job dir:
    they are not one run's (a Harbor job's total counts each trial it runs, attempts
    included, and a retried attempt's dir is removed): a second run writing the same job dir
    (an array's tasks sharing a job name, a rerun into it). The count says nothing of whether
    this run's trials are done; Harbor's job result.json (no ``finished_at``) says they are
    not. True when so: no zombie, the progress and stall rules judge it, the Trend says why."""
    tree = ctx.facts.trials
    if (trials <= total or tree is None or not tree.chunks_total or tree.chunks_done is None
            or tree.chunks_done >= tree.chunks_total):
        return False
    text = (f"{int(trials)} result.json for {int(total)} trials: more than one run writes "
            "this job dir; Harbor not finished")
    f.notes.append(text + " (its job result.json has no finished_at): the counts are not one "
                   "run's; give each run its own job name")
    f.trend(Priority.INFO - 1, text)
    return True


def _finishing(ctx: JudgeContext, f: Findings, total: float) -> bool:
    """Every trial done, but the last one (or the job's start, for a run resumed on a finished
    tree) within ``zombie_grace_minutes``: Harbor is writing its job result and exiting, no
    zombie yet. True when so (verdict healthy, the Trend says so)."""
    since, _ = results_silent_since(ctx)
    age = minutes_since(ctx.now, since)
    if age is None or age > ctx.settings.thresholds.zombie_grace_minutes:
        return False
    f.verdict("healthy")
    f.trend(Priority.BACKGROUND + 2, f"all {int(total)} trials done; finishing")
    return True


def _flag_zombie(f: Findings, total: float) -> None:
    """All ``total`` trials done and the job still running: a zombie, to cancel."""
    f.flag("zombie")
    f.verdict("stalled")
    f.trend(Priority.CANCEL, f"ZOMBIE: all {int(total)} trials done, still RUNNING")
    f.recommend(Priority.CANCEL, "cancel_and_salvage",
                "zombie: all trials done but job RUNNING")


def _progress_rule(ctx: JudgeContext, f: Findings, stats: TrialStats | None,
                   trials: float | str | None) -> None:
    """Stalled (no new result.json, or log line, for too long), an lm-eval run's progress,
    starting (no trial yet) or healthy; ``trials``: the trials counted (the metric)."""
    th = ctx.settings.thresholds
    tree = ctx.facts.trials
    since, newest = results_silent_since(ctx)
    age = minutes_since(ctx.now, since)
    # An lm-eval run (its request bars, no trial counted) writes no result.json at all.
    lm_bar = last_bar(ctx, LM_EVAL_DESCS) if not trials else None
    # No trial tree to list (Kubernetes) or one that could not be read, or no Harbor run: only
    # the log can say.
    log_only = ((tree is None and is_kubernetes(ctx)) or unreadable_error(ctx) is not None
                or lm_bar is not None)
    if log_only:
        log_age = last_activity_minutes(ctx)
        age = log_age if log_age is not None and age is not None else None
    # A count cut short by its time bound may have missed the newest result.json: only
    # Harbor's job result.json, rewritten as each trial starts and ends, can then say stall.
    counted = stats is None or stats.count_complete
    if not counted and not log_only:
        age, newest = harbor_silent_minutes(ctx), True
        counted = age is not None
    stalled = age is not None and age > th.eval_stall_minutes and counted
    if stalled and age is not None and not log_only and _serving_tail(ctx, f, age):
        f.verdict("healthy")
    elif stalled and age is not None:
        f.flag("stall")
        f.verdict("stalled")
        what = ("no new result.json" if newest
                else "no new log line" if log_only
                else "no new result.json since the job started" if tree and tree.newest_result_at
                else "no result.json at all")
        text = f"STALL: {what} for {format_duration(age * 60)}"
        f.trend(Priority.DIAGNOSE, text)
        f.recommend(Priority.DIAGNOSE, "diagnose", text + "; confirm the right log and window")
    elif lm_bar is not None:
        f.verdict("healthy")
        f.trend(Priority.BACKGROUND, lm_eval_progress(ctx, lm_bar))
    elif not trials:
        f.flag("buffer-filling")
        f.verdict("buffering")
        f.trend(Priority.BACKGROUND, "Starting; no result.json yet")
    else:
        f.verdict("healthy")
        f.trend(Priority.BACKGROUND, "healthy")
        _hard_tail_note(ctx, f, stats)

TAIL_TRIALS = 20
"""The latest finished trials the hard-trial tail is read over."""

TAIL_DONE_SHARE = 0.9
"""The share of its trials an eval has finished before its end is its tail."""
TAIL_STALL_FACTOR = 3.0
"""Stall windows of silence a serving tail may last (3 h at the default 60 min): past it, the
last trials' engine still busy is a trial that never returns (an agent looping with its
timeout off), the seed's "hung actor/trial", no longer a hard trial's tail."""


def _serving_tail(ctx: JudgeContext, f: Findings, age: float) -> bool:
    """Seed: "Before calling an eval dead ... a burst of timeouts in the last window is usually
    the hard-trial tail of a nearly-done run. Verify the engine is actually down (no recent
    200s)". A run with ``TAIL_DONE_SHARE`` of its trials done, no result.json for ``age``
    minutes (at most ``TAIL_STALL_FACTOR`` stall windows), whose engine answered a 200 within
    the idle window and has requests running, is generating for its last (hard) trials: the
    Trend says so, no stall."""
    trials, total = f.metrics.get("trials"), f.metrics.get("trials_total")
    running = infra_signals(ctx).engine_running_requests
    if (not isinstance(trials, float) or not isinstance(total, float) or total <= 0
            or trials < TAIL_DONE_SHARE * total or not running or not fresh_ok(ctx)
            or age > TAIL_STALL_FACTOR * ctx.settings.thresholds.eval_stall_minutes):
        return False
    f.trend(Priority.BACKGROUND + 2,
            f"hard-trial tail: {int(total - trials)} left, {running} running, engine 200s; "
            f"no result.json {format_duration(age * 60)}")
    return True


def _hard_tail_note(ctx: JudgeContext, f: Findings, stats: TrialStats | None) -> None:
    """Seed: "a burst of timeouts in the last window is usually the hard-trial tail of a
    nearly-done run". At least half of the latest ``TAIL_TRIALS`` finished trials timed out,
    twice the run's own share, with ``TAIL_DONE_SHARE`` of its trials done: the hard tasks
    finish last, at their timeout; the Trend says so (no flag: the trials are scored)."""
    tree = ctx.facts.trials
    trials, total = f.metrics.get("trials"), f.metrics.get("trials_total")
    if (tree is None or stats is None or not stats.completed or not isinstance(trials, float)
            or not isinstance(total, float) or total <= 0 or trials < TAIL_DONE_SHARE * total):
        return
    latest = [t for t in tree.trials if t.finished_at is not None][-TAIL_TRIALS:]
    timeouts = sum(t.exception_type == "AgentTimeoutError" for t in latest)
    share = stats.exceptions.get("AgentTimeoutError", 0) / stats.completed
    if len(latest) < 5 or 2 * timeouts < len(latest) or timeouts < 2 * share * len(latest):
        return
    note = (f"hard-trial tail: {timeouts}/{len(latest)} latest trials AgentTO, "
            f"{int(trials)}/{int(total)} done")
    f.notes.append(note)
    f.trend(Priority.BACKGROUND + 2, note)

NEVER_STARTED_NOTE_SHARE = 0.10
"""Share of the recent trials whose sandbox never started that the eval Trend names (below the
never-started rule's half): infra, not the model; the trials are unscored."""


def _never_started_note(ctx: JudgeContext, f: Findings) -> None:
    """Name the recent trials that never started (no flag): the rulebook tells a passthrough
    agent timeout (scored, expected on hard sets) from infra, and a pass-rate counting these
    trials as not passing is the provider's as much as the model's."""
    th = ctx.settings.thresholds
    tree = ctx.facts.trials
    window = list(tree.trials[-th.pass_rate_trials:]) if tree and th.pass_rate_trials > 0 else []
    unstarted = [t.exception_type or "?" for t in window if never_started(t)]
    if len(unstarted) < 3 or len(unstarted) < NEVER_STARTED_NOTE_SHARE * len(window):
        return
    top = max(sorted(set(unstarted)), key=unstarted.count)
    note = (f"{len(unstarted)}/{len(window)} recent never started "
            f"({abbreviate_exception(top)}): infra, unscored")
    f.notes.append(note)
    f.trend(Priority.BACKGROUND + 2, note)
