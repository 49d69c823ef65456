"""A one-job read's record keeps its paths' bytes that are not UTF-8 and shows its other texts
with U+FFFD, as the sweep's document does (``probes.slurm.undecodable``)."""

from __future__ import annotations

import os
from pathlib import Path

from probes.models import JobFacts, JobState
from probes.remote import collector
from probes.slurm.request import request_cursors
from probes.slurm.undecodable import shown_facts, shown_record
from tests.probes.slurm.test_incremental_fold import warm
from tests.report.factories import record


def test_only_the_paths_keep_their_bytes() -> None:
    """Name, comment and labels read U+FFFD; workdir and StdOut stay ``os.fsdecode``'s."""
    raw = record(name="rl-a\udcffb", workdir="/w/w\udce9d", stdout_path="/w/w\udce9d/x\udcff_7.out",
                 comment="c\udcfe", labels={"image": "i\udcff"}, state=JobState.RUNNING)
    shown = shown_record(raw)
    assert (shown.name, shown.comment, shown.labels) == (
        "rl-a\ufffdb", "c\ufffd", {"image": "i\ufffd"})
    assert (shown.workdir, shown.stdout_path) == (raw.workdir, raw.stdout_path)


def test_a_record_without_such_bytes_is_the_same_object() -> None:
    """Nothing to show differently: no copy (every job of every one-job read passes here)."""
    plain = JobFacts(record=record(name="rl-é"))
    assert shown_facts(plain) is plain


def test_a_cursor_at_an_undecodable_path_is_stored_and_resumed(tmp_path: Path) -> None:
    """A bot's warm sweep keeps the log's cursor (its exact path) in Redis as JSON: storing it
    raised PydanticSerializationError (the bot lost every job's cursor, degraded), and the
    next sweep must resume at the same file."""
    workdir = os.fsencode(tmp_path) + b"/w\xe9d"
    os.mkdir(workdir)
    log = Path(os.fsdecode(workdir + b"/run\xff_7.out"))
    log.write_bytes(b"".join(b"{'loss': %d.5, 'epoch': 0.%d}\n" % (s, s) for s in range(1, 6)))
    _, state = warm(log, None)
    assert state is not None and state.cursor.path == str(log)
    with log.open("ab") as fh:
        fh.write(b"{'loss': 0.25, 'epoch': 0.6}\n")
    # Resumed, as the bot's sweep asks (``request_cursors``): only the appended line is read.
    spec = {"id": "7", "stdout": str(log), "workdir": str(log.parent), "checkpoint_roots": [],
            "trial_roots": [], "cursor": request_cursors({"7": state})["7"]}
    answer = collector.collect({"tail_bytes": 1 << 20, "min_lines": 1, "jobs": [spec]})
    assert answer["jobs"]["7"]["log"]["text"] == "{'loss': 0.25, 'epoch': 0.6}\n"
    facts, resumed = warm(log, state)
    assert resumed is not None and resumed.cursor.offset > state.cursor.offset
    assert facts.log is not None and facts.log.path == str(log)
    assert facts.summary is not None and facts.summary.points[-1].values["loss"] == 0.25
