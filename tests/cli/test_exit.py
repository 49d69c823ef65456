"""How a ``jobtables`` process ends (``bot.cli.launch``), tried in real child processes.

A one-shot command leaves by ``os._exit`` once its output is out, skipping the interpreter's
teardown; what a user or a script sees must not change: stdout, the one stderr line, the exit
codes (0, 2, 130 on Ctrl-C), a closed pipe at the final flush reported as the interpreter
always reported it, a report written into a closed pipe a quiet exit 0.
"""

from __future__ import annotations

import os
import select
import signal
import socket
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest

from bot.cli import main
from tests.cli import children
from tests.conftest import ROOT

SCRIPT = Path(sys.executable).with_name("jobtables")
"""The console script the install made (``[project.scripts]``)."""

SENTINELS = textwrap.dedent("""
    import atexit, sys
    import bot.cli

    class Teardown:
        def __del__(self):
            sys.stderr.write("teardown ran\\n")

    KEPT = Teardown()  # freed only by the interpreter's teardown (module globals cleared)
    atexit.register(sys.stderr.write, "atexit ran\\n")
    sys.argv = ["jobtables", *sys.argv[1:]]
    bot.cli.launch()
""")


def child(*argv: str, stdout: int = subprocess.PIPE,
          buffered: bool = False) -> subprocess.CompletedProcess[str]:
    """The console script run with ``argv``, its outputs captured as text."""
    env = dict(os.environ)
    if buffered:  # stdout block-buffered, as a user's shell has it
        env.pop("PYTHONUNBUFFERED", None)
    return children.run([str(SCRIPT), *argv], env=env, stdout=stdout)


def sentinel_child(*argv: str) -> subprocess.CompletedProcess[str]:
    """``launch`` with ``argv`` in a child that notes its atexit handlers and teardown."""
    return children.run([sys.executable, "-c", SENTINELS, *argv])


def closed_pipe() -> int:
    """The write end of a pipe whose read end is already closed."""
    read, write = os.pipe()
    os.close(read)
    return write


def test_the_console_script_is_launch() -> None:
    """``jobtables`` on the PATH runs ``launch`` (through ``bot.entry``, which imports it
    under the start's Ctrl-C rule), not ``main``."""
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert pyproject["project"]["scripts"] == {"jobtables": "bot.entry:launch"}
    assert "from bot.entry import launch" in SCRIPT.read_text()


def test_one_shot_command_skips_teardown_after_atexit(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A one-shot command prints what ``main`` prints, runs atexit, never tears down."""
    assert main(["demo"]) == 0
    expected = capsys.readouterr().out
    done = sentinel_child("demo")
    assert done.returncode == 0 and done.stdout == expected
    assert done.stderr == "atexit ran\n"


def test_the_bot_exits_through_the_interpreter(tmp_path: Path) -> None:
    """``jobtables bot`` keeps the ordinary exit: its teardown runs."""
    done = sentinel_child("bot", "--config", str(tmp_path / "missing.toml"))
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.splitlines() == [
        f"jobtables: {tmp_path / 'missing.toml'}: no such config file",
        "atexit ran", "teardown ran"]


@pytest.mark.parametrize(("argv", "code", "stderr"), [
    (["--help"], 0, ""),
    (["sweep", "--nope"], 2, "jobtables: error: unrecognized arguments: --nope "
                             "(see jobtables --help)\n"),
    (["sweep", "--format", "xml"], 2,
     "jobtables sweep: error: argument --format: invalid choice: 'xml' (choose from 'text', "
     "'json', 'slack') (see jobtables sweep --help)\n"),
    (["job"], 2, "jobtables job: error: the following arguments are required: ID "
                 "(see jobtables job --help)\n"),
    ([], 2, "jobtables: error: the following arguments are required: COMMAND "
            "(see jobtables --help)\n"),
    (["sweep", "--config", "/nonexistent/j.toml"], 2,
     "jobtables: /nonexistent/j.toml: no such config file\n"),
    (["job", "1;id", "--config", "/nonexistent/j.toml"], 2,
     "jobtables: '1;id' is not a job id: expected digits (optionally _N or +N) or a "
     "Kubernetes name (optionally jobset/NAME, pytorchjob/NAME, rayjob/NAME, tfjob/NAME or "
     "mpijob/NAME)\n"),
    (["job", "1" * 5000, "--config", "/nonexistent/j.toml"], 2,
     f"jobtables: '{'1' * 40}…' is not a job id: expected digits (optionally _N or +N) or a "
     "Kubernetes name (optionally jobset/NAME, pytorchjob/NAME, rayjob/NAME, tfjob/NAME or "
     "mpijob/NAME)\n"),
    (["job", "x" * 300 + ":1", "--config", "/nonexistent/j.toml"], 2,
     f"jobtables: '{'x' * 40}…' is not a cluster name\n"),
])
def test_exit_codes_and_stderr(argv: list[str], code: int, stderr: str) -> None:
    """Usage and config errors: the code and the one stderr line, as ``main`` gives them."""
    done = child(*argv)
    assert (done.returncode, done.stderr) == (code, stderr)
    assert ("usage: jobtables" in done.stdout) is (argv == ["--help"])


def test_output_left_in_the_buffer_reaches_a_pipe(capsys: pytest.CaptureFixture[str]) -> None:
    """Block-buffered stdout is flushed before ``os._exit``: nothing is lost (a print's
    closing newline stays in the buffer)."""
    assert main(["demo", "--format", "json"]) == 0
    expected = capsys.readouterr().out
    done = child("demo", "--format", "json", buffered=True)
    assert (done.returncode, done.stderr, done.stdout) == (0, "", expected)


def test_a_closed_pipe_at_the_final_flush_is_reported_as_python_does() -> None:
    """Output still buffered when stdout's reader has gone: the interpreter's own message
    and exit 120, as before ``os._exit``."""
    write = closed_pipe()
    try:
        done = child("check-config", "--config", "/nonexistent/j.toml", stdout=write,
                     buffered=True)
    finally:
        os.close(write)
    assert done.returncode == 2  # the error line goes to stderr: nothing buffered, no flush
    write = closed_pipe()
    config = ROOT / "deploy" / "jobtables.example.toml"
    try:
        done = child("check-config", "--config", str(config), stdout=write, buffered=True)
    finally:
        os.close(write)
    assert done.returncode == 120
    # (the example names deployment paths this machine lacks: check-config warns about them)
    assert [ln for ln in done.stderr.splitlines() if not ln.startswith("jobtables: warning:")] == [
        "Exception ignored in: <_io.TextIOWrapper name='<stdout>' mode='w' encoding='utf-8'>",
        "BrokenPipeError: [Errno 32] Broken pipe"]


def test_a_pipe_closed_while_printing_is_a_quiet_exit() -> None:
    """A report written into a closed pipe (``jobtables demo | head -1``): exit 0, nothing on
    stderr (it was exit 1, an "internal error" and a BrokenPipeError traceback)."""
    write = closed_pipe()
    try:
        done = child("demo", stdout=write, buffered=True)
    finally:
        os.close(write)
    assert (done.returncode, done.stderr) == (0, "")


def test_ctrl_c_during_a_sweep_is_130_and_silent(tmp_path: Path) -> None:
    """SIGINT while the sweep waits on its cluster: exit 130, nothing on stderr."""
    with socket.create_server(("127.0.0.1", 0)) as server:  # accepts, never speaks SSH
        (tmp_path / "known_hosts").write_text("")
        config = tmp_path / "jobtables.toml"
        # The child's own bounds a day away: only the SIGINT may end its wait, however long
        # a loaded machine keeps it from handling the signal (connect_timeout_s = 15 and
        # timeout_s = 60 could fire first and end the sweep 'unreachable', exit 0).
        config.write_text(textwrap.dedent(f"""\
            [[clusters]]
            name = "mute"
            kind = "slurm"
            host = "127.0.0.1"
            port = {server.getsockname()[1]}
            user = "nobody"
            known_hosts = "{tmp_path / 'known_hosts'}"
            connect_timeout_s = 86400
            command_timeout_s = 86400
            timeout_s = 86400
        """))
        proc = subprocess.Popen([str(SCRIPT), "sweep", "--config", str(config)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            children.wait_until(proc, lambda: bool(select.select([server], [], [], 0)[0]),
                                "it connected")
            conn, _ = server.accept()  # the child is inside its sweep now
            with conn:
                proc.send_signal(signal.SIGINT)
                out, err = children.communicate(proc)
        finally:
            proc.kill()
            proc.wait()
    assert (proc.returncode, out, err) == (130, "", "")
