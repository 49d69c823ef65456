"""A config path that never ends (``/dev/zero``, ``/dev/urandom``, a huge file) is refused at
once with a clear error: ``jobtables sweep --config /dev/urandom`` read for ever, its memory
growing, and ``check-config`` likewise. The bot's config is small; it is read up to a bound.
A pipe (``--config <(...)``) still works."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.config import ConfigError
from bot.config_file import MAX_CONFIG_BYTES, load_config, parse_config

ROOT = Path(__file__).resolve().parents[2]
DEMO = ('[[clusters]]\nname = "snapshot"\nkind = "replay"\n'
        f'path = "{ROOT / "bot" / "demo" / "recording"}"\n')


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom"])
def test_an_endless_config_is_refused(device: str) -> None:
    with pytest.raises(ConfigError, match=rf"{device}: larger than {MAX_CONFIG_BYTES} bytes"):
        load_config(Path(device))


def test_a_huge_config_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "big.toml"
    path.write_text("# " + "x" * MAX_CONFIG_BYTES + "\n")
    with pytest.raises(ConfigError, match="larger than"):
        load_config(path)


def test_a_config_through_a_pipe_still_loads() -> None:
    read, write = os.pipe()
    os.write(write, DEMO.encode())
    os.close(write)
    try:
        config = load_config(Path(f"/dev/fd/{read}"))
    finally:
        os.close(read)
    assert [c.name for c in config.clusters] == ["snapshot"]


def test_the_cli_answers_an_endless_config_with_exit_2() -> None:
    done = subprocess.run([sys.executable, "-m", "bot.cli", "check-config", "--config",
                           "/dev/zero"], capture_output=True, text=True, timeout=60,
                          check=False, cwd=ROOT, env={**os.environ, "JOBTABLES_CONFIG": ""})
    assert done.returncode == 2, (done.returncode, done.stderr)
    assert "larger than" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.parametrize("text", [
    "a = " + "[" * 5000 + "]" * 5000 + "\n",
    "a = " + "{x = " * 3000 + "1" + "}" * 3000 + "\n",
    "a" + ".a" * 5000 + " = 1\n",
    "[clusters" + ".a" * 5000 + "]\n",
], ids=["arrays", "inline-tables", "dotted-key", "table-header"])
def test_a_config_nested_without_end_is_bad_config(text: str) -> None:
    """TOML nested thousands deep is one line naming the key, not a RecursionError's
    traceback and 'internal error' (exit 1) from the parser or the key walk."""
    with pytest.raises(ConfigError, match=r"<config>:1: (a|clusters): nested more than \d+"
                                          r" levels deep: not a config"):
        parse_config(text)


def test_a_deep_config_exits_2_with_one_line(tmp_path: Path) -> None:
    """Through the CLI: check-config says it in one stderr line, exit 2."""
    path = tmp_path / "deep.toml"
    path.write_text("a = " + "[" * 5000 + "]" * 5000 + "\n")
    done = subprocess.run([sys.executable, "-m", "bot.cli", "check-config", "--config",
                           str(path)], check=False, capture_output=True, text=True, cwd=ROOT,
                          timeout=60)
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and "nested more than" in done.stderr


def test_check_config_warns_of_key_files_that_are_no_files(tmp_path: Path) -> None:
    """known_hosts, a client key or a kubeconfig naming a device, a FIFO or a directory, and a
    replay path naming a file: check-config says so (the sweep reports that cluster
    unreachable), as it does for a path that does not exist; a real file draws nothing."""
    from bot.config_checks import config_warnings

    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    real = tmp_path / "known_hosts"
    real.write_text("")
    config = parse_config(
        '[[clusters]]\nname = "a"\nkind = "slurm"\nhost = "h"\n'
        f'known_hosts = "/dev/zero"\nclient_keys = ["{fifo}", "{tmp_path}"]\n\n'
        '[[clusters]]\nname = "b"\nkind = "slurm"\nhost = "h"\n'
        f'known_hosts = "{real}"\n\n'
        f'[[clusters]]\nname = "k"\nkind = "kubernetes"\nkubeconfig = "{fifo}"\n\n'
        f'[[clusters]]\nname = "r"\nkind = "replay"\npath = "{real}"\n')
    warnings = config_warnings(config)
    assert sorted(warnings) == sorted([
        "cluster 'a': known_hosts /dev/zero is not a regular file (the sweep will report the "
        "cluster unreachable)",
        f"cluster 'a': client key {fifo} is not a regular file (the sweep will report the "
        "cluster unreachable)",
        f"cluster 'a': client key {tmp_path} is not a regular file (the sweep will report the "
        "cluster unreachable)",
        f"cluster 'k': kubeconfig {fifo} is not a regular file (the sweep will report the "
        "cluster unreachable)",
        f"cluster 'r': replay path {real} is not a directory (the sweep will report the "
        "cluster unreachable)",
    ])


@pytest.fixture
def fifo(tmp_path: Path) -> Iterator[Path]:
    """A FIFO nobody writes to; any reader still blocked on it is released at the end."""
    path = tmp_path / "config.fifo"
    os.mkfifo(path)
    yield path
    with contextlib.suppress(OSError):  # a reader blocked in open() (old code): let go
        os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))


def test_a_fifo_with_no_writer_is_refused_within_the_bound(
        fifo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``--config`` naming a FIFO nobody writes to hung for ever in open(); it is bad config
    once the read bound passes."""
    monkeypatch.setattr("bot.config_file.CONFIG_READ_TIMEOUT_S", 0.3)
    outcome: list[BaseException | None] = []

    def read() -> None:
        try:
            load_config(fifo)
        except BaseException as exc:  # handed to the test thread
            outcome.append(exc)
        else:
            outcome.append(None)

    reader = threading.Thread(target=read, daemon=True)
    started = time.monotonic()
    reader.start()
    reader.join(5)
    assert not reader.is_alive(), "load_config still blocked on a FIFO with no writer"
    assert time.monotonic() - started < 3
    (exc,) = outcome
    assert isinstance(exc, ConfigError)
    assert str(exc) == f"{fifo}: nothing to read within 0.3s (a FIFO or pipe with no writer?)"


def test_a_fifo_written_late_within_the_bound_still_loads(
        fifo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A writer that comes a little later (a generator slow to start) is read whole."""
    monkeypatch.setattr("bot.config_file.CONFIG_READ_TIMEOUT_S", 5.0)

    def write() -> None:
        time.sleep(0.2)
        with open(fifo, "wb") as fh:
            fh.write(DEMO.encode()[:20])
            fh.flush()
            time.sleep(0.1)
            fh.write(DEMO.encode()[20:])

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    config = load_config(fifo)
    writer.join(5)
    assert [c.name for c in config.clusters] == ["snapshot"]


def test_the_cli_answers_a_fifo_config_with_exit_2_and_one_line(fifo: Path) -> None:
    """check-config and sweep on a FIFO with no writer: exit 2, one line, within the bound."""
    for command in ("check-config", "sweep"):
        code = ("import sys, bot.config_file; bot.config_file.CONFIG_READ_TIMEOUT_S = 0.3; "
                "from bot.cli import main; sys.exit(main(sys.argv[1:]))")
        done = subprocess.run([sys.executable, "-c", code, command, "--config", str(fifo)],
                              capture_output=True, text=True, timeout=30, check=False, cwd=ROOT)
        assert done.returncode == 2, (command, done.returncode, done.stderr)
        assert done.stderr.count("\n") == 1 and "no writer" in done.stderr, done.stderr
