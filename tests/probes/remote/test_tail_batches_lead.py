"""A cold tail of a dynamic-sampling run reaches back to where its batches bar's lead is known.

SkyRL's ``Training Batches Processed`` bar counts batches, and under DAPO's dynamic sampling a
``Resample batch K, continue sampling...`` batch advances it with no step; only a ``Step N:``
header or a ``saved checkpoint for global_step_N`` line says by how much it leads
(``probes.logs.skyrl_batches``). With the wandb logger (no ``Step N:`` dict on stdout) and a
save interval longer than the tail, the collector's 1 MiB tail held none: a real sbatch job
(968, 3.9 MB of log, 1600 batches of which 400 resampled, 1200 trained, no save) read step
1494, its lead counted from the tail's start. Now a cold tail whose lines resample reads on
back, a tail's worth at a time, to an anchor or the log's start (at most ``DEEPEN_MAX``).
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType

from probes.logs.parse import parse_log
from probes.remote.collector import read_tail
from probes.remote.logread import DEEPEN_MAX

GENERATOR = Path(__file__).parents[2] / "fixtures" / "skyrl-dapo-rebuilt" / "generate.py"


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("skyrl_dapo_generate", GENERATOR)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _run(batches: int, ckpt: int) -> str:
    lines = _generator().run(False, batches=batches, total=3000, ckpt=ckpt)
    return "\n".join(lines) + "\n"


def _trained(text: str) -> int:
    return len(re.findall(r"reward/avg_raw_reward", text))


def _read(path: Path, text: str) -> tuple[dict, int | None]:  # type: ignore[type-arg]
    """The collector's cold 1 MiB tail of ``text`` and the step the parser reads from it."""
    path.write_text(text)
    tail = read_tail(str(path), 1 << 20, 0)
    summary = parse_log(tail["text"], log_start=tail["offset"] == 0)
    return tail, summary.progress.current if summary.progress else None


def test_an_unanchored_tail_reads_back_to_the_log_start(tmp_path: Path) -> None:
    text = _run(batches=1600, ckpt=100000)  # wandb logger, no save: no anchor anywhere
    assert len(text) > 3 << 20
    tail, step = _read(tmp_path / "dapo.log", text)
    assert tail["offset"] == 0
    assert step == _trained(text) == 1200


def test_a_tail_reads_back_only_to_the_last_save(tmp_path: Path) -> None:
    """Near miss of depth: a save 1.6 MiB before the end is as far as it goes."""
    text = _run(batches=1600, ckpt=700)
    tail, step = _read(tmp_path / "dapo.log", text)
    saved = text.rfind("saved checkpoint for global_step_")
    assert 0 < tail["offset"] <= saved < len(text) - (1 << 20)
    assert len(text) - tail["offset"] < 4 << 20
    assert step == _trained(text)


def test_a_run_without_resampling_keeps_its_tail(tmp_path: Path) -> None:
    """A log with no resample line is read as before: its last MiB."""
    text = _run(batches=1600, ckpt=100000).replace("continue sampling", "kept all prompts")
    tail = read_tail(str(tmp_path / "plain.log"), 1 << 20, 0) if (
        tmp_path / "plain.log").write_text(text) else {}
    assert len(text) - tail["offset"] <= 1 << 20


def test_the_read_back_is_bounded(tmp_path: Path) -> None:
    """A log longer than ``DEEPEN_MAX`` with no anchor is read back whole ``DEEPEN_MAX`` at
    most; before that, only its resample and bar lines are sent (``read_back.far_lines``)."""
    unit = _run(batches=400, ckpt=100000)
    text = unit * (DEEPEN_MAX // len(unit) + 2)
    (tmp_path / "long.log").write_text(text)
    tail = read_tail(str(tmp_path / "long.log"), 1 << 20, 0)
    assert len(tail["text"]) <= DEEPEN_MAX + len(text) // 16
    assert len(tail["text"]) < len(text) - (1 << 20)
