"""The inference engine and launch checks of a datagen or eval job, and its Infra marks.

Policy (seed §Eval "the Infra column is the launch-check set"; CONTRACT §6):

- ``engine-idle`` needs both, on the log's own clock plus the file's age
  (``engine_quiet_minutes``/``engine_zero_minutes``): no engine 200 for ``engine_idle_minutes``
  (none in the tail counts once the job has run that long), and zero running requests for as
  long, from the first snapshot of the current run of zeros. One fresh ``Running: 0 reqs`` is
  not enough; a log with no running-request snapshot never proves idleness. Not in bring-up:
  before the run's first trial ends, within the bucket's stall window (``bring_up_minutes``
  from the job's start), an engine that came up (its warmup's 200) and waits on agents whose
  sandboxes are still starting is the seed's benign bring-up; past the window the stall rule
  ("no result.json at all") speaks.
- Engine failing: a 5xx burst (``EngineRules``) among the latest engine answers: ``engine✗``,
  verdict ``warning``, ``diagnose``. ``engine✓`` only for a 200 within the idle window (an old
  200 is ``engine?``).
- ``api-base-internal`` and ``auth-failures`` (>= ``auth_failures_min``) from the launch checks;
  auth failures also from the trials themselves (the last ``pass_rate_trials`` whose sandbox
  never came up, no agent phase, with an exception that is a 401/403, an invalid key or an
  ``AuthenticationError``: a sandbox provider refusing credentials is recorded in result.json,
  not necessarily in the launcher's log; a 401 inside an agent's own run is the task's). The
  log's count includes the tunnel's own refusals (cloudflared's ``error="Unauthorized: ..."``
  retry loop; CONTRACT: "repeated tunnel/sandbox auth failures") and the engine's (its access
  log's 401/403: ``--api-key`` set, the agents sending another): when either is most of it the
  Trend and diagnosis name the tunnel's credentials or the agents' key, else the provider.
"""

from __future__ import annotations

from datetime import datetime

from probes.harbor import never_started
from probes.logs.clock import minutes_on_log_clock
from probes.models import Frozen, InfraSignals
from report.cells import format_duration, shown_path
from report.findings import Findings, JudgeContext, Priority, minutes_since
from report.harbor_trials import infra_signals
from report.trend import shorten


class EngineRules(Frozen):
    """Engine-check thresholds of this module (defaults; the idle window itself is
    ``Thresholds.engine_idle_minutes``)."""

    burst_5xx: int = 3
    """5xx answers among the engine's last ``RECENT_RESPONSES`` (20) that make it failing; one
    or two stray errors in a busy log are not a burst."""

ENGINE_RULES = EngineRules()


def engine_idle_rule(ctx: JudgeContext, f: Findings, *, bring_up_minutes: float) -> bool:
    """Flag ``engine-idle`` on a RUNNING job whose engine served nothing for the idle window
    (never in bring-up: no trial of the run ended yet, started within ``bring_up_minutes``).

    Both must hold on the log's clock: no 200 for the window (none in the tail at all counts
    once the job has run longer than that), and zero running requests for the window, timed
    from the first zero snapshot of the current run of zeros (one fresh ``Running: 0 reqs``
    is a drained queue, not an idle engine).
    """
    path = infra_signals(ctx).engine_log_path
    if path is not None:  # the engine checks' own log: 'jobtables job' names it
        f.notes.append(shown_path(f"engine checks read {path}"))
    limit = ctx.settings.thresholds.engine_idle_minutes
    since_ok = engine_quiet_minutes(ctx)
    if since_ok is not None:
        no_ok = since_ok > limit
    else:
        ran = minutes_since(ctx.now, ctx.facts.record.start_time)
        no_ok = ran is not None and ran > limit
    # the first spell that lasted the window: zero running, requests stuck at 0 tokens/s, or
    # an SGLang engine that logged no batch (it logs none while it has no request)
    spells = ((engine_zero_minutes(ctx), "0 running reqs"),
              (engine_stuck_minutes(ctx), "stuck"),
              (engine_silent_minutes(ctx), "no engine stats logged"))
    idle_for, what = next(((m, w) for m, w in spells if m is not None and m > limit),
                          (None, ""))
    if not no_ok or idle_for is None or not ctx.running or _bring_up(ctx, f, bring_up_minutes):
        return False
    f.flag("engine-idle")
    f.verdict("warning")
    quiet = f" for {format_duration(min(idle_for, since_ok or idle_for) * 60)}"
    # whole within the Trend's width
    text = (f"Engine idle{quiet}: no 200s, {what}" if what != "stuck"
            else f"Engine down{quiet}: no 200s, "
            f"{infra_signals(ctx).engine_running_requests} running reqs at 0 tokens/s")
    f.trend(Priority.DIAGNOSE - 1, text)
    f.recommend(Priority.DIAGNOSE - 1, "diagnose",
                text + "; agents not generating; confirm the engine is down first")
    return True


def _bring_up(ctx: JudgeContext, f: Findings, window: float) -> bool:
    """No trial of the run has ended yet and the job started within ``window`` minutes: its
    agents may not have reached the engine at all (sandboxes and images still coming up)."""
    ran = minutes_since(ctx.now, ctx.facts.record.start_time)
    return not f.metrics.get("trials") and ran is not None and ran <= window


def engine_failing_rule(ctx: JudgeContext, f: Findings) -> bool:
    """A burst of 5xx answers among the engine's latest: the engine is failing (``engine✗``)."""
    infra = infra_signals(ctx)
    window = infra.engine_recent_responses
    bad = infra.engine_5xx_recent
    if bad < ENGINE_RULES.burst_5xx:
        return False
    if ctx.running:
        f.verdict("warning")
        text = f"Engine failing: {bad}/{window} recent requests answered 5xx"
        f.trend(Priority.DIAGNOSE, text)
        f.recommend(Priority.DIAGNOSE, "diagnose", text + "; check the engine's own log")
    return True


def _on_log_clock(ctx: JudgeContext, since: datetime | None) -> float | None:
    """Minutes since the engine time ``since``, on the clock of the log it was read from: the
    engine's own log when the collector read one (``engine_log_mtime``), else the job's."""
    infra = infra_signals(ctx)
    if infra.engine_log_mtime is not None:  # no engine time read: no minutes (not the file's age)
        return None if since is None else minutes_on_log_clock(
            since, infra.engine_log_newest, infra.engine_log_mtime, ctx.now)
    newest = ctx.facts.summary.last_timestamp if ctx.facts.summary else None
    mtime = ctx.facts.log.mtime if ctx.facts.log else None
    if since is None or newest is None or mtime is None:
        return minutes_since(ctx.now, since)
    return minutes_on_log_clock(since, newest, mtime, ctx.now)


def engine_quiet_minutes(ctx: JudgeContext) -> float | None:
    """Minutes since the engine's last 200, measured like ``rules.silent_minutes``.

    Log timestamps are the cluster's local time with no zone, so the gap from the last 200 to
    the newest timestamped line is taken on the log's own clock, and the time since then from
    the file's (tz-aware) mtime: a cluster that is not on UTC is never "idle for 8 hours".
    """
    return _on_log_clock(ctx, infra_signals(ctx).last_engine_ok_at)


def engine_zero_minutes(ctx: JudgeContext) -> float | None:
    """Minutes the engine has reported zero running requests (None: not zero, or untimed)."""
    infra = infra_signals(ctx)
    if infra.engine_running_requests != 0:
        return None
    return _on_log_clock(ctx, infra.engine_zero_since)


def engine_stuck_minutes(ctx: JudgeContext) -> float | None:
    """Minutes the engine has reported requests running at 0 tokens/s (None: not so)."""
    infra = infra_signals(ctx)
    if not infra.engine_running_requests or infra.engine_stuck_since is None:
        return None
    return _on_log_clock(ctx, infra.engine_stuck_since)


def engine_silent_minutes(ctx: JudgeContext) -> float | None:
    """Minutes since the engine's latest line showing work (None: none, or an idle line after
    it). An engine logs its stats only while it has work (vLLM one idle line first): this long
    it has run nothing (SGLang idle) or logged nothing at all (a dead or wedged engine)."""
    return _on_log_clock(ctx, infra_signals(ctx).engine_busy_at)


def fresh_ok(ctx: JudgeContext) -> bool:
    """The engine's last 200 is within the idle window on the log's clock."""
    quiet = engine_quiet_minutes(ctx)
    return quiet is not None and quiet <= ctx.settings.thresholds.engine_idle_minutes


def launch_checks(ctx: JudgeContext, f: Findings) -> None:
    infra, th = infra_signals(ctx), ctx.settings.thresholds
    if infra.api_base_internal:
        f.flag("api-base-internal")
        f.verdict("warning")
        url = infra.api_base or "?"
        f.trend(Priority.DIAGNOSE - 2, shorten(f"api_base internal ({url}), not public"))
        f.recommend(Priority.DIAGNOSE - 2, "diagnose",  # not cut to the Trend's width
                    shorten(f"api_base is internal ({url}), not the public URL", 300))
    tree = ctx.facts.trials
    window = list(tree.trials[-th.pass_rate_trials:]) if tree and th.pass_rate_trials > 0 else []
    # The provider's refusal: a sandbox that never came up (no agent phase). A 401 met inside
    # an agent's run (curl, git, sudo, a tool's output) is the task's, whatever it says.
    in_trials = sum(t.auth_failure and never_started(t) for t in window)
    if infra.auth_failures >= th.auth_failures_min or in_trials >= th.auth_failures_min:
        f.flag("auth-failures")
        f.verdict("warning")
        if 2 * infra.tunnel_auth_failures > infra.auth_failures >= in_trials:
            text = (f"{infra.tunnel_auth_failures} tunnel auth failures: the tunnel's "
                    "credentials are refused")
        elif 2 * infra.engine_auth_failures > infra.auth_failures >= in_trials:
            text = (f"{infra.engine_auth_failures} engine 401/403s: the agents' API key is "
                    "refused")
        else:
            where = (f"{infra.auth_failures} auth failures" if infra.auth_failures >= in_trials
                     else f"{in_trials}/{len(window)} recent trials failed auth")
            text = f"{where}: sandbox provider degraded"
        f.trend(Priority.DIAGNOSE - 3, text)
        f.recommend(Priority.DIAGNOSE - 3, "diagnose", text)


def infra_marks(infra: InfraSignals, *, idle: bool, fresh: bool,
                no_traffic: bool = False) -> str:
    """``tunnel✓ api✓ engine✓`` with ✗ for a failing check and ? when the log says nothing.

    ``tunnel✗``: the tunnel failed, or (``no_traffic``) the trials fail instantly with null
    output, so a registered tunnel carries no traffic (the check is auth AND traffic).
    ``engine✗``: idle (no 200s, zero running) or failing (a 5xx burst). ``engine✓`` only for a
    200 within the idle window: an old 200 proves nothing about the engine now (``engine?``).
    """

    def mark(ok: bool | None) -> str:
        return "?" if ok is None else "✓" if ok else "✗"

    api = None if infra.api_base_internal is None else not infra.api_base_internal
    engine: bool | None = False if idle else (True if infra.engine_ok_requests and fresh
                                              else None)
    tunnel = False if no_traffic else infra.tunnel_ok
    return f"tunnel{mark(tunnel)} api{mark(api)} engine{mark(engine)}"
