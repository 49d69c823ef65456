"""Scheduler commands run on the login node inside the collector's one trip (argvs, no shell).

Policy: STANDARD LIBRARY ONLY, self-contained and Python 3.7+ compatible (shipped in front of
the collector, see ``probes.remote.script``). Each command is an argv run without a shell,
under a timeout; only the scheduler's own programs may be named. A command that cannot start
answers 127 and one that does not finish in time 124 (as a shell and ``timeout`` would), with
the reason on stderr: the caller judges the answer exactly as if it had run it itself.
"""

from __future__ import annotations

import subprocess
from typing import Any, Dict  # noqa: UP035 - Python 3.7 on login nodes

Json = Dict[str, Any]  # noqa: UP006 - evaluated at run time; builtin generics need 3.9


def run_argv(argv: list[str], timeout_s: float) -> tuple[int, str, str]:
    """``(exit status, stdout, stderr)`` of an argv (never a shell); 127 if it cannot start,
    124 (as ``timeout`` says) if it did not finish in time (slurmctld down or wedged)."""
    try:
        proc = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, check=False,
                              timeout=timeout_s)
    except OSError as exc:  # what a shell would say, as LocalRunner does
        return 127, "", f"{argv[0]}: could not start: {exc}"
    except subprocess.TimeoutExpired as exc:
        said = (exc.stderr or b"").decode("utf-8", "replace").strip().splitlines()[-1:]
        return 124, "", (f"{argv[0]}: no answer within {timeout_s:g}s (killed; is slurmctld"
                         f" up?){': ' + said[0] if said else ''}")
    return (proc.returncode, proc.stdout.decode("utf-8", "replace"),
            proc.stderr.decode("utf-8", "replace"))


SCHEDULER_COMMANDS = ("squeue", "scontrol", "sacct", "env")
"""The only programs a ``scheduler`` request may name (``env`` sets SLURM_TIME_FORMAT)."""


def run_scheduler(commands: list[Json], deadline_s: float) -> list[Json | None]:
    """Run each ``{"argv": [...], "unless": marker}`` in order (argvs, never a shell) and give
    its ``{exit, stdout, stderr}``; one whose ``unless`` marker an earlier stdout printed is
    skipped (``None``): ``sacct`` for a job runs only when squeue no longer knew it."""
    out: list[Json | None] = []
    printed = ""
    for command in commands:
        argv = [str(a) for a in command["argv"]]
        marker = command.get("unless")
        if marker and marker in printed:
            out.append(None)
            continue
        if not argv or argv[0] not in SCHEDULER_COMMANDS:
            out.append({"exit": 126, "stdout": "", "stderr": f"{argv[:1]}: not a scheduler"
                        " command: not run"})
            continue
        status, text, err = run_argv(argv, deadline_s)
        printed += text
        out.append({"exit": status, "stdout": text, "stderr": err})
    return out
