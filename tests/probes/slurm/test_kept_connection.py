"""The bot's sweeps keep each cluster's SSH connection (``KeptConnection``), on the real sshd.

A warm sweep pays no handshake and the login node sees one login per bot, not one per sweep;
a kept connection that died is replaced, and a command is sent again only when it never
started (its channel could not open), never after it ran.
"""

from __future__ import annotations

import asyncio
from typing import Any

import asyncssh
import pytest

from bot.config import Config
from bot.sweep import Sweeper
from probes.errors import ProbeError, UnreachableError
from probes.slurm.probe import SlurmProbe
from probes.slurm.transport import KeptConnection, Runner, SshRunner, make_runner
from tests.probes.slurm.conftest import OwnLogins, SlurmEnv


async def test_a_bots_sweeps_share_one_connection(slurm_env: SlurmEnv,
                                                 own_logins: OwnLogins) -> None:
    """Three sweeps of a probe that keeps its connection: one login, and each sweep's facts
    as a one-shot probe's (same status, same commands); closing the probe closes it."""
    before = own_logins.count()
    probe = SlurmProbe(slurm_env.cluster(), keep_connection=True)
    try:
        swept = [await probe.collect() for _ in range(3)]
        assert probe._kept is not None and probe._kept.connects == 1
        conn = probe._kept._conn
        assert conn is not None and not conn.is_closed()
    finally:
        await probe.aclose()
    assert conn.is_closed()
    assert [f.status for f in swept] == ["ok"] * 3
    assert await own_logins.until(before + 1) == before + 1
    once = SlurmProbe(slurm_env.cluster())  # the CLI's: a connection per sweep, as before
    first, second = await once.collect(), await once.collect()
    assert (first.status, second.status) == ("ok", "ok")
    assert [first.round_trips, second.round_trips] == [f.round_trips for f in swept[:2]]
    assert await own_logins.until(before + 3) == before + 3


async def test_a_kept_connection_the_server_dropped_is_replaced(slurm_env: SlurmEnv) -> None:
    """The login node closed the kept connection between sweeps (sshd restarted, an idle
    timeout): the next sweep connects again and is whole."""
    probe = SlurmProbe(slurm_env.cluster(), keep_connection=True)
    try:
        assert (await probe.collect()).status == "ok"
        assert probe._kept is not None and probe._kept._conn is not None
        dropped = probe._kept._conn
        dropped.abort()
        await dropped.wait_closed()
        facts = await probe.collect()
        assert facts.status == "ok", facts.detail
        assert probe._kept.connects == 2
    finally:
        await probe.aclose()


async def test_a_dead_connection_not_yet_noticed_costs_one_more_try(
    slurm_env: SlurmEnv,
) -> None:
    """The kept connection died but looked open when borrowed: its channel cannot open, so
    the command never started; it is sent once more on a fresh connection."""
    kept = KeptConnection()
    runner = SshRunner(slurm_env.cluster(), kept=kept)
    assert (await runner.run(["echo", "one"])).stdout == "one\n"
    await runner.aclose()
    conn = kept._conn
    assert conn is not None
    conn.abort()  # asyncssh notices on its next loop turn: the runner borrows it first
    answers = iter([False])
    conn.is_closed = lambda: next(answers, True)  # type: ignore[method-assign]
    again = SshRunner(slurm_env.cluster(), kept=kept)
    try:
        assert (await again.run(["echo", "two"])).stdout == "two\n"
    finally:
        await again.aclose()
        await kept.aclose()
    assert kept.connects == 2
    assert again.commands_sent == 2  # the try that could not open its channel, and the one


async def test_a_command_the_connection_lost_midway_is_not_sent_again(
    slurm_env: SlurmEnv,
) -> None:
    """A command under way when the kept connection dies may have run: it fails (asyncssh
    ends its wait with no exit status), never repeated, and the dead connection is not lent
    again."""
    kept = KeptConnection()
    runner = SshRunner(slurm_env.cluster(), kept=kept)
    try:
        assert (await runner.run(["true"])).exit_status == 0
        conn = kept._conn
        assert conn is not None
        loop = asyncio.get_running_loop()
        loop.call_later(0.5, conn.abort)
        with pytest.raises(ProbeError, match="sleep"):
            await runner.run(["sleep", "5"])
        assert runner.commands_sent == 2
        assert kept.connects == 1
        await asyncio.sleep(0.1)
        fresh = SshRunner(slurm_env.cluster(), kept=kept)
        assert (await fresh.run(["echo", "three"])).stdout == "three\n"
        await fresh.aclose()
        assert kept.connects == 2 and kept._conn is not conn
    finally:
        await runner.aclose()
        await kept.aclose()


async def test_a_job_read_borrows_the_kept_connection(slurm_env: SlurmEnv,
                                                    own_logins: OwnLogins) -> None:
    """``/job`` after a sweep (``collect_one``) goes over the sweep's connection: no login."""
    before = own_logins.count()
    borrowed: list[bool] = []

    def runners(cluster: Any, **options: Any) -> Runner:
        borrowed.append(options.get("kept") is not None)
        return make_runner(cluster, **options)

    probe = SlurmProbe(slurm_env.cluster(), keep_connection=True, runner_factory=runners)
    try:
        assert (await probe.collect()).status == "ok"
        one = await probe.collect_one("999999")  # no such job: an ok answer, no job in it
        assert (one.status, one.jobs) == ("ok", ())
        assert probe._kept is not None and probe._kept.connects == 1
    finally:
        await probe.aclose()
    assert borrowed == [True, True]
    assert await own_logins.until(before + 1) == before + 1


async def test_a_session_the_kept_connection_refuses_goes_on_a_connection_of_its_own(
    slurm_env: SlurmEnv,
) -> None:
    """A live kept connection that refuses one more session (sshd's MaxSessions, with a
    sweep and /job answers on it at once) is left as it is: that runner connects on its own,
    and closes only its own connection."""
    kept = KeptConnection()
    first = SshRunner(slurm_env.cluster(), kept=kept)
    assert (await first.run(["true"])).exit_status == 0
    await first.aclose()
    conn = kept._conn
    assert conn is not None
    real = conn.create_process
    refused = [False]

    async def refuse_once(*args: Any, **kwargs: Any) -> Any:
        if not refused[0]:
            refused[0] = True
            raise asyncssh.ChannelOpenError(asyncssh.OPEN_ADMINISTRATIVELY_PROHIBITED,
                                            "open failed")
        return await real(*args, **kwargs)

    conn.create_process = refuse_once  # type: ignore[method-assign]
    runner = SshRunner(slurm_env.cluster(), kept=kept)
    try:
        assert (await runner.run(["echo", "own"])).stdout == "own\n"
        assert refused[0] and runner.commands_sent == 2
        own = runner._conn
        assert own is not None and own is not conn
    finally:
        await runner.aclose()
    assert own.is_closed() and not conn.is_closed() and kept._conn is conn
    await kept.aclose()


class Recorded:
    """A probe factory noting what each probe was built with and which were closed."""

    def __init__(self) -> None:
        self.options: list[dict[str, Any]] = []
        self.closed: list[int] = []

    def __call__(self, cluster: Any, **options: Any) -> Any:
        self.options.append(options)
        return _Probe(self, len(self.options) - 1)


class _Probe:
    def __init__(self, factory: Recorded, n: int) -> None:
        self._factory, self._n = factory, n

    async def collect(self, **_: Any) -> Any:
        raise UnreachableError("not needed here")

    async def aclose(self) -> None:
        self._factory.closed.append(self._n)


async def test_the_sweeper_keeps_connections_only_when_asked(slurm_env: SlurmEnv) -> None:
    """The bot's sweeper asks its probes to keep their connection (the CLI's does not); a
    cluster entry that changed gets a new probe and the old one, its connection with it,
    is closed."""
    entries = [slurm_env.cluster(), slurm_env.cluster(command_timeout_s=30.0)]
    configs = iter([Config(clusters=(entries[0],)), Config(clusters=(entries[1],))])
    factory = Recorded()
    bot = Sweeper(lambda: next(configs), probe_factory=factory, keep_connections=True)
    await bot.sweep()
    await bot.sweep()  # the entry changed: a second probe
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert [o.get("keep_connection") for o in factory.options] == [True, True]
    assert factory.closed == [0]
    await bot.aclose()
    assert factory.closed == [0, 1]
    cli = Recorded()
    await Sweeper(lambda: Config(clusters=(entries[0],)), probe_factory=cli).sweep()
    assert "keep_connection" not in cli.options[0]
