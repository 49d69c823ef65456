"""A command's output is bounded: a login node (or a scheduler command on it) that prints
without end is stopped at ``max_output_bytes`` with a CommandError naming the bound, never
buffered until the bot runs out of memory.

Found by the hostile-cluster review: a ``local = true`` cluster whose ``python3`` answered
``cat /dev/zero`` (one endless line, as a compromised or broken login node's collector would)
made ``jobtables sweep`` grow to 3.8 GB in 27 s until a 4 GB address-space limit killed it
(exit 139); without a limit the OOM killer ends the bot, and every cluster's report with it.
Every way a command runs read its whole stdout (and stderr) with no bound: ``run`` (asyncio's
``communicate``, asyncssh's ``wait``), ``run_streaming`` (the answer's line splitter holding a
line without newline) and the streamed command's stderr.

Real child processes (``LocalRunner``) and the real sshd on loopback (``SshRunner``); the
bound is set small so each test reads a few MiB.
"""

from __future__ import annotations

import pytest

from probes.config import SlurmCluster
from probes.errors import CommandError
from probes.slurm.runner import output_limit
from probes.slurm.transport import LocalRunner, Runner, SshRunner
from tests.probes.slurm.conftest import SlurmEnv

LIMIT = 1 << 20
ENDLESS = {
    "stdout": ["sh", "-c", "exec cat /dev/zero"],
    "stderr": ["sh", "-c", "exec cat /dev/zero >&2"],
    "stdout-lines": ["sh", "-c", "exec yes"],
}


async def streamed(runner: Runner, argv: list[str]) -> int:
    """Run ``argv`` streamed; the bytes of stdout handed over."""
    got = [0]

    def count(chunk: bytes) -> None:
        got[0] += len(chunk)

    await runner.run_streaming(argv, stdin=None, on_chunk=count)  # type: ignore[attr-defined]
    return got[0]


def local() -> LocalRunner:
    return LocalRunner(SlurmCluster(name="local", local=True, max_output_bytes=LIMIT,
                                    answer_budget_bytes=LIMIT // 4))


@pytest.mark.parametrize("what", list(ENDLESS))
async def test_endless_output_of_a_local_command_is_stopped(what: str) -> None:
    """``run``: an endless stdout or stderr is a CommandError naming the bound."""
    with pytest.raises(CommandError, match=r"printed more than 1048576 bytes on local"):
        await local().run(ENDLESS[what], check=False)


@pytest.mark.parametrize("what", list(ENDLESS))
async def test_endless_output_of_a_streamed_local_command_is_stopped(what: str) -> None:
    """``run_streaming``: stdout handed over up to the bound, then a CommandError."""
    with pytest.raises(CommandError, match=r"printed more than 1048576 bytes on local"):
        await streamed(local(), ENDLESS[what])


async def test_output_within_the_bound_is_whole() -> None:
    """Output up to the bound is read whole, as before."""
    script = f"head -c {LIMIT - 10} /dev/zero | tr '\\0' x; printf 0123456789 >&2"
    result = await local().run(["sh", "-c", script], check=False)
    assert (result.stdout, result.stderr) == ("x" * (LIMIT - 10), "0123456789")


def test_the_bound_is_never_below_the_collector_s_answer_budget() -> None:
    """A raised ``answer_budget_bytes`` raises the bound with it: the collector's answer
    (its budget plus the head) is never cut by the bound."""
    small = SlurmCluster(name="a", local=True, max_output_bytes=LIMIT, answer_budget_bytes=LIMIT)
    assert output_limit(small) == 4 * LIMIT
    assert output_limit(SlurmCluster(name="a", local=True)) == 256 << 20


@pytest.mark.parametrize("what", list(ENDLESS))
async def test_endless_output_over_ssh_is_stopped(slurm_env: SlurmEnv, what: str) -> None:
    """The same over SSH (the real sshd), in ``run`` and ``run_streaming``; the connection
    still serves the next command."""
    runner = SshRunner(slurm_env.cluster(max_output_bytes=LIMIT, answer_budget_bytes=LIMIT // 4))
    try:
        with pytest.raises(CommandError, match=r"printed more than 1048576 bytes on 127"):
            await runner.run(ENDLESS[what], check=False)
        with pytest.raises(CommandError, match=r"printed more than 1048576 bytes on 127"):
            await streamed(runner, ENDLESS[what])
        assert (await runner.run(["echo", "next"])).stdout == "next\n"
    finally:
        await runner.aclose()
