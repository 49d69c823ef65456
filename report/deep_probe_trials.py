"""The deep probe's checks of a run's Harbor trials: are they completing, and generating?

Policy (the trial half of :mod:`report.deep_probe`'s judgement; its module policy states the
whole): zero trials completing (every sampled trial ended in an exception with none scored,
none finished, or none has a result.json past ``unfinished_trial_minutes`` since the oldest
started, or since the job itself did if later: a restart's tree may hold its killed attempt's
unfinished trials), all-zero rewards, agents that ran in no time with no output token (engine
starvation), and the same on the newest third of the timed sample on its own, so a run that
died after healthy steps is not excused by its older trials; a newest third ending in
Harbor's passthrough exceptions (the hard tail of timeouts and context overflows) completed,
and so did such a trial in the whole sample: it is never "zero completing", an unscored one
counting as reward 0 (the trainer's) in the all-zero check.
:class:`TrialChecks` is the judge's base: the judge supplies how a reason is kept and the
text checks (``add``, ``noise``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from datetime import UTC, datetime

from probes.logs.fault_patterns import PASSTHROUGH
from probes.rollouts import TrialSample, TrialSampleSet
from report.settings import DeepProbeSettings


class TrialChecks:
    """The trial checks of one probe's judge (:class:`report.deep_probe._Judge`)."""

    s: DeepProbeSettings
    running_s: float | None
    reasons: list[str]
    source: str
    add: Callable[[str], None]
    """Keep a reason (the judge's own method)."""
    noise: Callable[[Sequence[str], str], bool]
    """The judge's garbage / repeated-token checks over one step's texts."""

    def trials(self, trials: TrialSampleSet) -> None:
        sampled = trials.sampled
        self.source = "trials"
        if not sampled:
            # Timed from the job's own start when that is later: a restart's tree may hold
            # its killed attempt's unfinished trials, hours older than the restart itself.
            age, since = trials.unfinished_age_s, "the oldest started"
            if age is not None and self.running_s is not None and self.running_s < age:
                age, since = self.running_s, "the job started"
            if trials.unfinished and age is not None and \
                    age >= self.s.unfinished_trial_minutes * 60:
                self.add(f"zero trials completing: none of {trials.unfinished} sampled trials "
                         f"(of {trials.listed}) has a result.json, {since} "
                         f"{age / 60:.0f} min ago")
            return
        n = len(sampled)
        excepted = [t for t in sampled if t.exception_type]
        # As the newest-third rule: a passthrough (timeout, overflow) completed its rollout,
        # unscored ones trained as reward 0, so it is never the sample's failure.
        completed = [t for t in sampled if _completed(t)]
        dead = not completed and (len(excepted) == n
                                  or all(t.finished_at is None for t in sampled))
        if len(excepted) == n and not completed:
            top = Counter(t.exception_type for t in excepted).most_common(1)[0]
            self.add(f"zero trials completing: all {n} sampled trials (of {trials.listed}) "
                     f"ended in an exception, none scored (top: {top[0]} x{top[1]}, e.g. "
                     f"{excepted[0].name})")
        elif all(t.finished_at is None for t in sampled):
            self.add(f"zero trials completing: none of {n} sampled trials (of {trials.listed}) "
                     f"has finished (e.g. {sampled[0].name})")
        elif len(completed) >= 2 and all(not t.reward for t in completed):
            self.add(_all_zero(completed, n))
        before = len(self.reasons)
        self.idle_agents(trials)
        # The newest third matters where older trials completed; a wholly dead sample has
        # said it all (and "older trials completed" would be false there).
        if len(self.reasons) == before and not dead:
            self.newest_trials(sampled)
        last = [t.messages[-1] for t in sampled if t.messages]
        if last:
            self.noise(last, f"the agents' last messages ({len(last)} trials)")

    def idle_agents(self, trials: TrialSampleSet) -> None:
        """Agents that ran in no time and wrote no output token: the engine served nothing."""
        timed = [(t, _seconds(t.agent_started_at, t.agent_finished_at)) for t in trials.sampled]
        ran = [(t, s) for t, s in timed if s is not None]
        if len(ran) < 2 or len(ran) < len(trials.sampled) // 2:
            return
        idle = [t for t, s in ran if s <= 1.0 and not t.n_output_tokens]
        if len(idle) == len(ran):
            self.add(f"engine starvation: all {len(ran)} sampled trials' agents ran for <= 1 s "
                     f"with no output tokens (e.g. {idle[0].name}: "
                     f"{_turns(idle[0].n_turns)} turns)")

    def newest_trials(self, sampled: Sequence[TrialSample]) -> None:
        """The LATEST trials on their own: a run whose engine or sandboxes died after healthy
        steps still has its older, healthy trials in the sample, and "every sampled trial"
        never holds. The newest third of the timed sample (at least :data:`NEWEST_TRIALS`)
        all ending in an exception with none completed (:func:`_completed`), or all idle
        agents, is the run now."""
        stamped = [(when, t) for t in sampled if (when := _when(t)) is not None]
        timed = [t for _, t in sorted(stamped, key=lambda pair: pair[0])]
        if len(timed) < 2 * NEWEST_TRIALS:
            return
        window = timed[-max(NEWEST_TRIALS, len(timed) // 3):]
        k, since = len(window), window[0].finished_at or window[0].started_at
        where = f"the newest {k} of {len(sampled)} sampled trials (since {since})"
        excepted = [t for t in window if t.exception_type]
        if len(excepted) == k and not any(map(_completed, window)):
            top = Counter(t.exception_type for t in excepted).most_common(1)[0]
            self.add(f"zero trials completing now: {where} all ended in an exception, none "
                     f"scored (top: {top[0]} x{top[1]}, e.g. {excepted[0].name}); older "
                     "trials completed")
            return
        ran = [(t, _seconds(t.agent_started_at, t.agent_finished_at)) for t in window]
        idle = [t for t, sec in ran if sec is not None and sec <= 1.0 and not t.n_output_tokens]
        if len(idle) == k:
            self.add(f"engine starvation now: {where} all had agents running <= 1 s with no "
                     f"output tokens (e.g. {idle[0].name}: "
                     f"{_turns(idle[0].n_turns)} turns); "
                     "older trials generated")


def _all_zero(completed: Sequence[TrialSample], n: int) -> str:
    """The all-zero-reward reason, saying which of the zeros are unscored passthroughs."""
    k = len(completed)
    unscored = [t for t in completed if t.reward is None]
    if not unscored:
        return f"all-zero reward: {k}/{k} scored trials of {n} sampled score 0 " \
               f"(e.g. {completed[0].name})"
    top = Counter(t.exception_type for t in unscored).most_common(1)[0]
    return (f"all-zero reward: {k}/{k} completed trials of {n} sampled score 0 "
            f"({len(unscored)} ended in passthrough exceptions, unscored: trained as reward 0; "
            f"top: {top[0]} x{top[1]}, e.g. {unscored[0].name})")


def _completed(trial: TrialSample) -> bool:
    """Scored, or ended in a Harbor passthrough exception (an agent timeout, a context or
    output overflow): the rulebook's "the rollout completes" (SkyRL's Harbor runs leave a
    context overflow unverified and train it as reward 0), so a hard tail of them is no death."""
    return trial.reward is not None or trial.exception_type in PASSTHROUGH


def _turns(turns: float | None) -> str:
    """A trial's turn count as Harbor wrote it (``1``, not the sample's float ``1.0``)."""
    if turns is None:
        return "—"
    return str(int(turns)) if float(turns).is_integer() else f"{turns:g}"


NEWEST_TRIALS = 8
"""The fewest latest trials the probe judges on their own (and half the timed sample it needs)."""


def _when(trial: TrialSample) -> datetime | None:
    """When a trial finished (else started), zone-aware (naive is taken as UTC)."""
    for raw in (trial.finished_at, trial.started_at):
        try:
            stamp = datetime.fromisoformat(raw) if raw else None
        except (ValueError, TypeError):
            stamp = None
        if stamp is not None:
            return stamp if stamp.tzinfo else stamp.replace(tzinfo=UTC)
    return None


def _seconds(start: str | None, end: str | None) -> float | None:
    try:
        if start and end:
            return (datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds()
    except (ValueError, TypeError):  # unparseable or mixed naive/aware stamps say nothing
        return None
    return None
