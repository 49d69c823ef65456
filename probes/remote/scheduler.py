"""Scheduler commands run on the login node inside the collector's one trip (argvs, no shell).

Policy: STANDARD LIBRARY ONLY, self-contained and Python 3.7+ compatible (shipped in front of
the collector, see ``probes.remote.script``). Each command is an argv run without a shell,
under a timeout; only the scheduler's own programs may be named. Commands that do not depend
on each other's output (no ``unless`` marker between them) run at the same time, each in
its own process: a one-job read's squeue and scontrol cost the longer of the two, not both.
A command that cannot start answers 127 and one that does not finish in time 124 (as a shell
and ``timeout`` would), with the reason on stderr: the caller judges the answer exactly as if
it had run it itself.

A request that names scheduler commands and no job (a one-job read's first command,
``probes.slurm.onejob``) is answered by :func:`answer_scheduler` alone, shipped without the
collector (``probes.remote.script.build_collector_script``): a fifth of the script to send and
compile, the same answer.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from typing import Any, Dict  # noqa: UP035 - Python 3.7 on login nodes

Json = Dict[str, Any]  # noqa: UP006 - evaluated at run time; builtin generics need 3.9


OUTPUT_CAPPED = 125
"""The exit status :func:`finish_argv` gives a command killed for printing more than its
``max_out`` bytes (its stdout then not kept)."""

_ERR_KEPT = 1 << 20
"""Bytes of a capped command's stderr kept (its first)."""


def run_argv(argv: list[str], timeout_s: float,
             max_out: int | None = None) -> tuple[int, str, str]:
    """``(exit status, stdout, stderr)`` of an argv (never a shell); 127 if it cannot start,
    124 (as ``timeout`` says) if it did not finish in time (slurmctld down or wedged),
    :data:`OUTPUT_CAPPED` if it printed more than ``max_out`` bytes."""
    try:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE)
    except OSError as exc:  # what a shell would say, as LocalRunner does
        return 127, "", f"{argv[0]}: could not start: {exc}"
    return finish_argv(proc, timeout_s, max_out)


def _communicate_capped(proc: subprocess.Popen[bytes], timeout_s: float,
                        max_out: int) -> tuple[bytes, bytes] | None:
    """``proc.communicate(timeout=timeout_s)`` that holds at most ``max_out`` bytes of
    stdout: past them the process is killed and None returned (its output never held
    whole). Reads as communicate() does (both pipes, as they are ready), in larger pieces."""
    import selectors

    deadline = time.monotonic() + timeout_s
    out: list[bytes] = []
    err: list[bytes] = []
    size = err_size = 0
    with selectors.DefaultSelector() as selector:
        selector.register(proc.stdout, selectors.EVENT_READ, out)  # type: ignore[arg-type]
        selector.register(proc.stderr, selectors.EVENT_READ, err)  # type: ignore[arg-type]
        while selector.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                raise subprocess.TimeoutExpired(proc.args, timeout_s, b"".join(err))
            for key, _ in selector.select(left):
                chunk = os.read(key.fd, 1 << 16)
                if not chunk:
                    selector.unregister(key.fileobj)
                    key.fileobj.close()  # type: ignore[union-attr]
                elif key.data is out:
                    size += len(chunk)
                    if size > max_out:
                        proc.kill()
                        proc.wait()
                        return None
                    out.append(chunk)
                elif err_size < _ERR_KEPT:
                    err_size += len(chunk)
                    err.append(chunk)
    proc.wait(max(0.0, deadline - time.monotonic()))  # TimeoutExpired past the deadline
    return b"".join(out), b"".join(err)


def finish_argv(proc: subprocess.Popen[bytes], timeout_s: float,
                max_out: int | None = None) -> tuple[int, str, str]:
    """:func:`run_argv`'s answer for a process already started (stdout and stderr pipes):
    waited for at most ``timeout_s`` more, then killed (124); with ``max_out``, killed once
    its stdout passes that many bytes (:data:`OUTPUT_CAPPED`, no stdout)."""
    argv = [str(a) for a in proc.args]  # type: ignore[union-attr]
    try:
        if max_out is None:
            out, err = proc.communicate(timeout=timeout_s)
        else:
            read = _communicate_capped(proc, timeout_s, max_out)
            if read is None:
                return (OUTPUT_CAPPED, "",
                        f"{argv[0]}: printed more than {max_out} bytes (killed, not read)")
            out, err = read
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
        said = (err or b"").decode("utf-8", "replace").strip().splitlines()[-1:]
        return 124, "", (f"{argv[0]}: no answer within {timeout_s:g}s (killed; is slurmctld"
                         f" up?){': ' + said[0] if said else ''}")
    # stdout keeps every byte (a path that is not UTF-8 must be opened as it is: undecodable
    # bytes become os.fsdecode's lone surrogates, sent as \\udcXX, ``answer_bytes``).
    return (proc.returncode, out.decode("utf-8", "surrogateescape"),
            err.decode("utf-8", "replace"))


SCHEDULER_MAX_BYTES = 512 << 20
"""The most of a scheduler command's stdout held (``sacct --json`` over a day of a busy
user's jobs is tens of MB): past it the command is killed, :data:`OUTPUT_CAPPED`, and its
stderr says so, rather than the login node holding it all."""

SCHEDULER_COMMANDS = ("squeue", "scontrol", "sacct", "env")
"""The only programs a ``scheduler`` request may name (``env`` sets SLURM_TIME_FORMAT)."""


def run_scheduler(commands: list[Json], deadline_s: float) -> list[Json | None]:
    """Run each ``{"argv": [...], "unless": marker}`` (argvs, never a shell) and give its
    ``{exit, stdout, stderr}`` in the order asked; one whose ``unless`` marker an earlier
    command's stdout printed is skipped (``None``): ``sacct`` for a job runs only when squeue
    no longer knew it. One with a ``when`` marker runs only when an earlier command printed
    it. Each run of commands up to the next ``unless``/``when`` runs concurrently."""
    out: list[Json | None] = [None] * len(commands)
    printed = ""
    batch: list[tuple[int, list[str]]] = []

    def flush() -> None:
        nonlocal printed
        ran = _run_together([argv for _, argv in batch], deadline_s)
        for n, (i, _) in enumerate(batch):
            status, text, err = ran[n]
            printed += text
            out[i] = {"exit": status, "stdout": text, "stderr": err}
        batch.clear()

    for i, command in enumerate(commands):
        argv = [str(a) for a in command["argv"]]
        marker = command.get("unless")
        wanted = command.get("when")
        if marker or wanted:
            flush()  # the marker is looked for in every earlier command's stdout
            if (marker and marker in printed) or (wanted and wanted not in printed):
                continue
        if not argv or argv[0] not in SCHEDULER_COMMANDS:
            out[i] = {"exit": 126, "stdout": "", "stderr": f"{argv[:1]}: not a scheduler"
                      " command: not run"}
            continue
        batch.append((i, argv))
        if marker or wanted:
            flush()
    flush()
    return out


def _run_together(argvs: list[list[str]], timeout_s: float) -> list[tuple[int, str, str]]:
    """:func:`run_argv` of each argv at the same time (a thread each; every one has its own
    timeout, so none outlives it); results in the order given."""
    results: list[tuple[int, str, str]] = [(0, "", "")] * len(argvs)

    def one(i: int) -> None:
        results[i] = run_argv(argvs[i], timeout_s, SCHEDULER_MAX_BYTES)

    threads = [threading.Thread(target=one, args=(i,), daemon=True)
               for i in range(1, len(argvs))]
    for thread in threads:
        thread.start()
    if argvs:
        one(0)
    for thread in threads:
        thread.join()
    return results


def exit_with_the_session() -> None:
    """Leave no process behind: exit on SIGHUP, and when the SSH session that started us is
    gone (our parent changes: sshd exited, the channel or the connection closed)."""
    signal.signal(signal.SIGHUP, lambda signum, frame: os._exit(129))
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(70)

    threading.Thread(target=watch, name="session-watch", daemon=True).start()


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def answer_bytes(value: Any) -> bytes:
    """One JSON value as an answer carries it: UTF-8 whatever the login node's locale,
    non-ASCII text not escaped (6x smaller), except the lone surrogates of bytes that are
    not UTF-8 (a path decoded by ``os.fsdecode`` or with ``surrogateescape``): those are
    written ``\\udcXX``, so the answer stays valid UTF-8 and ``json.loads`` gives back the
    very string, whose ``os.fsencode`` is the file's name. ``dumps``, not ``dump``:
    ``json.dump`` encodes in pure Python, chunk by chunk (~20x slower here)."""
    text = json.dumps(value, ensure_ascii=False)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:  # rare: only then is the text scanned
        # Outside its strings JSON text is ASCII: every surrogate is inside a string.
        return _LONE_SURROGATE.sub(_surrogate_escape, text).encode("utf-8")


def _surrogate_escape(match: Any) -> str:
    return f"\\u{ord(match.group()):04x}"


def answer_scheduler(request_json: str) -> None:
    """Entry point of the scheduler-only script: the answer the collector gives a request
    with ``scheduler`` commands and no jobs (protocol 1, no jobs, each command's result), in
    the collector's encoding (UTF-8 whatever the locale, non-ASCII not escaped)."""
    exit_with_the_session()
    request = json.loads(request_json)
    ran = run_scheduler(list(request["scheduler"]),
                        0.4 * float(request.get("deadline_s") or 60.0))
    answer = {"protocol": 1, "host": os.uname().nodename, "now": time.time(), "jobs": {},
              "scheduler": ran}
    sys.stdout.buffer.write(answer_bytes(answer) + b"\n")
    sys.stdout.flush()
