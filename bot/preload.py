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
  (``probes.slurm.early.FoldStack``), judging (``bot.sweep.JUDGING``) here, after rendering's
  modules, and again on the loop's thread before judging starts in a worker thread.

A sweep over recordings only (``demo``, replay clusters) waits on nothing remote and imports
everything in its time, as before.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
from collections.abc import AsyncIterator, Sequence

from bot.sweep import JUDGING
from probes.config import ClusterConfig

LATER = ("rich.color", "rich.style", "rich.text", "rich.console", "rich.table", "report.grouping",
         "report.boxes", "report.render", *JUDGING)
"""Imported meanwhile, in this order: each one's own imports before it, so that no step is
long (rich.console, the longest, ~15 ms on a busy machine)."""

REMOTE_KINDS = frozenset({"slurm", "kubernetes"})
"""Backends whose answer comes over the network: the wait the imports fill."""


@contextlib.asynccontextmanager
async def meanwhile(clusters: Sequence[ClusterConfig]) -> AsyncIterator[None]:
    """Import :data:`LATER` beside the block when one of the active ``clusters`` is remote;
    on the way out, wait for the rest of them (rendering needs them next), or stop them when
    the block raised."""
    if not any(c.active and c.kind in REMOTE_KINDS for c in clusters):
        yield
        return
    # Not a TaskGroup: it would wrap the block's own errors (a UsageError, a job not found)
    # in an ExceptionGroup, and they must reach the CLI as they are.
    task = asyncio.get_running_loop().create_task(_import_later(), name="preload")
    try:
        yield
    except BaseException:
        task.cancel()  # nothing will be rendered: the imports stop at their next step
        await asyncio.wait([task])
        raise
    await task


async def _import_later() -> None:
    for name in LATER:
        await asyncio.sleep(0)  # first: the sweep's tasks start their connections
        importlib.import_module(name)
