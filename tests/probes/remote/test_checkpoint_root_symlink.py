"""A checkpoint root that is itself a symbolic link (``{workdir}/checkpoints ->
/scratch/$USER/run1/checkpoints``, the common cluster layout keeping saves off a small home
quota) is the job's tree, as a trial root that is one is (e0cdf91).

Found replaying on the real SLURM (a verl run as jobtables, an HF Trainer run as jtuser, each
saving into the linked target): ``jobtables sweep --format json`` read ``banked_step`` null and
``checkpoints unreadable``, and ``jobtables job`` noted ``.../checkpoints: a symbolic link: not
followed``, while ``global_step_N`` / ``checkpoint-N`` dirs were there. One rule for every
root (``Guard.open_root``): the root's link is followed when its target is nothing under
/proc, /sys or /dev and the job's user could list it; nothing below the root follows a link,
and only the user's own steps count there. The deep probe's dump dirs are roots too.
"""

from __future__ import annotations

import json
import os
import pwd
import subprocess
from pathlib import Path
from typing import Any

import pytest

from probes.config import DEFAULT_CHECKPOINT_ROOTS
from probes.remote import collector
from probes.remote.completion import collect_completion
from probes.remote.guard import Guard
from probes.remote.rollouts import collect_rollouts
from probes.remote.script import build_collector_script
from probes.remote.tree import SEEN, collect_checkpoints
from probes.slurm.checkpoints import build_listing, expand_roots
from tests.probes.remote.test_rollouts import PY37, dumps_module

NAME = "verl-grpo-ln"


def _dirs(base: Path, *names: str) -> None:
    for name in names:
        (base / name).mkdir(parents=True, exist_ok=True)


def _verl(tmp: Path) -> tuple[Path, str]:
    """verl's ``checkpoints/<project>/<experiment>/global_step_N`` written through the link;
    it prints ``local_global_step_folder`` as its relative ``default_local_dir`` gives it."""
    exp = tmp / "scratch" / "run1" / "checkpoints" / "gsm8k" / NAME
    _dirs(exp, "global_step_10/actor", "global_step_20/actor")
    (exp / "latest_checkpointed_iteration.txt").write_text("20")
    work = tmp / "run1"
    work.mkdir()
    (work / "checkpoints").symlink_to(tmp / "scratch" / "run1" / "checkpoints")
    return work, "".join(f"step:{i} - actor/entropy:0.5\nlocal_global_step_folder:"
                         f" checkpoints/gsm8k/{NAME}/global_step_{i}\n" for i in (10, 20))


def _hf(tmp: Path) -> tuple[Path, str]:
    """HF Trainer's ``<output_dir>/checkpoint-N`` (each holding its trainer_state.json), the
    ``output`` default root a link, the save line naming the path through it."""
    out = tmp / "scratch" / "output"
    for step in (20, 40):
        _dirs(out, f"checkpoint-{step}")
        (out / f"checkpoint-{step}" / "trainer_state.json").write_text(
            json.dumps({"global_step": step, "max_steps": 100}))
    work = tmp / "run2"
    work.mkdir()
    (work / "output").symlink_to(out)
    return work, ("[INFO|trainer.py:3984] 2026-12-05 07:00:00,118 >> Saving model checkpoint"
                  f" to {work}/output/checkpoint-40\n")


def _request(work: Path, log: str) -> dict[str, Any]:
    roots = expand_roots(list(DEFAULT_CHECKPOINT_ROOTS), workdir=str(work), name=NAME,
                         job_id="7", user="u")
    stdout = work / "slurm-7.out"
    stdout.write_text(log)
    return {"tail_bytes": 1 << 16, "min_lines": 1,
            "jobs": [{"id": "7", "stdout": str(stdout), "workdir": str(work), "offset": 0,
                      "checkpoint_roots": roots, "trial_roots": []}]}


def _banked(raw: dict[str, Any]) -> int | None:
    return build_listing(raw.get("listings") or {}, export_listings=raw.get("exports"),
                         latest_markers=raw.get("markers"), logged=raw.get("logged")).banked_step


@pytest.mark.parametrize(("layout", "banked"), [
    pytest.param(_verl, 20, id="verl-checkpoints-linked"),
    pytest.param(_hf, 40, id="hf-output-linked"),
])
def test_a_checkpoint_root_that_is_a_link_to_the_users_tree_banks(
        tmp_path: Path, layout: Any, banked: int) -> None:
    work, log = layout(tmp_path)
    raw = collector.collect(_request(work, log))["jobs"]["7"]["checkpoints"]
    assert _banked(raw) == banked
    assert not [e for e in (raw.get("errors") or {}).values() if "symbolic link" in e]


def test_the_shipped_collector_follows_it_under_python_3_7(tmp_path: Path) -> None:
    assert PY37.exists(), "pyenv 3.7.16 is part of this machine's toolchain"
    work, log = _verl(tmp_path)
    run = subprocess.run([str(PY37), "-"], input=build_collector_script(_request(work, log)),
                         capture_output=True, text=True, check=True, timeout=120)
    assert _banked(json.loads(run.stdout)["jobs"]["7"]["checkpoints"]) == 20


def test_a_root_below_a_linked_directory_of_the_workdir_banks(tmp_path: Path) -> None:
    """``{workdir}/checkpoints/{name}`` whose ``checkpoints`` is the link (an ancestor)."""
    _dirs(tmp_path / "scratch" / NAME, "global_step_30")
    work = tmp_path / "run"
    work.mkdir()
    (work / "checkpoints").symlink_to(tmp_path / "scratch")
    raw = collector.collect(_request(work, "step:1\n"))["jobs"]["7"]["checkpoints"]
    assert _banked(raw) == 30


def _search(work: Path, uid: int, log: str | None = None) -> dict[str, Any]:
    SEEN.clear()
    return collect_checkpoints([str(work / "checkpoints")], Guard(uid, 5.0), log, str(work))


def _jtuser() -> int:
    if os.geteuid() != 0:
        pytest.fail("needs root to lay out trees of other owners (run the suite as root)")
    return pwd.getpwnam("jtuser").pw_uid


@pytest.mark.parametrize("mode", [0o700, 0o755])
def test_a_link_into_another_users_tree_banks_none_of_theirs(reachable_tmp: Path,
                                                             mode: int) -> None:
    """Near-miss: the target is another owner's (uid 65534), private (not followed, even named
    by the log: the job's user could not list it) or open (followed, but none of its steps is
    the user's; a save folder the log names would count them: ``_owned``'s object stores)."""
    uid = _jtuser()
    other = reachable_tmp / "other" / "checkpoints"
    _dirs(other, "global_step_10", "global_step_20")
    for path in [other.parent, other, *other.iterdir()]:
        os.chown(path, 65534, 65534)
    os.chmod(other, mode)
    work = reachable_tmp / "run"
    work.mkdir()
    (work / "checkpoints").symlink_to(other)
    os.chown(work, uid, uid)
    named = f"local_global_step_folder: {work}/checkpoints/global_step_20\n"
    raw = _search(work, uid, named if mode == 0o700 else None)
    assert _banked(raw) is None
    if mode == 0o700:
        assert "cannot list" in raw["errors"][str(work / "checkpoints")]


@pytest.mark.parametrize("target", ["/proc/self", "/proc", "/dev", "/sys"])
def test_a_link_into_proc_or_dev_is_not_followed(tmp_path: Path, target: str) -> None:
    """Near-miss: a root linked into /proc, /dev or /sys is refused, said, never listed."""
    work = tmp_path / "run"
    work.mkdir()
    (work / "checkpoints").symlink_to(target)
    raw = _search(work, os.geteuid())
    assert _banked(raw) is None and not raw.get("listings")
    assert "/proc, /sys or /dev" in raw["errors"][str(work / "checkpoints")]


def test_a_link_loop_and_a_dangling_link_bank_nothing(tmp_path: Path) -> None:
    """Near-misses: a loop is an unreadable root (said), a dangling link an absent one."""
    work = tmp_path / "run"
    work.mkdir()
    (work / "checkpoints").symlink_to(work / "ckpt")
    (work / "ckpt").symlink_to(work / "checkpoints")
    raw = _search(work, os.geteuid())
    assert _banked(raw) is None and str(work / "checkpoints") in raw["errors"]
    (work / "checkpoints").unlink()
    (work / "checkpoints").symlink_to(tmp_path / "gone")
    raw = _search(work, os.geteuid())
    assert _banked(raw) is None and not raw.get("errors")


def test_a_link_below_a_linked_root_is_still_not_followed(tmp_path: Path) -> None:
    """Near-miss: inside the followed root, ``proj -> elsewhere`` is not entered."""
    _dirs(tmp_path / "elsewhere" / NAME, "global_step_99")
    real = tmp_path / "scratch" / "checkpoints"
    _dirs(real / "gsm8k" / NAME, "global_step_10")
    (real / "proj").symlink_to(tmp_path / "elsewhere")
    work = tmp_path / "run"
    work.mkdir()
    (work / "checkpoints").symlink_to(real)
    raw = _search(work, os.geteuid())
    assert _banked(raw) == 10
    assert "elsewhere" not in repr(raw) and not any("/proj" in r for r in raw["listings"])


def test_a_dump_dir_that_is_a_link_is_sampled(tmp_path: Path) -> None:
    """The deep probe: verl's ``rollout_data_dir`` a link to the user's scratch is read; a
    dump dir linked into /proc is not."""
    dumps_module().write_verl_dump(str(tmp_path / "scratch" / "rollouts"), 5, ["q"],
                                   ["linked answer"], [1.0])
    (tmp_path / "rollouts").symlink_to(tmp_path / "scratch" / "rollouts")
    (tmp_path / "proc").symlink_to("/proc/self")
    answer = collect_rollouts({"dump_dirs": [str(tmp_path / "rollouts"), str(tmp_path / "proc")]})
    (dump,) = answer["dumps"]
    assert dump["kind"] == "verl" and dump["steps_listed"] == [5]
    assert dump["steps"][0]["samples"][0]["output"] == "linked answer"
    assert any("/proc, /sys or /dev" in s for s in answer["skipped"])


def test_the_completion_check_reads_a_linked_output_dir(tmp_path: Path) -> None:
    """The completion check of a finished HF run whose ``output`` is a link: its newest
    ``checkpoint-N/trainer_state.json`` is read (it opens files by path: no refusal)."""
    work, log = _hf(tmp_path)
    found = collect_completion(str(work), log, [str(work / "output")])
    assert any(s["kind"] == "trainer_state.json" and s["current_steps"] == 40
               for s in found["sources"])
