"""The deep-probe reader reads under the collector's guard (one implementation of the rules)."""

from __future__ import annotations

import json
from pathlib import Path

from probes.remote import rollouts
from probes.remote.guard import Guard
from probes.remote.rollouts import collect_rollouts
from probes.remote.script import build_rollouts_script


def _dump(tmp: Path) -> Path:
    dump = tmp / "rollout_data"
    dump.mkdir()
    (dump / "1.jsonl").write_text(json.dumps({"input": "q", "output": "mine", "score": 1}) + "\n")
    return dump


def test_the_reader_uses_the_guard_class() -> None:
    """The reader's budget holds a ``guard.Guard``: no second owner/O_NOFOLLOW implementation."""
    budget = rollouts._Budget({})
    assert isinstance(budget.guard, Guard)
    assert not hasattr(rollouts, "_OPEN_FLAGS") and not hasattr(rollouts, "_uid")


def test_proc_sys_dev_are_refused() -> None:
    """A dump dir under /proc (which a job's user could name) is refused, never listed."""
    answer = collect_rollouts({"dump_dirs": ["/proc/self", "/sys/kernel", "/dev"]})
    assert answer["dumps"] == []
    assert sum("under /proc, /sys or /dev" in s for s in answer["skipped"]) == 3


def test_an_owner_unknown_here_reads_nothing(tmp_path: Path) -> None:
    """An owner with no account on the node reads nothing (it used to skip the owner check)."""
    dump = _dump(tmp_path)
    answer = collect_rollouts({"dump_dirs": [str(dump)], "owner": "no-such-user-jt"})
    assert "mine" not in json.dumps(answer["dumps"])
    assert any("unknown on this host" in s for s in answer["skipped"])


def test_shipped_script_carries_the_guard(tmp_path: Path) -> None:
    """The ``python3 -`` script holds guard's source once, and its import line is gone."""
    script = build_rollouts_script({"dump_dirs": [str(_dump(tmp_path))]})
    assert script.count("class Guard:") == 1
    assert "from probes.remote.guard import" not in script
