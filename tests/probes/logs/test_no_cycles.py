"""A parse leaves no reference cycle: its garbage is freed at once by reference counting.

The bot freezes a sweep's objects out of full collections while its result is held
(``bot.gcquiet``); a cycle per log (a fault scanner holding its tracebacks' bound methods,
and through them every line of the tail) then stayed alive as long as the result did,
doubling the memory a sweep keeps (bench_memory: 163 KB a job against 83 KB).
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from probes.logs.incremental import parse_increment
from probes.logs.parse import parse_log

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"

CRASH = (
    "step 1 loss 0.5\n"
    "Traceback (most recent call last):\n"
    '  File "train.py", line 3, in <module>\n'
    "    main()\n"
    "RuntimeError: CUDA error: an illegal memory access was encountered\n"
    "(RayWorker pid=7) Traceback (most recent call last):\n"
    '(RayWorker pid=7)   File "w.py", line 9, in run\n'
)


def _texts() -> Iterator[str]:
    yield CRASH
    logs = sorted(p for p in FIXTURES.rglob("*") if p.suffix in {".log", ".out", ".txt"})
    assert logs, "no fixture logs found"
    for path in logs[:40]:
        yield path.read_text("utf-8", "replace")


def _garbage_cycles(make: Callable[[], object]) -> int:
    was = gc.isenabled()
    gc.disable()
    # Everything alive now (the whole session's heap) out of the collections' scan: they
    # count only what ``make`` left unreachable, and cost that, not the session's size.
    gc.freeze()
    try:
        make()  # caches warmed: only the next call's garbage is counted
        gc.collect()
        kept = make()
        found = gc.collect()
    finally:
        gc.unfreeze()
        if was:
            gc.enable()
    assert kept is not None
    return found


@pytest.mark.parametrize("how", ["parse_log", "first fold", "fold in two"])
def test_a_parse_leaves_no_reference_cycle(how: str) -> None:
    for text in _texts():
        data = text.encode()
        if how == "parse_log":
            found = _garbage_cycles(lambda t=text: parse_log(t))  # type: ignore[misc]
        elif how == "first fold":
            found = _garbage_cycles(lambda d=data: parse_increment(None, d))  # type: ignore[misc]
        else:
            half = len(data) // 2
            carry = parse_increment(None, data[:half])[1]
            found = _garbage_cycles(
                lambda c=carry, d=data[half:]: parse_increment(c, d))  # type: ignore[misc]
        assert found == 0, f"{how} left {found} objects in reference cycles"
