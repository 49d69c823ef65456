"""Real-SLURM scenarios of jobs that run to COMPLETED, then are read through the CLI.

Several end-to-end tests submit a few short sbatch scripts over SSH (each in its own workdir
under the environment's scratch), wait for every one to complete, read them, and cancel and
remove them after, whatever happened. :func:`sbatch_in` is one submission, and
:func:`completed_jobs` the whole lifetime around the test's reads.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections.abc import Awaitable, Callable, Iterator

from probes.models import JobState
from probes.slurm.transport import SshRunner
from tests.probes.slurm.conftest import SlurmEnv
from tests.probes.slurm.test_e2e import _cleanup, _wait_for

Submit = Callable[[SshRunner, str, str], Awaitable[dict[str, str]]]
"""``submit(runner, tag, run_dir)``: the jobs it submitted, key -> job id."""


async def sbatch_in(runner: SshRunner, workdir: str, script: str, name: str) -> str:
    """``script`` written as ``workdir/job.sbatch`` (the dir made first) and submitted there
    under ``name``: its job id."""
    await runner.run(["mkdir", "-p", workdir])
    await runner.run(["sh", "-c", f"cat > {workdir}/job.sbatch"], stdin=script)
    res = await runner.run(["sbatch", "--parsable", "-J", name, "--chdir", workdir,
                            f"{workdir}/job.sbatch"])
    return res.stdout.strip().split(";")[0]


@contextlib.contextmanager
def completed_jobs(env: SlurmEnv, submit: Submit) -> Iterator[dict[str, str]]:
    """The jobs ``submit`` sends (under a fresh tag and run dir), once every one is COMPLETED
    (bounded: 120 s); cancelled and their run dir removed on the way out."""
    tag = f"s{secrets.token_hex(3)}"
    run_dir = f"{env.scratch}/e2e-{tag}"
    ids: dict[str, str] = {}

    async def send() -> None:
        runner = SshRunner(env.cluster())
        try:
            ids.update(await submit(runner, tag, run_dir))
        finally:
            await runner.aclose()

    try:
        asyncio.run(send())
        done = {JobState.COMPLETED}
        asyncio.run(_wait_for(env, ids, dict.fromkeys(ids, done), bound_s=120, settle_s=1))
        yield ids
    finally:
        asyncio.run(_cleanup(env, ids, run_dir))
