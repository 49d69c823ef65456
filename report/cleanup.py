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
- A datagen/eval tree whose Harbor chunks are not all finished while another live job of the
  run (an array's other tasks, same user and workdir or name) can still write them is no
  finished run: no cleanup yet (``none``, saying how many chunks are left), never
  ``cleanup-pending``. With nothing live left (a chunk killed at walltime or by a crash never
  gets Harbor's ``finished_at``), the cleanup is named and the trend says how many never
  finished. A datagen run waits for its live jobs even when every chunk on disk is finished:
  an array's tasks still pending have written none yet.
- ``cleanup-pending``: the run's own on-disk trial tree is still there. An empty trial directory
  is no trial tree, a standard RL run has none, and an object-store-backed run leaves none to
  reap (seed: "routes the same way but leaves no on-disk trial tree").
- Completion check: a COMPLETED SFT or RL job is routed to cleanup only once trainer_log.jsonl /
  trainer_state.json (``JobFacts.completion``), where the run wrote one, say it reached its
  total (CONTRACT §6 ``incomplete-run`` names no bucket; TRL's GRPO/PPO trainers write HF's
  trainer_state.json). Without either file an SFT run's own log step and total (banner/config)
  answer, allowing one logging interval of slack (a run logging every 10 steps ends on 910 of
  916) and never overruling a log that says it finished; so do an RL run's, unless a durable
  checkpoint or ``exports/global_step_N`` at the total says it got there (the seed: an export
  signals completion on a finished run). Short of the total: ``incomplete-run``, verdict
  ``warning``, recommendation ``diagnose`` naming the routine that waits for it.
- An eval that COMPLETED with fewer trials than its Harbor job's total (a harness stopped early
  under a wrapper that exited 0) is ``incomplete-run`` too: its pass-rate is not the
  benchmark's, and the cleanup would reap the evidence.
"""

from __future__ import annotations

from collections.abc import Iterable

from probes.logs.excerpt import AGENT_MARKERS, object_store_trials
from probes.models import STALE_SKEW, JobFacts, JobState, TrialTree
from report.findings import Findings, JudgeContext, Priority
from report.models import Bucket, CleanupRoutine

_CLEANUP: dict[Bucket, CleanupRoutine] = {
    "sft": "sft-job-cleanup", "datagen": "datagen-job-cleanup", "eval": "eval-agentic-cleanup",
}
__all__ = [  # AGENT_MARKERS and object_store_trials live with the log excerpts they read
    "AGENT_MARKERS", "cleanup_routine", "cleanup_rule", "completion_rule", "has_trial_tree",
    "is_agentic", "object_store_trials",
]


def _run_texts(facts: JobFacts) -> Iterable[str]:
    record = facts.record
    yield facts.log.text if facts.log else ""  # the kept last lines (the tail's marks below)
    yield record.command or ""
    yield record.comment or ""
    yield " ".join(f"{k}={v}" for k, v in record.labels.items())


def is_agentic(facts: JobFacts) -> bool:
    """Whether the run is agentic, by its own configuration and log (see the module policy)."""
    if facts.summary is not None and "harbor" in facts.summary.formats:
        return True
    if facts.log is not None and (facts.log.agent_marked or facts.log.trials_in_object_store):
        return True  # read from the whole tail at assembly (probes.logs.excerpt)
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
    # RL: the log's step and total answer too, unless durable evidence (a checkpoint or an
    # export at the total: seed, "exports/global_step_N signals completion only on a
    # finished run") says the run got there.
    fallback = bucket == "sft" or (bucket == "rl" and not _durably_at_total(ctx, f))
    if bucket in ("sft", "rl") and completion_rule(ctx, f, routine, log_fallback=fallback):
        return
    tree = ctx.facts.trials
    if bucket == "eval" and tree is not None and tree.own_run is not None \
            and ctx.facts.record.array_job_id is not None:
        # An eval array task keeps the whole tree to judge (its waves are one run) but reaps
        # only the job dirs its own run can have written: the shared jobs/ holds other runs'.
        # Any other eval still holding the whole tree here is one its log vouched for
        # (report.judge_eval._log_vouches: laid out before its start): all of it is its own.
        tree = tree.own_run
    # An eval's one job dir is no chunk run: a partial one is _eval_short's to tell.
    chunked = bucket == "datagen" or (tree is not None and (tree.chunks_total or 0) > 1)
    if bucket in ("datagen", "eval") and chunked and _chunks_unfinished(ctx, f, tree, routine):
        return
    if bucket == "datagen" and _run_still_live(ctx, f, tree, routine):
        return
    if bucket == "eval" and _eval_short(ctx, f, tree, routine):
        return
    owns_tree = bucket != "rl" or routine == "rl-agentic-job-cleanup"
    log = ctx.facts.log
    backed = log is not None and (log.trials_in_object_store or object_store_trials(log.text))
    if owns_tree and not backed and has_trial_tree(tree) and tree is not None:
        f.flag("cleanup-pending")
        f.recommend(Priority.CLEANUP, "cleanup",
                    f"{routine}: trial tree still on disk at {tree_place(tree)} (top inode-leak "
                    "source); done only once it is removed and inode reclaim verified")
    elif backed:
        f.recommend(Priority.CLEANUP, "cleanup",
                    f"{routine}: trials are in the object store; no on-disk trial tree to reap")
    else:
        f.recommend(Priority.CLEANUP, "cleanup", routine)


def tree_place(tree: TrialTree) -> str:
    """Where a run's trial tree lies: its own Harbor job dirs when the root it was found in
    holds other runs' too (a ``jobs/`` shared by evals launched from one directory: reaping
    the root would take theirs), else the root."""
    if not tree.job_dirs:
        return tree.root
    return ", ".join(tree.job_dirs)


def _chunks_unfinished(ctx: JudgeContext, f: Findings, tree: TrialTree | None,
                       routine: CleanupRoutine) -> bool:
    """A finished job whose trial tree still holds chunks Harbor has not finished while
    another live job of the run (an array's other tasks) can still write them: the run is
    not done, its tree is not reaped. With nothing live left to finish them (a chunk killed
    at walltime or by a crash never gets its finished_at), the cleanup is named, saying so."""
    if tree is None or not tree.chunks_total or tree.chunks_done is None:
        return False
    left = tree.chunks_total - tree.chunks_done
    if left <= 0:
        return False
    if not ctx.others_live():
        if routine == "datagen-job-cleanup" and _own_chunks_unfinished(f, tree, routine):
            return True
        f.trend(Priority.CLEANUP + 1,
                f"Completed; {left} of {tree.chunks_total} chunks never finished")
        return False
    text = f"{left} of {tree.chunks_total} chunks not finished"
    f.trend(Priority.CLEANUP + 1, f"Completed; {text}")
    f.recommend(Priority.CLEANUP, "none",
                f"{text} in {tree_place(tree)}: {routine} once the whole run is done, not "
                "before")
    return True


def _own_chunks_unfinished(f: Findings, tree: TrialTree, routine: CleanupRoutine) -> bool:
    """A finished datagen job, nothing of its run live, whose OWN chunks (job dirs it can have
    written: ``TrialTree.own_run``, else all of them) are not all finished: Harbor died
    mid-chunk under a driver that went on and exited 0. Its Chunks are its completion check
    (CONTRACT ``incomplete-run``): consolidating would upload a partial dataset and the
    cleanup reap the evidence. A chunk only an earlier run left unfinished is no such gap."""
    own = tree.own_run or tree
    if not own.chunks_total or own.chunks_done is None:
        return False
    left = own.chunks_total - own.chunks_done
    if left <= 0:
        return False
    text = f"COMPLETED with {left} of {tree.chunks_total} chunks unfinished"
    f.flag("incomplete-run")
    f.verdict("warning")
    f.trend(Priority.DIAGNOSE, text)
    f.recommend(Priority.DIAGNOSE, "diagnose",
                f"incomplete run: {left} of its chunks in {tree_place(own)} never finished "
                "(no finished_at in Harbor's job result.json); find why, resume them "
                f"(harbor jobs resume -p <job dir>), then consolidate and run {routine}")
    return True


def _run_still_live(ctx: JudgeContext, f: Findings, tree: TrialTree | None,
                    routine: CleanupRoutine) -> bool:
    """A finished datagen job with a trial tree while another live job of the run (an
    array's tasks still pending or running, its other chunk jobs) can still write chunks: the
    run is not done, however finished the chunks already on disk (a task that has not started
    has written none). Its traces are consolidated, and the tree reaped, once the whole run is."""
    if not has_trial_tree(tree) or tree is None or not ctx.others_live():
        return False
    f.trend(Priority.CLEANUP + 1, "Completed; other jobs of the run still live")
    f.recommend(Priority.CLEANUP, "none",
                f"other jobs of the run are still live and may write {tree_place(tree)}: "
                f"{routine} once the whole run is done, not before")
    return True


def _eval_short(ctx: JudgeContext, f: Findings, tree: TrialTree | None,
                routine: CleanupRoutine) -> bool:
    """A COMPLETED eval whose trials with a result.json (counted over the whole tree, or its
    progress line) are fewer than the Harbor job's total: a partial run (the harness was
    stopped, its wrapper exited 0). Its pass-rate covers only the trials that ran, and the
    cleanup would reap the evidence: ``incomplete-run``, ``diagnose``. A count the time bound
    cut short proves nothing missing; several job dirs (chunks, an earlier attempt's beside
    this one's) are the chunk rule's to tally (``_chunks_unfinished``)."""
    if tree is not None and (tree.chunks_total or 0) > 1:
        return False
    done, total = f.metrics.get("trials"), f.metrics.get("trials_total")
    counts = tree.counts if tree is not None else None
    if (not isinstance(done, float) or not isinstance(total, float) or done >= total
            or (counts is not None and not counts.complete)):
        return False
    left, whole = int(total - done), int(total)
    f.flag("incomplete-run")
    f.verdict("warning")
    f.trend(Priority.DIAGNOSE, f"COMPLETED with {left} of {whole} trials never run")
    f.recommend(Priority.DIAGNOSE, "diagnose",
                f"incomplete run: {int(done)} of {whole} trials finished; resume or "
                f"rerun the missing {left} (the pass-rate covers only those that ran) before "
                f"{routine}")
    return True


def _durably_at_total(ctx: JudgeContext, f: Findings) -> bool:
    """A durable step or export AT the total: a run saves its final state there (verl's last
    step, SkyRL's final checkpoint and export, HF's ``checkpoint-<max_steps>``), never beyond
    it; a step past the total is another run's (an init checkpoint the config dump names)."""
    listing = ctx.facts.checkpoints
    if listing is None or not f.total_steps:
        return False
    if f.total_steps not in (*listing.steps, *listing.export_steps):
        return False
    # A save at the total written before the job started is an earlier run's (a rerun from
    # scratch into the same save folder): no sign this run got there.
    written = dict(listing.written).get(f.total_steps)
    started = ctx.facts.record.start_time
    return written is None or started is None or written >= started - STALE_SKEW


def completion_rule(ctx: JudgeContext, f: Findings, routine: CleanupRoutine = "sft-job-cleanup",
                    *, log_fallback: bool = True) -> bool:
    """Flag ``incomplete-run`` when a COMPLETED run stopped short of its total (by its
    completion files; by its log too with ``log_fallback``)."""
    short = _short_of_total(ctx, f, log_fallback=log_fallback)
    if short is None:
        _early_stop_note(ctx, f)
        return False
    current, total, source = short
    f.flag("incomplete-run")
    f.verdict("warning")
    f.trend(Priority.DIAGNOSE, f"COMPLETED short of total: step {current}/{total}")
    f.recommend(Priority.DIAGNOSE, "diagnose",
                f"incomplete run: {source} shows step {current} of {total}; find why it "
                f"stopped before consolidating or running {routine}")
    return True


def _early_stop_note(ctx: JudgeContext, f: Findings) -> None:
    """A run its EarlyStoppingCallback stopped is done by its own rule: the Trend says where."""
    check = ctx.facts.completion
    reached = check.reached if check is not None else None
    if reached is not None and reached.early_stopped:
        f.trend(Priority.BACKGROUND + 3, f"Early-stopped at step {reached.current_steps}/"
                f"{reached.total_steps} (EarlyStoppingCallback: patience exhausted)")


def _snapshot(path: str) -> bool:
    """A ``checkpoint-N/trainer_state.json`` (read when no end-of-run file exists): the state
    at that save, a lower bound of where the run got (the end is saved only by newer
    transformers under ``save_strategy="steps"``), so a log that says the trainer finished
    (its ``train_runtime`` dict) overrules it."""
    parent = path.rstrip("/").rsplit("/", 2)[-2:-1]
    return bool(parent) and parent[0].startswith("checkpoint-") and parent[0][11:].isdigit()


def _short_of_total(ctx: JudgeContext, f: Findings, *,
                    log_fallback: bool) -> tuple[int, int, str] | None:
    check = ctx.facts.completion
    reached = check.reached if check is not None else None
    summary = ctx.facts.summary
    if reached is not None:
        if reached.finished or reached.current_steps is None or not reached.total_steps:
            return None
        if _snapshot(reached.path) and summary is not None and summary.finished:
            return None  # the last save's state, not the end's: the log says it finished
        return reached.current_steps, reached.total_steps, reached.path
    if not log_fallback:
        return None
    if summary is None or summary.finished or f.step is None or not f.total_steps:
        return None
    steps = [p.step for p in ctx.history]
    interval = steps[-1] - steps[-2] if len(steps) >= 2 else 0
    if f.step + max(interval, 0) >= f.total_steps:
        return None
    return f.step, f.total_steps, "the log"
