"""Completion -> the matching cleanup routine, the agentic/standard RL split, and the SFT
completion check.

Policy (seed "Cross-cutting", §SFT; CONTRACT §3/§6):

- Routine by bucket: SFT ``sft-job-cleanup``, datagen ``datagen-job-cleanup``, eval
  ``eval-agentic-cleanup``; RL by flavour, ``rl-agentic-job-cleanup`` or
  ``rl-standard-job-cleanup``.
- Agentic is a property of the *run*, never of what happens to lie on disk: Harbor or agent
  configuration (in the log, the batch command or the job's labels), agentic trial lines in the
  log (Harbor's progress line, SkyRL's Harbor generator lines and metrics, the passthrough
  exceptions only agents raise), or an object-store trial URI in the log. A trial directory
  under a default root proves nothing about the run.
- ``cleanup-pending``: the run's own on-disk trial tree is still there. An empty trial directory
  is no trial tree, a standard RL run has none, and an object-store-backed run leaves none to
  reap (seed: "routes the same way but leaves no on-disk trial tree").
- SFT completion check: a COMPLETED SFT job is routed to cleanup only once trainer_log.jsonl /
  trainer_state.json (``JobFacts.completion``) say it reached its total. Without either file the
  log's own step and total (banner/config) answer, allowing one logging interval of slack (a run
  logging every 10 steps ends on 910 of 916) and never overruling a log that says it finished.
  Short of the total: ``incomplete-run``, verdict ``warning``, recommendation ``diagnose``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from probes.models import JobFacts, JobState, TrialTree
from report.findings import Findings, JudgeContext, Priority
from report.models import Bucket, CleanupRoutine

_CLEANUP: dict[Bucket, CleanupRoutine] = {
    "sft": "sft-job-cleanup", "datagen": "datagen-job-cleanup", "eval": "eval-agentic-cleanup",
}
AGENT_MARKERS = re.compile(
    # Letter boundaries, not \b: ``run_harbor_grpo.sh`` and ``agent_config=terminus-2`` count.
    r"(?i:(?<![a-z])(?:harbor|terminus(?:[-_]\d)?|trials?_dir|agentic|openhands"
    r"|mini[-_]swe[-_]agent|swe[-_]agent|agent_(?:name|config|execution|result))(?![a-z]))"
    r"|\bContextLengthExceededError\b|\bAgentTimeoutError\b"
    r"|generate/(?:avg_num_turns|num_timeout_trajectories|trajectories_context_length_exceeded)"
    r"|\bfailed: (?:Exception info|Error running trial)\b"
)
"""Agent configuration and agentic trial lines (Harbor, SkyRL's Harbor generator, agents)."""
OBJECT_STORE = re.compile(r"\b(?:s3|s3a|gs|gcs|az|abfss?|r2|oss|cos)://[\w.\-]+/?\S*")
"""An object-store URI; it makes the run object-store backed when its line is about trials."""
_TRIAL_WORDS = re.compile(r"(?i)trial|trajector|jobs_dir|rollout|harbor|://[^\s]*/jobs/")
"""A line about trials (a checkpoint or model upload to the same bucket is not one)."""


def object_store_trials(text: str) -> bool:
    """The log names an object-store URI for its trials (``trials_dir: s3://...``)."""
    if "://" not in text:
        return False
    return any(
        OBJECT_STORE.search(line) is not None and _TRIAL_WORDS.search(line) is not None
        for line in text.splitlines() if "://" in line
    )


def _run_texts(facts: JobFacts) -> Iterable[str]:
    record = facts.record
    yield facts.log.text if facts.log else ""
    yield record.command or ""
    yield record.comment or ""
    yield " ".join(f"{k}={v}" for k, v in record.labels.items())


def is_agentic(facts: JobFacts) -> bool:
    """Whether the run is agentic, by its own configuration and log (see the module policy)."""
    if facts.summary is not None and "harbor" in facts.summary.formats:
        return True
    return any(AGENT_MARKERS.search(text) or object_store_trials(text)
               for text in _run_texts(facts) if text)


def has_trial_tree(tree: TrialTree | None) -> bool:
    """A real on-disk trial tree: trials, chunks or a job result (an empty dir is none)."""
    if tree is None or not tree.exists:
        return False
    return bool(tree.trials or tree.chunks_total or tree.trials_total)


def cleanup_routine(bucket: Bucket, facts: JobFacts) -> CleanupRoutine | None:
    """The cleanup routine matching a completed job (RL by the run's flavour)."""
    if bucket == "rl":
        return "rl-agentic-job-cleanup" if is_agentic(facts) else "rl-standard-job-cleanup"
    return _CLEANUP.get(bucket)


def cleanup_rule(ctx: JudgeContext, f: Findings, bucket: Bucket) -> None:
    """COMPLETED: the matching routine, after the SFT completion check; ``cleanup-pending``."""
    if ctx.state is not JobState.COMPLETED:
        return  # (the flavour is read from the log only for a job that is done)
    routine = cleanup_routine(bucket, ctx.facts)
    if routine is None:
        return
    if bucket == "sft" and completion_rule(ctx, f):
        return
    tree = ctx.facts.trials
    owns_tree = bucket != "rl" or routine == "rl-agentic-job-cleanup"
    backed = ctx.facts.log is not None and object_store_trials(ctx.facts.log.text)
    if owns_tree and not backed and has_trial_tree(tree) and tree is not None:
        f.flag("cleanup-pending")
        f.recommend(Priority.CLEANUP, "cleanup",
                    f"{routine}: trial tree still on disk at {tree.root} (top inode-leak "
                    "source); done only once it is removed and inode reclaim verified")
    elif backed:
        f.recommend(Priority.CLEANUP, "cleanup",
                    f"{routine}: trials are in the object store; no on-disk trial tree to reap")
    else:
        f.recommend(Priority.CLEANUP, "cleanup", routine)


def completion_rule(ctx: JudgeContext, f: Findings) -> bool:
    """Flag ``incomplete-run`` when a COMPLETED run stopped short of its total."""
    short = _short_of_total(ctx, f)
    if short is None:
        return False
    current, total, source = short
    f.flag("incomplete-run")
    f.verdict("warning")
    f.trend(Priority.DIAGNOSE, f"COMPLETED short of total: step {current}/{total}")
    f.recommend(Priority.DIAGNOSE, "diagnose",
                f"incomplete run: {source} shows step {current} of {total}; find why it "
                "stopped before consolidating or running sft-job-cleanup")
    return True


def _short_of_total(ctx: JudgeContext, f: Findings) -> tuple[int, int, str] | None:
    check = ctx.facts.completion
    reached = check.reached if check is not None else None
    if reached is not None:
        if reached.finished or reached.current_steps is None or not reached.total_steps:
            return None
        return reached.current_steps, reached.total_steps, reached.path
    summary = ctx.facts.summary
    if summary is None or summary.finished or f.step is None or not f.total_steps:
        return None
    steps = [p.step for p in ctx.history]
    interval = steps[-1] - steps[-2] if len(steps) >= 2 else 0
    if f.step + max(interval, 0) >= f.total_steps:
        return None
    return f.step, f.total_steps, "the log"
