"""What a sweep or job of the CLI imports while its clusters answer, rather than before asking.

Policy (issue 12): ``jobtables sweep`` and ``job`` spend their first few hundred milliseconds
importing, then wait while SSH connects and the login node runs squeue and the collector.
Grouping and rendering (``report.grouping``, ``report.render``, and rich through them) are
needed only once the answer is in, so:

* ``bot.cli`` imports them where they are used, never at the top: importing
  ``bot.cli`` (so ``jobtables --help``) and the path up to the first command sent never pay
  for them. Each such import is marked ``(bot.preload)``; these are the only ones.
* :func:`meanwhile` imports :data:`LATER` one module at a time in a task of the event loop,
  yielding between modules, while the sweep runs beside it: the sweep's tasks have opened
  their connections before the first of these imports, and each import holds the loop for a
  few milliseconds only. The same imports in a worker thread did worse: interleaved on a
  busy 2-core machine a sweep took 0.99 s of CPU against 0.76 s here (the GIL fought over by
  the thread and the SSH handshake), and its first command went out no earlier.
* structlog is in neither: the sweep path logs through ``bot.logs.get_logger``, which imports
  it when something is logged at all.
* Folding is imported by the SLURM probe itself once its first command is out
  (``probes.slurm.early.FoldStack``), judging here (``report.judge``, ``report.memory``),
  after rendering's modules, and again on the loop's thread before judging starts in a
  worker thread (``bot.sweep_judging.JUDGING``). With a SLURM cluster in the sweep these imports
  also wait for its first command (``FIRST_COMMAND``): begun at once they ran during the SSH
  handshake, and each of its round trips waited for the step under way.

A sweep over recordings only (``demo``, replay clusters) waits on nothing remote and imports
everything in its time, as before.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
from collections.abc import AsyncIterator, Sequence

from probes.config import ClusterConfig
from probes.slurm.early import FIRST_COMMAND

LATER = (
    "rich.color", "rich.style", "rich.text", "rich.console", "rich.table", "report.cells",
    "report.chain_records", "report.chain_index", "report.chain_edges", "report.chain_pool",
    "report.chain_match", "report.chain", "report.fingerprint", "report.models",
    "report.failure_text", "report.findings", "report.signals", "report.cleanup",
    "report.rollouts", "report.trend", "report.harbor_trials", "report.rules", "report.grid_cells",
    "report.judge_sft", "report.layouts", "report.group_keys", "report.grouping",
    "report.linebreaks", "report.boxes", "report.tables", "report.render", "report.buckets",
    "report.harbor_engine", "report.log_progress", "report.eval_label", "report.judge_eval",
    "report.judge_datagen", "report.judge_other", "report.judge_rl", "report.memory",
    "report.pods", "report.planned_stop", "report.holds", "report.job_rules", "report.job_detail",
    "report.judge",
)
"""Imported meanwhile, in this order: each one's own imports before it, so that no step is
long (rich.console, the longest, ~15 ms on a busy machine; a test holds each step to one
module of ours once the fold stack is in)."""

REMOTE_KINDS = frozenset({"slurm", "kubernetes"})
"""Backends whose answer comes over the network: the wait the imports fill."""


@contextlib.asynccontextmanager
async def meanwhile(clusters: Sequence[ClusterConfig]) -> AsyncIterator[None]:
    """Import :data:`LATER` beside the block when one of the active ``clusters`` is remote,
    from the moment a SLURM cluster's first command is out (``early.FIRST_COMMAND``, set for
    the block's tasks) when one is among them, else at once; on the way out, wait for the
    rest of them (rendering needs them next), or stop them when the block raised."""
    remote = [c for c in clusters if c.active and c.kind in REMOTE_KINDS]
    if not remote:
        yield
        return
    first = asyncio.Event()
    if not any(c.kind == "slurm" for c in remote):
        first.set()
    token = FIRST_COMMAND.set(first.set)
    # Not a TaskGroup: it would wrap the block's own errors (a UsageError, a job not found)
    # in an ExceptionGroup, and they must reach the CLI as they are.
    task = asyncio.get_running_loop().create_task(_import_later(first), name="preload")
    try:
        yield
    except BaseException:
        task.cancel()  # nothing will be rendered: the imports stop at their next step
        await asyncio.wait([task])
        raise
    finally:
        FIRST_COMMAND.reset(token)
    first.set()  # whatever was sent: rendering comes next
    await task


async def _import_later(first: asyncio.Event) -> None:
    await first.wait()
    for name in LATER:
        await asyncio.sleep(0)  # a turn of the loop between steps: the answer is being read
        importlib.import_module(name)
