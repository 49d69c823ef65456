"""Transport security on the real test sshd: host keys, unreachable ports, quoting, bad ids."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from probes.config import SlurmCluster
from probes.errors import AuthError, CommandError, HostKeyError, InvalidJobIdError, UnreachableError
from probes.slurm.probe import SlurmProbe
from probes.slurm.transport import Runner, SshRunner, shell_join
from tests.probes.slurm.conftest import OwnLogins, RecordingRunner, SlurmEnv, closed_port

INJECTIONS = ["1;touch /tmp/jt-pwned", "$(id)", "`id`", "1\nid", "--help", "1 2", "../1",
              "1|id", "1&&id", "", "-1", "1_a", "1+x"]


@pytest.mark.parametrize("argv", [
    ["echo", "a b"], ["echo", "1;touch /tmp/x"], ["echo", "$(id)"], ["echo", "`id`"],
    ["echo", "it's"], ["echo", "line\nbreak"], ["echo", ""],
])
def test_shell_join_round_trips_through_a_shell(argv: list[str]) -> None:
    """Every element survives a POSIX shell as exactly one literal word."""
    import shlex
    assert shlex.split(shell_join(argv)) == argv


async def test_argv_reaches_the_remote_command_literally(slurm_env: SlurmEnv,
                                                         tmp_path: Path) -> None:
    """Shell metacharacters in an argv element are printed, not run, over real SSH."""
    marker = f"{slurm_env.scratch}/jt-injected"
    runner = SshRunner(slurm_env.cluster())
    try:
        hostile = f"x; touch {marker}; $(touch {marker}) `touch {marker}`"
        res = await runner.run(["printf", "%s", hostile])
        exists = await runner.run(["test", "-e", marker], check=False)
    finally:
        await runner.aclose()
    assert res.stdout == hostile
    assert exists.exit_status == 1


async def test_one_connection_serves_every_command(slurm_env: SlurmEnv) -> None:
    """Concurrent commands share the runner's single connection."""
    runner = SshRunner(slurm_env.cluster())
    try:
        results = await asyncio.gather(*(runner.run(["sh", "-c", "echo $PPID"])
                                         for _ in range(3)))
    finally:
        await runner.aclose()
    assert runner.commands_sent == 3
    assert all(r.exit_status == 0 for r in results)


async def test_nonzero_exit_is_a_command_error(slurm_env: SlurmEnv) -> None:
    """A failing remote command raises CommandError naming the command and host."""
    runner = SshRunner(slurm_env.cluster())
    try:
        with pytest.raises(CommandError, match=r"scontrol.*exited 1 on 127\.0\.0\.1:2222"):
            await runner.run(["scontrol", "show", "job", "999999999", "-o"])
    finally:
        await runner.aclose()


@pytest.mark.parametrize(("which", "message"), [
    ("wrong", "does not match known_hosts"),
    ("empty", "is not listed in known_hosts"),
])
async def test_host_key_problems_refuse_to_connect(slurm_env: SlurmEnv, tmp_path: Path,
                                                   which: str, message: str) -> None:
    """A mismatched or unknown host key is a HostKeyError naming host:port; nothing runs."""
    known = slurm_env.wrong_known_hosts
    if which == "empty":
        empty = tmp_path / "known_hosts"
        empty.write_text("")
        known = str(empty)
    runner = SshRunner(slurm_env.cluster(known_hosts=known))
    with pytest.raises(HostKeyError, match=rf"127\.0\.0\.1:{slurm_env.port} {message}") as info:
        await runner.run(["true"])
    assert info.value.__cause__ is not None
    assert runner.commands_sent == 0


def test_missing_known_hosts_file_is_refused(slurm_env: SlurmEnv, tmp_path: Path) -> None:
    """No known_hosts file at all: refused before connecting (there is no skip option)."""
    with pytest.raises(HostKeyError, match="cannot be checked"):
        SshRunner(slurm_env.cluster(known_hosts=str(tmp_path / "absent")))


async def test_closed_port_is_unreachable(slurm_env: SlurmEnv) -> None:
    """Connection refused is an UnreachableError naming host:port, cause chained."""
    port = closed_port()
    runner = SshRunner(slurm_env.cluster(port=port))
    with pytest.raises(UnreachableError, match=rf"127\.0\.0\.1:{port}: connection refused") as info:
        await runner.run(["true"])
    assert isinstance(info.value.__cause__, OSError)


async def test_wrong_client_key_is_an_auth_error(slurm_env: SlurmEnv) -> None:
    """A key sshd does not accept is an AuthError."""
    runner = SshRunner(slurm_env.cluster(
        client_keys=("/etc/jobtables-test/wrong_host_ed25519_key",)))
    with pytest.raises(AuthError, match="authentication refused"):
        await runner.run(["true"])


async def test_bad_clusters_are_reported_while_the_good_one_is_ok(slurm_env: SlurmEnv) -> None:
    """In one concurrent sweep a wrong host key and a closed port are unreachable with a
    reason; the healthy cluster still reports ok."""
    port = closed_port()
    good = SlurmProbe(slurm_env.cluster(name="good"))
    wrong_key = SlurmProbe(slurm_env.cluster(name="wrongkey",
                                             known_hosts=slurm_env.wrong_known_hosts))
    closed = SlurmProbe(slurm_env.cluster(name="closed", port=port))
    facts = await asyncio.gather(good.collect(), wrong_key.collect(), closed.collect())
    by_name = {f.name: f for f in facts}
    assert by_name["good"].status == "ok" and by_name["good"].round_trips >= 2
    assert by_name["wrongkey"].status == "unreachable"
    assert by_name["wrongkey"].detail is not None
    assert f"host key for 127.0.0.1:{slurm_env.port} does not match" in by_name["wrongkey"].detail
    assert by_name["closed"].status == "unreachable"
    assert by_name["closed"].detail == f"127.0.0.1:{port}: connection refused"
    assert by_name["wrongkey"].round_trips == 0 and by_name["closed"].round_trips == 0


@pytest.mark.parametrize("job_id", INJECTIONS)
async def test_injection_ids_never_reach_a_runner(job_id: str) -> None:
    """cancel/collect_job validate the id before any runner (connection) is created."""
    made: list[RecordingRunner] = []

    def factory(cluster: SlurmCluster) -> Runner:
        runner = RecordingRunner(cluster)
        made.append(runner)
        return runner

    probe = SlurmProbe(SlurmCluster(name="c", host="127.0.0.1", known_hosts="/dev/null"),
                       runner_factory=factory)
    with pytest.raises(InvalidJobIdError):
        await probe.cancel(job_id)
    with pytest.raises(InvalidJobIdError):
        await probe.collect_job(job_id)
    assert made == []


def _pwned() -> bool:
    return Path("/tmp/jt-pwned").exists()


async def test_injection_ids_reach_no_sshd_and_touch_nothing(slurm_env: SlurmEnv,
                                                           own_logins: OwnLogins) -> None:
    """Against the real sshd: no session is opened and no file appears for hostile ids."""
    probe = SlurmProbe(slurm_env.cluster())
    for job_id in INJECTIONS:
        with pytest.raises(InvalidJobIdError):
            await probe.cancel(job_id)
    assert own_logins.ports == set() and own_logins.count() == 0
    assert not _pwned()


async def test_valid_id_is_sent_as_one_argv(slurm_env: SlurmEnv) -> None:
    """A plain id reaches scancel as its own argument (recorded runner)."""
    made: list[RecordingRunner] = []

    def factory(cluster: SlurmCluster) -> Runner:
        made.append(RecordingRunner(cluster))
        return made[-1]

    await SlurmProbe(slurm_env.cluster(), runner_factory=factory).cancel("123_4")
    assert made[0].calls == [("scancel", "123_4")]


def test_cli_sweep_exits_0_with_bad_clusters_reported(slurm_env: SlurmEnv,
                                                       tmp_path: Path) -> None:
    """`jobtables sweep` with a wrong host key and a closed port beside a good cluster exits 0;
    the bad two are `unreachable` with their reasons in the JSON, the good one `ok`."""
    import json
    import subprocess
    import sys

    port = closed_port()

    def entry(name: str, known: str, at: int) -> str:
        return (f'[[clusters]]\nname = "{name}"\nkind = "slurm"\nhost = "{slurm_env.host}"\n'
                f'port = {at}\nuser = "{slurm_env.user}"\nclient_keys = ["{slurm_env.key}"]\n'
                f'known_hosts = "{known}"\nconnect_timeout_s = 10\n')

    config = tmp_path / "jobtables.toml"
    config.write_text(entry("good", slurm_env.known_hosts, slurm_env.port)
                      + entry("wrongkey", slurm_env.wrong_known_hosts, slurm_env.port)
                      + entry("closed", slurm_env.known_hosts, port))
    done = subprocess.run(
        [sys.executable, "-m", "bot.cli", "sweep", "--config", str(config), "--format", "json"],
        capture_output=True, text=True, timeout=240, check=False,
        cwd=Path(__file__).resolve().parents[3],
    )
    assert done.returncode == 0, done.stderr
    status = {c["name"]: (c["status"], c["detail"]) for c in json.loads(done.stdout)["clusters"]}
    assert status["good"] == ("ok", None)
    assert status["wrongkey"][0] == "unreachable"
    assert f"host key for {slurm_env.host}:{slurm_env.port} does not match" in status["wrongkey"][1]
    assert status["closed"] == ("unreachable", f"{slurm_env.host}:{port}: connection refused")
