"""Waiting on a child process by what it does, not by the wall clock.

Policy: a child ``jobtables`` spends seconds of CPU importing before it does anything, and
on a shared 2-core machine at ``nice 19`` beside busy processes that became 90 s of wall
time: a fixed 60 or 120 s timeout then failed tests of children that were only starved.
A child is given as long as it keeps running, and the wait fails as soon as it is:

- blocked: alive, not done, and not on the CPU for :data:`STALL_S` of wall time (a hang: a
  lock, a read nobody answers, a non-daemon thread holding the exit);
- spinning: more than :data:`CPU_CAP_S` of CPU in all (the commands here need a few).

A starved child still runs a few milliseconds every second (the scheduler's share for
``nice 19``), so it is never mistaken for a blocked one.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable

import pytest

STALL_S = 30.0
"""Wall seconds a live child may spend off the CPU before it counts as hung."""

CPU_CAP_S = 60.0
"""CPU seconds a child may use in all (importing ``bot.server`` takes about 3)."""

POLL_S = 0.05
"""How often the child and the condition are looked at."""

TICK_S = 1 / os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float | None:
    """CPU time (user + system, all threads) of the process ``pid``; None once it is reaped."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            fields = stat.read().rpartition(")")[2].split()
    except FileNotFoundError:
        return None
    return (int(fields[11]) + int(fields[12])) * TICK_S  # utime, stime (fields 14, 15)


class Progress:
    """Fails the test when a child has stopped running or runs without end."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.proc = proc
        self.cpu = 0.0
        self.moved_at = time.monotonic()

    def check(self, waiting_for: str) -> None:
        """One look at the child: fail if it is blocked or spinning (see the module)."""
        cpu = cpu_seconds(self.proc.pid)
        if cpu is None:
            return
        now = time.monotonic()
        if cpu > self.cpu:
            self.cpu, self.moved_at = cpu, now
        if cpu > CPU_CAP_S:
            self.proc.kill()
            pytest.fail(f"child {self.proc.args!r} used {cpu:.0f}s of CPU {waiting_for}")
        if now - self.moved_at > STALL_S:
            self.proc.kill()
            pytest.fail(f"child {self.proc.args!r} blocked for {STALL_S:g}s {waiting_for}")


def communicate(proc: subprocess.Popen[str]) -> tuple[str, str]:
    """``proc.communicate()``, failing the test when the child hangs or spins (not on time)."""
    progress = Progress(proc)
    while True:
        try:  # a retried communicate() loses no output (the subprocess docs)
            return proc.communicate(timeout=POLL_S)
        except subprocess.TimeoutExpired:
            progress.check("before it exited")


def wait_until(proc: subprocess.Popen[str], ready: Callable[[], bool], what: str) -> None:
    """Return once ``ready()`` holds; fail when the child exits first, hangs or spins."""
    progress = Progress(proc)
    while not ready():
        if proc.poll() is not None:
            out, err = proc.communicate()
            pytest.fail(f"child exited {proc.returncode} before {what}: {out!r} {err!r}")
        progress.check(f"before {what}")
        time.sleep(POLL_S)


def run(argv: list[str], env: dict[str, str] | None = None,
        stdout: int = subprocess.PIPE) -> subprocess.CompletedProcess[str]:
    """``subprocess.run(argv)`` with text output captured, waited on by :func:`communicate`."""
    with subprocess.Popen(argv, stdout=stdout, stderr=subprocess.PIPE, text=True,
                          env=env) as proc:
        try:
            out, err = communicate(proc)
        finally:
            proc.kill()
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)
