"""A warm read searches a save folder the job names again only when it changed.

Issue 12: a warm bot sweep reads only what changed. Jobs run as a batch script with arguments
(``run.sh --ckpt_path DIR``), and each warm read searched every such folder again, though the
folder changes only at a save: 0.05-0.07 s of a 500-job warm sweep (1.41-1.60x the floor, the
target is 1.2x). The folder's answer now rides in the log cursor with what it rests on (the
folder's and its subdirectories' identity and times, the trackers read, the saves looked
into, the newest save): unchanged, it is not opened again; a new step, a tracker rewritten in
place, a save finishing, a folder deleted or replaced is seen on the very next read, whose
answer equals a full read's.

The collector runs in process on real files; mtimes are set into the past as time passing
between sweeps sets them (a folder changed within ``SETTLED_S`` of a read is searched again
the next time: a coarse clock's tick could hide a second change). Whether the folder was
opened is read from Python's audit events (``open``), not from a stand-in.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from probes.models import JobState, SchedulerRecord
from probes.remote import collector
from probes.slurm.cursors import decode_state, encode_state, fold_job
from probes.slurm.request import request_cursors

PAST = 1_700_000_000
"""A save's time long before the reads (each change is set a second later than the last)."""
_OPENED: list[str] | None = None


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if event == "open" and _OPENED is not None and isinstance(args[0], str):
        _OPENED.append(args[0])


sys.addaudithook(_audit)  # (audit hooks stay for the process: this one records only on demand)


class Run:
    """A job whose command line names ``ckpt``, read as the bot reads it, sweep after sweep."""

    def __init__(self, top: Path, command: str | None = None) -> None:
        self.top = top
        self.ckpt = top / "scratch" / "ckpt"
        self.workdir = top / "w"
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.log = self.workdir / "slurm-7001.out"
        self.log.write_text("step 1 loss 0.5\n")
        self.command = command or f"{self.workdir}/run.sh --ckpt_path {self.ckpt}"
        self.cursor: dict[str, Any] | None = None
        self.clock = PAST

    def spec(self, *, tracked: bool = True) -> dict[str, Any]:
        spec: dict[str, Any] = {"id": "7001", "stdout": str(self.log),
                                "workdir": str(self.workdir), "offset": 0, "completed": False,
                                "checkpoint_roots": [], "trial_roots": [],
                                "command": self.command}
        if tracked:
            spec["cursor"] = self.cursor
        return spec

    def warm(self) -> tuple[dict[str, Any], bool]:
        """A tracked read (the bot's sweep) from the last cursor: its checkpoints answer, and
        whether the save folder was opened."""
        global _OPENED
        _OPENED = []
        try:
            entry = collector.collect({"tail_bytes": 1 << 20, "min_lines": 1,
                                       "jobs": [self.spec()]})["jobs"]["7001"]
        finally:
            opened, _OPENED = _OPENED, None
        cursor = entry["log"]["cursor"]
        if cursor.get("ckpt") == "same":  # every record reused: the bot keeps its own
            cursor["ckpt"] = (self.cursor or {})["ckpt"]
        self.cursor = cursor
        return entry["checkpoints"], any(p.startswith(str(self.ckpt)) for p in opened)

    def full(self) -> dict[str, Any]:
        """A read with no cursor at all (the CLI's): the whole folder searched."""
        entry = collector.collect({"tail_bytes": 1 << 20, "min_lines": 1,
                                   "jobs": [self.spec(tracked=False)]})["jobs"]["7001"]
        return dict(entry["checkpoints"])

    def settle(self) -> None:
        """What changed since the last read is set a second later than anything before (a
        save a while ago, as the next sweep meets it); what did not keeps its time."""
        self.clock += 1
        recent = time.time() - 60
        for path in [self.top, *self.top.rglob("*")]:
            st = os.lstat(path)
            if st.st_mtime > recent and not path.is_symlink():
                os.utime(path, (self.clock, self.clock))


@pytest.fixture
def run(reachable_tmp: Path) -> Iterator[Run]:
    yield Run(reachable_tmp)


def _steps(folder: Path, *steps: int, name: str = "global_step_{}") -> None:
    for step in steps:
        (folder / name.format(step)).mkdir(parents=True, exist_ok=True)


def _listed(answer: dict[str, Any], folder: Path) -> list[str]:
    return list(answer.get("listings", {}).get(str(folder), []))


def test_a_folder_under_a_workdir_holding_a_blank_stays_whole(reachable_tmp: Path) -> None:
    """The folders a cursor carries came back as lines of text (``checkpoint_dir: <dir>``)
    and were parsed again, every warm read: one under ``/scratch/my runs/`` came back cut at
    the blank, and its stump ``/scratch/my`` was carried, a root of its own, from then on."""
    run = Run(reachable_tmp / "my runs", command="run.sh --ckpt_path ckpt")
    run.ckpt = run.workdir / "ckpt"
    _steps(run.ckpt, 10)
    for _ in range(3):
        answer, _ = run.warm()
        assert run.cursor is not None and run.cursor["dirs"] == [str(run.ckpt)]
        assert _listed(answer, run.ckpt) == ["global_step_10"]


def test_an_unchanged_folder_is_not_searched_again(run: Run) -> None:
    _steps(run.ckpt, 10, 20)
    run.settle()
    first, opened = run.warm()
    assert opened and _listed(first, run.ckpt) == ["global_step_10", "global_step_20"]
    second, opened = run.warm()
    assert not opened, "an unchanged save folder was searched again"
    assert second == first == run.full()


def test_a_new_step_is_seen_on_the_next_warm_read(run: Run) -> None:
    _steps(run.ckpt, 10)
    run.settle()
    run.warm()
    run.warm()  # kept
    _steps(run.ckpt, 20)
    answer, opened = run.warm()  # no settle: the save is seconds old
    assert opened and _listed(answer, run.ckpt) == ["global_step_10", "global_step_20"]
    assert answer == run.full()


def test_a_folder_changed_just_before_a_read_is_searched_again(run: Run) -> None:
    """A change within ``SETTLED_S`` of the search: a second change in the same tick of a
    coarse clock would leave the folder's mtime as it was, so it is not kept yet."""
    _steps(run.ckpt, 10)
    run.warm()  # the folder made just now
    _, opened = run.warm()
    assert opened
    run.settle()
    run.warm()
    _, opened = run.warm()
    assert not opened


@pytest.mark.parametrize("how", ["deleted", "replaced", "linked"])
def test_a_deleted_or_replaced_folder_is_seen(run: Run, how: str) -> None:
    _steps(run.ckpt, 10, 20)
    run.settle()
    run.warm()
    run.warm()
    mtime_ns = os.stat(run.ckpt).st_mtime_ns
    shutil.move(run.ckpt, run.top / "old")
    if how == "replaced":  # another folder in its place, even with its very mtime
        _steps(run.ckpt, 30)
        os.utime(run.ckpt, ns=(mtime_ns, mtime_ns))
    elif how == "linked":  # a link to the old folder, moved with its times
        run.ckpt.symlink_to(run.top / "old")
    answer, _ = run.warm()
    assert answer == run.full()
    want = {"deleted": [], "replaced": ["global_step_30"],
            "linked": ["global_step_10", "global_step_20"]}[how]
    assert _listed(answer, run.ckpt) == want


def test_a_tracker_rewritten_in_place_is_read_again(run: Run) -> None:
    """verl and Megatron write ``latest_checkpointed_iteration.txt`` over the old one once the
    save is whole: the folder's own mtime does not move then."""
    _steps(run.ckpt, 10, 20)
    tracker = run.ckpt / "latest_checkpointed_iteration.txt"
    tracker.write_text("10")
    run.settle()
    run.warm()
    assert run.warm()[0]["markers"] == {str(run.ckpt): "10"}
    with tracker.open("r+") as handle:  # in place: no new entry in the folder
        handle.write("20")
    run.settle()
    answer, opened = run.warm()
    assert opened and answer["markers"] == {str(run.ckpt): "20"}
    assert answer == run.full()


def test_a_hugging_face_save_finishing_is_seen(run: Run) -> None:
    """The Trainer writes ``trainer_state.json`` last into ``checkpoint-N``: until then the
    save is in flight and not listed; its writing changes only ``checkpoint-N``."""
    for step in (10, 20):
        (run.ckpt / f"checkpoint-{step}").mkdir(parents=True)
        (run.ckpt / f"checkpoint-{step}" / "training_args.bin").write_bytes(b"x")
    (run.ckpt / "checkpoint-10" / "trainer_state.json").write_text("{}")
    run.settle()
    run.warm()
    assert _listed(run.warm()[0], run.ckpt) == ["checkpoint-10"]
    (run.ckpt / "checkpoint-20" / "trainer_state.json").write_text("{}")
    run.settle()
    answer, _ = run.warm()
    assert _listed(answer, run.ckpt) == ["checkpoint-10", "checkpoint-20"]
    assert answer == run.full()


def test_an_incremental_read_equals_a_full_read(reachable_tmp: Path) -> None:
    """Sweep after sweep, a seeded series of what trainers and users do to save folders
    (verl's tracker, OpenRLHF's ``_actor``, HF's in-flight saves, exports, rotation, a folder
    removed, replaced or made again): each warm read's answer is the full read's, and some
    of them did not search the folder."""
    rng = random.Random(12)
    run = Run(reachable_tmp)
    ckpt = run.ckpt
    reused = searched = 0

    def hf(step: int, done: bool) -> None:
        (ckpt / f"checkpoint-{step}").mkdir(parents=True, exist_ok=True)
        if done:
            (ckpt / f"checkpoint-{step}" / "trainer_state.json").write_text("{}")

    def tracker(folder: Path, text: str) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / ("latest" if folder.name == "_actor" else
                   "latest_checkpointed_iteration.txt")).write_text(text)

    def hf_done() -> None:
        for path in sorted(ckpt.glob("checkpoint-*"))[-1:]:
            hf(int(path.name.split("-")[1]), True)

    def rotate() -> None:
        saves = sorted(ckpt.glob("*step*"))
        if saves:
            shutil.rmtree(rng.choice(saves))

    def replace() -> None:
        shutil.rmtree(ckpt, ignore_errors=True)
        _steps(ckpt, rng.randrange(1, 500))

    ops: dict[str, Callable[[], None]] = {
        "step": lambda: _steps(ckpt, rng.randrange(1, 500)),
        "role step": lambda: _steps(ckpt / "_actor", rng.randrange(1, 500), name="global_step{}"),
        "export": lambda: _steps(ckpt / "exports", rng.randrange(1, 500)),
        "tracker": lambda: tracker(ckpt, str(rng.randrange(1, 500))),
        "role tracker": lambda: tracker(ckpt / "_actor", f"global_step{rng.randrange(1, 500)}"),
        "hf in flight": lambda: hf(rng.randrange(1, 500), False),
        "hf done": hf_done,
        "rotate": rotate,
        "delete": lambda: shutil.rmtree(ckpt, ignore_errors=True),
        "replace": replace,
        "nothing": lambda: None,
    }
    _steps(ckpt, 5)
    run.settle()
    run.warm()
    for round_no in range(80):
        # Most sweeps meet nothing new: a save comes every few.
        name = rng.choice(sorted(ops)) if rng.random() < 0.4 else "nothing"
        ops[name]()
        if rng.random() < 0.8:
            run.settle()
        answer, opened = run.warm()
        assert answer == run.full(), f"round {round_no}: after {name!r}"
        if opened:
            searched += 1
        else:
            reused += 1
    assert reused >= 10 and searched >= 10


def test_the_bot_keeps_the_folders_answer_in_its_stored_state(run: Run) -> None:
    """The record rides in the cursor the bot stores (``probes.slurm.cursors.LogCursor``) and
    sends back; a read that reused every record answers ``"same"`` (not the records again),
    and the state the bot folds from it keeps them: sweep after sweep, through the stored
    JSON, the folder is not searched again and every sweep banks its steps."""
    _steps(run.ckpt, 10, 20)
    run.settle()
    record = SchedulerRecord(cluster="c", job_id="7001", name="run", state=JobState.RUNNING,
                             stdout_path=str(run.log))
    state = None
    for sweep in range(3):
        global _OPENED
        _OPENED = []
        try:
            collected = collector.collect({"tail_bytes": 1 << 20, "min_lines": 1,
                                           "jobs": [run.spec()]})["jobs"]["7001"]
        finally:
            opened, _OPENED = _OPENED, None
        assert any(p.startswith(str(run.ckpt)) for p in opened) == (sweep == 0)
        assert (collected["log"]["cursor"]["ckpt"] == "same") == (sweep > 0)
        facts, state = fold_job(record, collected, state, aliases={}, benign_patterns=())
        assert state is not None and state.cursor.ckpt
        assert facts.checkpoints is not None and facts.checkpoints.steps == (10, 20)
        stored = encode_state(state)
        assert stored is not None
        state = decode_state(stored)
        assert state is not None
        # (the request travels to the login node as JSON)
        run.cursor = json.loads(json.dumps(request_cursors({"7001": state})["7001"]))


def test_the_command_line_is_read_again_only_when_its_folders_may_be_missing(run: Run) -> None:
    """A warm read found the command line's folders before: the cursor notes which line (and
    bases) its folders hold every folder of, and that line is not parsed again. A log read
    from nothing (rotated), another line or other bases have it read again."""
    _steps(run.ckpt, 10)
    run.warm()
    assert run.cursor is not None and len(run.cursor["cmd"]) == 16
    mark = run.cursor["cmd"]
    answer, _ = run.warm()
    assert run.cursor["cmd"] == mark and run.cursor["dirs"] == [str(run.ckpt)]
    assert answer == run.full()
    # rotated: the new file's cursor starts with no folders; the line is read again
    run.log.rename(run.log.with_suffix(".1"))
    run.log.write_text("step 2 loss 0.4\n")
    answer, _ = run.warm()
    assert run.cursor["dirs"] == [str(run.ckpt)] and _listed(answer, run.ckpt)
    # another line (its folder elsewhere), the cursor still noting the first one
    other = run.top / "scratch" / "other"
    _steps(other, 30)
    run.command = f"{run.workdir}/run.sh --ckpt_path {other}"
    answer, _ = run.warm()
    assert run.cursor["dirs"] == [str(run.ckpt), str(other)]  # the line is the oldest text
    assert _listed(answer, other) == ["global_step_30"] and run.cursor["cmd"] != mark
