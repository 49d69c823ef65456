"""A completion file or a save directory whose mtime is unset (an object-store FUSE mount that
reports the epoch for what it does not track) has no known write time: the collector sends
none, so neither is taken for an earlier run's (``STALE_SKEW`` in probes.models). With the
epoch sent as a time, a finished run's ``trainer_state.json`` on such a mount read as written
before the job started and was dropped (the run then judged from its log alone), and its save
at the total no longer vouched for a run whose log stops short."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

from probes.remote.completion import collect_completion
from probes.remote.guard import Guard
from probes.remote.tree import collect_checkpoints
from probes.slurm.assemble import completion_check
from probes.slurm.checkpoints import build_listing
from tests.probes.slurm.test_stale_completion_files import STARTED

STATES = Path(__file__).resolve().parents[2] / "fixtures" / "hf-trainer-state-rebuilt"


def test_an_epoch_mtime_is_no_write_time(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    state = out / "trainer_state.json"
    state.write_bytes((STATES / "trainer_state_finished.json").read_bytes())
    saves = tmp_path / "checkpoints"
    (saves / "global_step_40").mkdir(parents=True)
    (saves / "global_step_20").mkdir()
    for path in (state, saves / "global_step_40"):
        os.utime(path, (0, 0))  # the mount's "unknown": 1970-01-01
    sources = collect_completion(str(tmp_path), "output_dir=out\n")["sources"]
    assert [s.get("mtime") for s in sources] == [None]
    check = completion_check({"sources": sources}, STARTED)
    assert check is not None and check.reached is not None and check.reached.finished
    raw = collect_checkpoints([str(saves)], Guard(os.geteuid(), 5.0), memo=False)
    listing = build_listing(raw["listings"], written=raw.get("written"))
    written = dict(listing.written)
    assert 40 not in written and written[20] > datetime(2000, 1, 1, tzinfo=UTC)
