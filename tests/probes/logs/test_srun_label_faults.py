"""A rank's traceback under ``srun --label`` (``1: Traceback ...``) is a traceback.

Replayed on the real SLURM (sbatch, read through ``jobtables job ID --format json``):
``sft-trl-keyerr`` ran ``srun --label accelerate launch sft_trl.py``; task 1 raised ``KeyError:
'prompt'`` in its dataset map, accelerate's ``simple_launcher`` re-raised it as
``subprocess.CalledProcessError``, srun ended the step and killed task 0 (``srun: error: vm:
task 0: Terminated``). Every line of the rank's output carried srun's ``1: `` label, which the
fault scan did not strip (it strips Ray's actor prefix and torch's ``[rankN]:``): no traceback
was found at all, and the job read ``sigterm: srun task 0: Terminated (vm)``, the masked
consequence, where the rulebook asks for the first real traceback. torchrun ``--tee``'s
``[default1]:`` prefix is the same kind of label.
"""

from __future__ import annotations

import pytest

from probes.logs.parse import parse_log

TRACEBACK = [
    "Traceback (most recent call last):",
    '  File "/work/sft_trl.py", line 61, in <module>',
    "    ds = ds.map(to_messages)",
    "KeyError: 'prompt'",
    "Traceback (most recent call last):",
    '  File "/opt/venv/lib/python3.11/site-packages/accelerate/commands/launch.py", line 797,'
    " in simple_launcher",
    "    raise subprocess.CalledProcessError(returncode=process.returncode, cmd=cmd)",
    "subprocess.CalledProcessError: Command '['/opt/venv/bin/python', '/work/sft_trl.py']' "
    "returned non-zero exit status 1.",
]
TAIL = ["srun: error: vm: task 1: Exited with exit code 1",
        "srun: Job step aborted: Waiting up to 32 seconds for job step to finish.",
        "srun: error: vm: task 0: Terminated"]


@pytest.mark.parametrize("label", ["1: ", " 1: ", "12: ", "[default1]:", "[default1]: "])
def test_a_labelled_traceback_is_found_first(label: str) -> None:
    text = "\n".join(["0: ***** Running training *****",
                      *(label + line for line in TRACEBACK), *TAIL]) + "\n"
    faults = parse_log(text).faults
    kinds = [f.kind for f in faults]
    assert "traceback" in kinds, faults
    first = faults[kinds.index("traceback")]
    assert first.excerpt == "KeyError: 'prompt'", first


def test_labelled_tracebacks_of_two_ranks_stay_apart() -> None:
    """Interleaved lines of two ranks: each rank's traceback ends on its own exception."""
    lines = []
    for a, b in zip(TRACEBACK[:4], ["Traceback (most recent call last):",
                                    '  File "/work/sft_trl.py", line 70, in <module>',
                                    "    trainer.train()",
                                    "RuntimeError: NCCL communicator was aborted"], strict=True):
        lines += [f"1: {a}", f"3: {b}"]
    excerpts = [f.excerpt for f in parse_log("\n".join(lines) + "\n").faults
                if f.kind == "traceback"]
    assert excerpts == ["KeyError: 'prompt'", "RuntimeError: NCCL communicator was aborted"]
