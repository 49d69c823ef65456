"""What a deep probe read, as its verdict reports it: the JSON ``read`` object and NO-KILL's
one reason.

Policy: a NO-KILL says what was read (samples from how many steps, trials of how many), or
that nothing was (the job still PENDING, or no rollout dump, printed completions or Harbor
trials found), so a person knows whether the probe could see the rollouts; a dump whose newest
steps gave no readable sample is named as unjudged. Pure, as :mod:`report.deep_probe`.
"""

from __future__ import annotations

from typing import Any

from probes.rollouts import RolloutFacts


def read_summary(facts: RolloutFacts) -> dict[str, Any]:
    """What the probe read, for the report and the JSON ``read`` object."""
    return {
        "log": facts.log_path,
        "log_steps": len(facts.series),
        "trials": {"roots": list(facts.trials.roots), "listed": facts.trials.listed,
                   "sampled": len(facts.trials.sampled),
                   "unfinished": facts.trials.unfinished},
        "dumps": [{"path": d.path, "kind": d.kind, "role": d.role,
                   "steps_listed": len(d.steps_listed),
                   "steps_read": [s.step for s in d.steps],
                   "samples": sum(len(s.samples) for s in d.steps)} for d in facts.dumps],
        "files_opened": facts.files_opened,
        "bytes_read": facts.bytes_read,
        "elapsed_s": round(facts.elapsed_s, 3) if facts.elapsed_s is not None else None,
        "skipped": list(facts.skipped[:10]),
    }


def healthy_line(facts: RolloutFacts, pending: bool) -> str:
    samples = sum(len(s.samples) for d in facts.dumps for s in d.steps)
    trials = len(facts.trials.sampled)
    if pending and not samples and not trials:
        return "nothing to judge yet: the job is still PENDING (no log, no rollouts)"
    unfinished, age = facts.trials.unfinished, facts.trials.unfinished_age_s
    if not samples and not trials and unfinished:
        since = f", the oldest started {age / 60:.0f} min ago" if age is not None else ""
        return (f"nothing to judge yet: none of {unfinished} sampled trials (of "
                f"{facts.trials.listed}) has finished{since}")
    if not samples and not trials and facts.skipped:
        # Something was there and not read (no permission, a link, a deadline): not "absent".
        return (f"nothing to judge: no rollouts could be read ({len(facts.skipped)} "
                f"skipped, e.g. {facts.skipped[0][:200]}); the row cannot be confirmed from "
                "its rollouts")
    if not samples and not trials:
        return ("nothing to judge: no rollouts were found (no rollout dump, printed completions "
                "or Harbor trials); the row cannot be confirmed from its rollouts")
    parts = []
    if samples:
        read = sum(1 for d in facts.dumps for s in d.steps if s.samples)
        parts.append(f"{samples} samples from {read} step{'' if read == 1 else 's'}")
    if trials:
        parts.append(f"{trials} of {facts.trials.listed} trials")
    return f"no pathology found in {' and '.join(parts)}" + "".join(
        f"; no readable sample in the newest step{'s' if ',' in steps else ''} {steps} of "
        f"{path}: unjudged"
        for path, steps in _unread_newest(facts))


def _unread_newest(facts: RolloutFacts) -> list[tuple[str, str]]:
    """``(dump path, "3, 4")`` for each dump whose newest steps read gave no sample (a file of
    NULs, a first line past the read bound, no JSON): the checks saw older steps only."""
    out = []
    for dump in facts.dumps:
        judged = [s.step for s in dump.steps if s.samples]
        newest = max(judged) if judged else None
        empty = sorted(s.step for s in dump.steps
                       if not s.samples and (newest is None or s.step > newest))
        if empty and judged:
            out.append((dump.path, ", ".join(str(step) for step in empty)))
    return out
