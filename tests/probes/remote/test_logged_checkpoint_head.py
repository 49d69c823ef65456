"""A save folder a long log names only at its start still banks the run's steps.

torchtitan (``components/checkpointer/dcp.py`` at b5bcd76) logs its folder once, at start:
``Checkpointing active. Checkpoints will be loaded from and saved to {dump_folder}/{folder}``;
each later save says only ``Saving the checkpoint.`` and ``Finished saving the checkpoint in
3.21 seconds.``. The collector sends a long log's head beside its tail so that such a line is
read, but the save lines were looked for among the last 5000 lines of head and tail joined,
and a tail of more lines than that left the head out. Replayed under a real sbatch job
(2319, sft-titan-long: 12,000 step lines, 2.8 MB, its dump folder on scratch outside the
workdir holding ``checkpoint/step-10000`` to ``step-12000`` with their ``.metadata``):
``banked_step`` null; the same run with 400 steps banked its saves.
"""

from __future__ import annotations

from pathlib import Path

from tests.probes.remote.collected import banked_step


def _titan_log(folder: Path, steps: int) -> str:
    stamp = "[rank0]:[titan] 2026-12-05 16:00:00,000 - root - INFO - "
    lines = [stamp + "Building 1-D device mesh with ['dp_shard'], [8]",
             stamp + f"Checkpointing active. Checkpoints will be loaded from and saved to {folder}",
             stamp + "Training starts at step 1"]
    for step in range(1, steps + 1):
        lines.append(stamp + f"step: {step:5}  loss:  2.1000  grad_norm:  0.8000  memory: "
                     "62.31GiB(78.77%)  tps: 6,543  tflops: 378.25  mfu: 38.25%")
        if step % 1000 == 0:
            lines += [stamp + "Saving the checkpoint.",
                      stamp + "Finished saving the checkpoint in 3.21 seconds."]
    return "\n".join(lines) + "\n"


def _banked(tmp_path: Path, steps: int) -> int | None:
    folder = tmp_path / "scratch" / "outputs" / "checkpoint"
    for step in range(1000, steps + 1, 1000):
        save = folder / f"step-{step}"
        save.mkdir(parents=True)
        (save / "__0_0.distcp").write_bytes(b"\0")
        (save / ".metadata").write_bytes(b"\0")
    workdir = tmp_path / "run"
    workdir.mkdir()
    stdout = workdir / "slurm-7.out"
    stdout.write_text(_titan_log(folder, steps))
    return banked_step(stdout, workdir, tail_bytes=1 << 20)


def test_a_folder_named_in_a_long_logs_head_banks(tmp_path: Path) -> None:
    """12,000 step lines: the folder's line is in the head only."""
    assert _banked(tmp_path, 12000) == 12000


def test_a_short_log_names_its_folder_as_before(tmp_path: Path) -> None:
    """Near miss: the whole log is read, the line with it."""
    assert _banked(tmp_path, 3000) == 3000
