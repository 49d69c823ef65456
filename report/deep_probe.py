"""The deep probe's judgement: read literal rollouts and say KILL or NO-KILL, quoting evidence.

Policy (seed: "New/untested RL run? -> deep-probe it, don't trust the row"; issue 14). Pure: facts
in (``probes.rollouts.RolloutFacts``), a :class:`~report.models.DeepProbe` out, no I/O. Each
check looks at the LATEST steps of every source (a dump directory, the log's printed
completions, the sampled trials; a validation dump for its text only) and, where it needs a
baseline, at the same source's first step or the validation dump. Every finding is a KILL
reason and quotes its evidence (escaped: control characters as ``\\xNN``, cut;
``report.sample_text``):

- weight-sync garbage: most samples are not language (non-printable or U+FFFD share), or are
  one token repeated; the step's compression ratio is far from the run's own baseline (not
  for answers far terser or longer that the verifier passes at least as often); the
  per-token log-ratio jumps while the samples turn to noise;
- collapsed diversity: most prompt groups' samples are identical or nearly so (3-gram overlap);
- degenerate lengths: every output empty, or every output cut at the max length;
- engine starvation: generation time dominating the step with tokens/s near 0, rollouts
  missing for steps the log shows (a dump written each step: verl's rollouts, SkyRL's training
  batches; not its evals, dumped every ``eval_interval``), or every sampled agent running
  0 s with no output token;
- zero trials completing: every sampled trial ended in an exception, or none finished (no
  result.json an hour after the oldest started, or after the job itself did if later: a
  restart's tree may hold its killed attempt's unfinished trials; ``unfinished_trial_minutes``); the
  newest third of the sampled trials (by finish time) is also judged on its own, so a run
  that died after healthy steps is not excused by its older trials (a trial ending in one of
  Harbor's passthrough exceptions, the hard tail of timeouts and context overflows, completed,
  in the newest third as in the whole sample: unscored, it counts as reward 0);
- reward pathologies: every group's reward constant (no learning signal), all-zero rewards,
  or rewards outside the configured verifier range;
- dead rollouts in the run's own printed series, by the row's ``dead-rollouts`` test and its
  thresholds (``report.rollouts.degenerate_reasons``: reward flat at 0, ~1-token responses,
  entropy ~0, grad norm exactly 0): the metrics are computed from the rollouts, so a run that
  dumps none and prints no completion is still judged, not waved through as "nothing to judge".
- a collapse in the run's own printed series, by the row's collapse rule and thresholds
  (``report.signals.collapse_scan``; its pass-rate signal needs the row's trial results, not
  the probe's sample): the seed's ">= 2 fire same step -> cancel + salvage" is never answered
  NO-KILL because the run dumps no rollouts.

With no finding the verdict is NO-KILL, and its one reason says what was read (or that
nothing was, so a person knows the probe could not see the rollouts; see
:mod:`report.deep_probe_read`).

The probe applies to RL runs only (:func:`not_applicable`): an SFT, datagen, eval or catch-all
job has no rollouts to read, and its Harbor trials or printed samples would be judged by RL
rules (an eval whose trials all time out would read "zero trials completing", KILL). Such a
job gets no verdict at all, never a NO-KILL that reads as "checked, healthy".
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import combinations
from statistics import mean, median

from probes.models import MetricPoint
from probes.rollouts import (
    RolloutDump,
    RolloutFacts,
    RolloutSample,
    RolloutStep,
)
from report.cells import one_line
from report.deep_probe_read import healthy_line, read_summary
from report.deep_probe_trials import TrialChecks
from report.findings import normalized_history
from report.models import DeepProbe, JobReport
from report.rollouts import degenerate_reasons
from report.sample_text import bad_char_share, compression_ratio, overlap, quote, repeated_unit
from report.settings import DeepProbeSettings, Thresholds
from report.signals import collapse_scan


def _groups(samples: Sequence[RolloutSample]) -> list[list[RolloutSample]]:
    by_prompt: dict[str, list[RolloutSample]] = {}
    for sample in samples:
        by_prompt.setdefault(sample.prompt or "", []).append(sample)
    return [g for g in by_prompt.values() if len(g) >= 2]


RESTYLED_LENGTH = 3.0
"""How many times terser or longer a step's answers must be than the baseline's before their
compression ratio is taken as confounded by length (:func:`_restyled`)."""


def _restyled(step: RolloutStep, baseline: RolloutStep) -> bool:
    """Answers that got terser or longer by :data:`RESTYLED_LENGTH` (zlib's ratio rises as texts
    shorten and falls as they lengthen, so it cannot tell style from noise there) which the
    verifier passes (reward > 0) at least as often as the baseline's, some of them: a run
    learning to answer tersely or to reason longer, not garbage, which passes nothing."""
    def length(samples: Sequence[RolloutSample]) -> float:
        return mean(s.output_chars or len(s.output) for s in samples) if samples else 0.0

    def share(samples: Sequence[RolloutSample]) -> float | None:
        scored = [s.score for s in samples if s.score is not None]
        return sum(1 for x in scored if x > 0) / len(scored) if scored else None

    now, then = length(step.samples), length(baseline.samples)
    if min(now, then) <= 0 or 1 / RESTYLED_LENGTH <= now / then <= RESTYLED_LENGTH:
        return False
    passed, before = share(step.samples), share(baseline.samples)
    return passed is not None and before is not None and passed > 0 and passed >= before


def _where(dump: RolloutDump, step: RolloutStep) -> str:
    name = {"trl-log": "TRL printed completions", "verl": "verl rollout dump",
            "skyrl-evals": "SkyRL eval dump"}.get(dump.kind, dump.kind)
    if dump.role == "validation":
        name = "verl validation dump" if dump.kind == "verl" else f"{name} (validation)"
    return f"step {step.step} ({name})"


class _Judge(TrialChecks):
    """One probe's findings, gathered source by source (the trials' checks in its base,
    :class:`report.deep_probe_trials.TrialChecks`)."""

    def __init__(self, facts: RolloutFacts, settings: DeepProbeSettings,
                 thresholds: Thresholds, running_s: float | None = None) -> None:
        self.facts = facts
        self.s = settings
        self.th = thresholds
        self.running_s = running_s
        self.reasons: list[str] = []
        self._seen: set[str] = set()
        self.source = ""

    def add(self, reason: str) -> None:
        """Keep one reason per check and source: the latest step is looked at first. A reason
        is one line (text and Slack show one per line); the cluster's text it names unquoted
        (a trial's name and exception type, a dump's path) shows a line break as ␤."""
        kind = self.source + "|" + reason.split(" at ", 1)[0].split(":", 1)[0]
        if kind not in self._seen:
            self._seen.add(kind)
            self.reasons.append(one_line(reason))

    # -- text --------------------------------------------------------------------------

    def noise(self, texts: Sequence[str], where: str, *, masked: str = "") -> bool:
        """Garbage / repeated-token checks over one step's texts; True if the step is noise.

        ``masked``: the character that stands for an unshowable byte in these texts (``?`` in
        log-sourced samples; see ``report.sample_text.bad_char_share``).
        """
        texts = [t for t in texts if t.strip()]
        if not texts:
            return False

        def bad(text: str) -> float:
            return bad_char_share(text, masked=masked)

        garbage = [t for t in texts if bad(t) >= self.s.garbage_char_share]
        units = [(t, repeated_unit(t, min_tokens=self.s.repeat_min_tokens,
                                   share=self.s.repeat_token_share)) for t in texts]
        repeats = [(t, u) for t, u in units if u is not None]
        share = self.s.noisy_sample_share
        if len(garbage) / len(texts) >= share:
            worst = max(garbage, key=bad)
            self.add(f"weight-sync garbage at {where}: {len(garbage)}/{len(texts)} samples are "
                     f"not language ({bad(worst):.0%} non-printable/replacement "
                     f"characters), e.g. {quote(worst)}")
        if len(repeats) / len(texts) >= share:
            text, unit = repeats[0]
            self.add(f"single token repeated at {where}: {len(repeats)}/{len(texts)} samples "
                     f"repeat {quote(unit, 20)}, e.g. {quote(text)}")
        return len(garbage) / len(texts) >= share or len(repeats) / len(texts) >= share

    def compression(self, dump: RolloutDump, step: RolloutStep,
                    baseline: RolloutStep | None, where: str) -> bool:
        if baseline is None:
            return False
        floor = self.s.compression_min_bytes
        now = compression_ratio((s.output for s in step.samples), floor)
        then = compression_ratio((s.output for s in baseline.samples), floor)
        if now is None or then is None or then <= 0:
            return False
        factor = now / then
        if factor > self.s.compression_factor or factor < 1 / self.s.compression_factor:
            if _restyled(step, baseline):
                return False
            self.add(f"compression ratio {now:.2f} at {where} vs {then:.2f} at the baseline "
                     f"step {baseline.step} ({factor:.1f}x): the text changed character, e.g. "
                     f"{quote(step.samples[0].output)}")
            return True
        return False

    def diversity(self, step: RolloutStep, where: str) -> None:
        groups = _groups(step.samples)
        if not groups:
            return
        collapsed = []
        for group in groups:
            outputs = [s.output for s in group]
            pairs = list(combinations(outputs, 2))
            if len(set(outputs)) == 1 or mean(overlap(a, b) for a, b in pairs) >= \
                    self.s.ngram_overlap:
                collapsed.append(group)
        if collapsed and len(collapsed) / len(groups) >= self.s.collapsed_group_share:
            g = collapsed[0]
            self.add(f"collapsed diversity at {where}: {len(collapsed)}/{len(groups)} prompts "
                     f"get identical or near-identical samples ({len(g)} samples of "
                     f"{quote(g[0].prompt or '', 40)} read {quote(g[0].output)})")

    def lengths(self, step: RolloutStep, where: str) -> None:
        if not step.samples:
            return
        if all(not s.output.strip() for s in step.samples):
            self.add(f"degenerate lengths at {where}: all {len(step.samples)} outputs are empty")
        reasons = [s.stop_reason for s in step.samples]
        if all(r == "length" for r in reasons):
            self.add(f"degenerate lengths at {where}: all {len(step.samples)} outputs were cut "
                     f"at the max length (stop_reason \"length\"), e.g. "
                     f"{quote(step.samples[0].output)}")

    def rewards(self, step: RolloutStep, where: str) -> None:
        scored = [s for s in step.samples if s.score is not None]
        if not scored:
            return
        outside: list[RolloutSample] = []
        if self.s.reward_range is not None:
            low, high = self.s.reward_range
            outside = [s for s in scored if s.score is not None and not low <= s.score <= high]
        if outside and self.s.reward_range is not None:
            self.add(f"reward outside the verifier's range [{low:g}, {high:g}] at {where}: "
                     f"{len(outside)}/{len(scored)} samples, e.g. {outside[0].score:g} for "
                     f"{quote(outside[0].output)}")
        if all(s.score == 0 for s in scored) and len(scored) >= 2:
            self.add(f"all-zero reward at {where}: {len(scored)}/{len(scored)} samples score 0 "
                     f"(no learning signal), e.g. {quote(scored[0].output)}")
            return
        groups = [[s.score for s in g if s.score is not None] for g in _groups(scored)]
        groups = [g for g in groups if len(g) >= 2]
        if groups and all(len(set(g)) == 1 for g in groups):
            values = ", ".join(f"{g[0]:g}" for g in groups[:4])
            self.add(f"constant reward in every group at {where}: {len(groups)} prompt groups "
                     f"each score one value ({values}): no learning signal")

    # -- sources -------------------------------------------------------------------------

    def dumps(self) -> None:
        validation = [d for d in self.facts.dumps if d.role == "validation" and d.steps]
        for dump in self.facts.dumps:
            steps = sorted(dump.steps, key=lambda s: s.step)
            if not steps:
                continue
            self.source = dump.path
            latest = steps[-self.s.latest_steps:]
            training = dump.role != "validation"
            baseline = steps[0] if steps[0] not in latest else (
                validation[0].steps[0] if validation and training else None)
            for step in reversed(latest):
                self.step_checks(dump, step, baseline, training=training)
            if training:
                self.missing(dump, steps)

    def step_checks(self, dump: RolloutDump, step: RolloutStep, baseline: RolloutStep | None,
                    *, training: bool) -> None:
        """One step's checks. A validation dump's text is judged (the same synced weights
        generate it; a run may dump nothing else), not its groups, rewards or cadence: greedy
        generations of a held-out set may repeat per prompt or score 0 on a hard benchmark,
        and are written every ``test_freq`` steps."""
        where = _where(dump, step)
        noisy = self.noise([s.output for s in step.samples], where,
                           masked="?" if step.source == "log" else "")
        changed = self.compression(dump, step, baseline, where)
        if noisy or changed:
            self.log_ratio(where)
        if training:
            self.diversity(step, where)
        self.lengths(step, where)
        if training:
            self.rewards(step, where)

    def missing(self, dump: RolloutDump, steps: Sequence[RolloutStep]) -> None:
        logged = [p.step for p in self.facts.series]
        listed = dump.steps_listed or tuple(s.step for s in steps)
        what = f"{dump.path} ends"
        if dump.kind == "skyrl-evals":
            # Evals are dumped every eval_interval steps, not each step (as verl's validation
            # dumps, which this rule skips): only the training batches SkyRL dumps each step
            # (dumped_data, listed beside them) say that a step has no rollouts.
            listed, what = dump.batch_steps, f"the training batches beside {dump.path} end"
        if not logged or not listed:
            return
        gap = max(logged) - max(listed)
        if gap > self.s.missing_steps:
            self.add(f"rollouts missing for logged steps: the log reaches step {max(logged)} "
                     f"but {what} at step {max(listed)} ({gap} steps without rollouts)")

    def log_ratio(self, where: str) -> None:
        series = [p.values["log_ratio_abs_mean"] for p in self.facts.series
                  if "log_ratio_abs_mean" in p.values]
        if len(series) < 3:
            return
        early = mean(series[:min(5, len(series) - 1)])
        if early > 0 and series[-1] > self.s.log_ratio_jump * early:
            self.add(f"per-token log-ratio jumped to {series[-1]:.4g} ({series[-1] / early:.0f}x "
                     f"the first steps' {early:.4g}) while the samples at {where} turned to "
                     "noise")

    def series(self) -> None:
        self.source = "series"
        points = self.facts.series[-self.s.latest_steps:]
        if points and all(p.values.get("clipped_ratio", 0) >= 0.99 for p in points):
            self.add(f"degenerate lengths: every output cut at the max length on the last "
                     f"{len(points)} logged steps (clipped ratio "
                     f"{points[-1].values['clipped_ratio']:g} at step {points[-1].step})")
        self.starvation(points)
        self.dead_series()
        self.collapsed_series()

    def dead_series(self) -> None:
        """The row's ``dead-rollouts`` test on the printed series (module policy)."""
        history = self.facts.series
        reasons = degenerate_reasons(history, self.th, self.facts.formats)
        if reasons and history:
            self.add(f"dead rollouts in the logged series (to step {history[-1].step}): "
                     + "; ".join(reasons))

    def collapsed_series(self) -> None:
        """The row's collapse rule on the printed series (seed: ">= 2 fire same step -> cancel
        + salvage"): a run its own series shows collapsed is never NO-KILL, rollouts or none."""
        scan = collapse_scan(normalized_history(self.facts.series), self.th)
        if scan.collapse_step is None:
            return
        began = (f" (began at step {scan.collapse_onset})"
                 if scan.collapse_onset not in (None, scan.collapse_step) else "")
        self.add(f"collapse in the logged series at step {scan.collapse_step}{began}: "
                 + "; ".join(e.why for e in scan.collapse_evidence))

    def starvation(self, points: Sequence[MetricPoint]) -> None:
        timed = [p for p in points if p.values.get("step_s") and "gen_s" in p.values]
        if not timed or len(timed) < len(points):
            return
        shares = [p.values["gen_s"] / p.values["step_s"] for p in timed]
        rates = [p.values["tokens_per_s"] for p in timed if "tokens_per_s" in p.values]
        early = [p.values["tokens_per_s"] for p in self.facts.series[:5] if "tokens_per_s"
                 in p.values]
        slow = bool(rates) and (max(rates) <= self.s.starved_tokens_per_s or (
            bool(early) and max(rates) < 0.05 * median(early)))
        if min(shares) >= self.s.starved_gen_share and slow:
            last = timed[-1]
            self.add(f"engine starvation: generation takes {min(shares):.0%} of every step on "
                     f"the last {len(timed)} steps (step {last.step}: gen "
                     f"{last.values['gen_s']:.0f}s of {last.values['step_s']:.0f}s) at "
                     f"{rates[-1]:.3g} tokens/s")


def judge_rollouts(facts: RolloutFacts, settings: DeepProbeSettings | None = None, *,
                   pending: bool = False, thresholds: Thresholds | None = None,
                   running_s: float | None = None) -> DeepProbe:
    """KILL with every finding quoted, or NO-KILL with what was read (``pending``: not started);
    ``thresholds``: the row's (``[thresholds]``), for the series' dead-rollouts test;
    ``running_s``: how long the job has run (its row's ``elapsed_s``), which bounds how long
    its unfinished trials can have been its own."""
    judge = _Judge(facts, settings or DeepProbeSettings(), thresholds or Thresholds(),
                   running_s)
    judge.dumps()
    judge.series()
    judge.trials(facts.trials)
    if judge.reasons:
        return DeepProbe(verdict="KILL", reasons=judge.reasons, read=read_summary(facts))
    return DeepProbe(verdict="NO-KILL", reasons=[one_line(healthy_line(facts, pending))],
                     read=read_summary(facts))


def not_applicable(job: JobReport, *, command: str = "jobtables job") -> str | None:
    """Why the deep probe does not apply to ``job`` (it is no RL run), else None; ``command``
    is what shows the job's row where this is read (Slack: ``/job``)."""
    if job.bucket == "rl":
        return None
    return (f"{job.cluster}:{job.job_id} {job.name} is not an RL run (bucket {job.bucket}): "
            "the deep probe judges an RL run's rollouts and does not apply here. "
            f"`{command} {job.cluster}:{job.job_id}` shows its row (an RL run in the wrong "
            "bucket? check [buckets] in the config)")
