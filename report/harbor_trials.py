"""What datagen and eval rules read alike from a Harbor trial tree and its job's log.

Policy (seed §Datagen, §Eval; CONTRACT §6): the statistics, the silences and the notes both
buckets share; each bucket's own rules live in ``judge_datagen`` and ``judge_eval``.

- Trial counts come from the whole trial tree (``result.json`` over the run, not the tail);
  datagen's Mean is harbor's own ``<done>/<total> Mean: X`` line when present (unless its
  total is below the trials counted: one chunk's line, the run's mean is taken), and — when
  trials finished but none was scored (no verifier: Harbor's Mean then reads 0.000).
- A count cut short by the collector's time bound is a floor: the Trials cell takes Harbor's own
  count (its job result.json's completed trials) when that is higher, and the Trend says the
  count was bounded.
- A trial tree that could not be read (``TrialTree.error``: permission denied, a hung file
  system) is unknown, never "no result.json": stalls are judged on the log's silence alone
  (as with no tree to list) and the Trend says the tree was unreadable.
- A high AgentTimeoutError share is not a problem: no flag; the trend says it is expected on
  hard sets. A burst of them among the latest trials of a nearly-done eval is its hard-trial
  tail (``judge_eval._hard_tail_note``): said in the Trend, no flag. Only Harbor's passthrough
  exceptions (``PASSTHROUGH``: agent timeout, context or output length exceeded) are benign;
  any other exception with "timeout" in its name is not.
- Trials that never started (an exception, no agent phase or output, never scored: Harbor's
  null ``agent_result``/``verifier_result``, e.g. ``EnvironmentStartTimeoutError``): at least
  half of the last ``pass_rate_trials`` -> ``instant-fail`` (the agent never ran, null output:
  the same infra class), verdict ``warning``, ``diagnose`` the sandbox/environment provider
  (a running run once ``NEVER_STARTED_MIN`` of them: its first refusals end first).
  This holds for a running datagen run too: it generates nothing real ("Generating" would
  hide it, with avg_turns unknown the dead-engine gate cannot fire).
  Below that half, an eval whose recent trials include a share (``NEVER_STARTED_NOTE_SHARE``,
  at least 3) that never started says so in the Trend, no flag: infra, unscored, told apart
  from the agent timeouts the rulebook excuses.
"""

from __future__ import annotations

import re
from datetime import datetime

from probes.harbor import TrialStats, never_started, summarize_trials
from probes.logs.fault_patterns import PASSTHROUGH
from probes.logs.launch_checks import is_internal_url
from probes.models import InfraSignals
from report.findings import Findings, JudgeContext, Priority, minutes_since
from report.trend import shorten

_TIMEOUT_NOTE = "AgentTimeouts on top: expected on hard sets"


def trial_stats(ctx: JudgeContext, last_n: int | None = None) -> TrialStats | None:
    tree = ctx.facts.trials
    return summarize_trials(tree, last_n=last_n) if tree is not None and tree.exists else None


def last_activity_minutes(ctx: JudgeContext) -> float | None:
    """Minutes since the log last said anything, timed from no earlier than the job's own start
    (None when unknown).

    The file's mtime is zone-aware and says exactly that; a zone-less log timestamp is the
    cluster's local time (east of UTC it lies in the future and would hide a hung chunk
    forever), so it is used only when there is no mtime. A log last written before the job
    started (a restart appending to its predecessor's log, with no line of its own yet) is
    silent since the start, as an inherited trial tree is (``results_silent_since``): its
    mtime is the predecessor's, and a restart that queued for hours is not hours silent.
    """
    mtime = ctx.facts.log.mtime if ctx.facts.log else None
    age = (minutes_since(ctx.now, mtime) if mtime is not None else minutes_since(
        ctx.now, ctx.facts.summary.last_timestamp if ctx.facts.summary else None))
    ran = minutes_since(ctx.now, ctx.facts.record.start_time)
    return ran if age is not None and ran is not None and ran < age else age


def results_silent_since(ctx: JudgeContext) -> tuple[datetime | None, bool]:
    """When the trial tree last moved, for this job: the newest result.json, but never before
    the job's own start (a resumed run or a chain successor inherits a tree whose files predate
    it; their age is the previous attempt's, not this job's silence). The flag says whether the
    newest result.json is that time (else it is the start, or nothing is known)."""
    tree = ctx.facts.trials
    newest = tree.newest_result_at if tree else None
    start = ctx.facts.record.start_time
    if newest is not None and (start is None or newest >= start):
        return newest, True
    return start, False


def harbor_silent_minutes(ctx: JudgeContext) -> float | None:
    """Minutes since Harbor last wrote a job result.json of the tree (it does as each trial
    starts and ends), timed from no earlier than the job's own start; None when none was
    read. What a count cut short by its time bound cannot say, this can."""
    tree = ctx.facts.trials
    written = tree.harbor_written_at if tree is not None else None
    if written is None:
        return None
    start = ctx.facts.record.start_time
    return minutes_since(ctx.now, max(written, start) if start is not None else written)


def is_kubernetes(ctx: JudgeContext) -> bool:
    """A Kubernetes job (its record counts pods): no file system for the trial tree."""
    return ctx.facts.record.pods_total is not None


def unreadable_error(ctx: JudgeContext) -> str | None:
    """Why the trial tree could not be read (None: it was, or there is none): its trials are
    unknown, so only the log can say whether the job moves."""
    tree = ctx.facts.trials
    return tree.error if tree is not None and not tree.exists else None


def unreadable_note(ctx: JudgeContext, f: Findings) -> None:
    error = unreadable_error(ctx)
    if error is not None:
        note = "trial tree unreadable: " + _ERRNO.sub("", error)
        f.notes.append(shorten(note, 300))  # the whole path in 'jobtables job'
        f.trend(Priority.BACKGROUND + 5, shorten(note))
    unread = unread_results(ctx)
    if unread:
        f.notes.append(f"{unread} trial result.json file(s) there but unreadable (mode, or "
                       "cut off mid-write): counted as ended, reward unknown")
        f.trend(Priority.BACKGROUND + 5, f"{unread} result.json unreadable")

_ERRNO = re.compile(r"^\[Errno \d+\] ")


def infra_signals(ctx: JudgeContext) -> InfraSignals:
    """The log's launch checks; with no ``api_base`` printed, the endpoint the newest trial's
    recorded config points its agent at (Harbor keeps it in every trial's result.json)."""
    infra = ctx.facts.summary.infra if ctx.facts.summary else InfraSignals()
    tree = ctx.facts.trials
    if infra.api_base is not None or tree is None:
        return infra
    base = next((t.api_base for t in reversed(tree.trials) if t.api_base), None)
    if base is None:
        return infra
    return infra.model_copy(update={"api_base": base, "api_base_internal": is_internal_url(base)})


def timeout_note(f: Findings, stats: TrialStats | None,
                  priority: int = Priority.BACKGROUND + 1) -> None:
    """A passthrough exception on top is expected, not a fault (the trial is still scored);
    any other exception, whatever its name, is not excused here. Said of the top exception
    whatever its share (~20-25 % AgentTimeout is the rulebook's normal: it said "share high"
    at 17 %), below a datagen's own progress ("2 chunks to go")."""
    top = stats.top_exception if stats is not None else None
    if top is None or top not in PASSTHROUGH:
        return
    note = (_TIMEOUT_NOTE if top == "AgentTimeoutError"
            else f"{top} on top: passthrough, trials still scored")
    f.notes.append(note)
    f.trend(priority, note)


def counted_trials(ctx: JudgeContext, stats: TrialStats) -> int:
    """The run's result.json count: ours, or Harbor's own (its job result.json's completed
    trials) when our count was cut short by its time bound and Harbor's is higher: a floor is
    never the count a zombie or a Trials cell is read from when Harbor says more."""
    tree = ctx.facts.trials
    harbor = tree.harbor_completed if tree is not None else None
    ours = stats.trials + unread_results(ctx)
    if stats.count_complete or harbor is None:
        return ours
    return max(ours, harbor)


def unread_results(ctx: JudgeContext) -> int:
    """Trials whose result.json is there but could not be read or parsed (its mode, cut off
    mid-write): they ended (Harbor writes it as a trial ends), so they count in the Trials
    cell and the zombie rule, never in the pass-rate (their reward is unknown)."""
    tree = ctx.facts.trials
    return tree.counts.unreadable if tree is not None and tree.counts is not None else 0


def count_bound_note(f: Findings, stats: TrialStats | None) -> None:
    """Say when the collector's time bound stopped the result.json count: ``trials`` is then a
    floor (rulebook: "count result.json over the whole run"), never presented as the total."""
    if stats is None or stats.count_complete:
        return
    spent = f" in {stats.count_seconds:.0f}s" if stats.count_seconds is not None else ""
    f.trend(Priority.BACKGROUND + 5, f"≥{stats.trials} trials counted{spent} (time bound)")


NEVER_STARTED_MIN = 3
"""Trials that never started a running run needs before the never-started rule: a refused
sandbox ends in seconds, so a fresh run's first one or two are every trial finished so far
(the auth rule's and the eval's never-started note's count alike)."""


def never_started_rule(ctx: JudgeContext, f: Findings, recent: TrialStats | None) -> bool:
    """At least half of the last ``pass_rate_trials`` trials never started (an exception, no
    agent or verifier result): the sandboxes are not coming up. An eval or a datagen run alike
    (a datagen run of such trials generates nothing, however 'healthy' its count reads)."""
    th = ctx.settings.thresholds
    tree = ctx.facts.trials
    window = list(tree.trials[-th.pass_rate_trials:]) if tree and th.pass_rate_trials > 0 else []
    unstarted = sum(never_started(t) for t in window)
    if recent is None or not recent.trials or 2 * unstarted < recent.trials:
        return False
    if ctx.running and unstarted < NEVER_STARTED_MIN:
        return False  # a fresh run's first refusals end first: every trial finished so far
    f.flag("instant-fail")
    f.verdict("warning")
    top = recent.top_exception or "an exception"
    text = (f"NEVER STARTED: {unstarted}/{recent.trials} trials ({top}), "
            "no agent or verifier result")
    f.trend(Priority.DIAGNOSE + 1, text)
    f.recommend(Priority.DIAGNOSE + 1, "diagnose",
                text + "; sandboxes are not starting: check the environment provider")
    return True
