"""Feed a run of a tail's lines to ``MetricScan``: the cold pass over the read-back suffix
(``probes.logs.recent``) and a fold's increment (``probes.logs.incremental``).

Policy: the result is ``MetricScan.feed`` of every non-blank line in order. The shapes a trainer
prints every step take a short way (a bar line that is its own body, a one-line dict), and a
line whose feeding provably changes nothing is not fed: a dict opener the next line replaces
(``superseded_openers``). What is judged of every line is judged in C or once per distinct
line, so a tail of a million such lines costs about what its split costs.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator, Sequence
from itertools import compress, repeat
from operator import and_, not_

from probes.logs.bar_lines import own_bars
from probes.logs.history import MetricScan
from probes.logs.lines import NESTED_BAR_MARK

__all__ = ["feed_lines", "superseded_openers"]


def feed_lines(scan: MetricScan, raws: Sequence[str], lines: Sequence[str],
               indices: Sequence[int], first_line_no: int) -> None:
    """``scan.feed`` of each non-blank line at ``indices``, but the two shapes a trainer
    prints every step take a short way: a bar line that is its own body (its groups read by
    one regex pass over them all, ``feed_bar``) and a one-line dict (``feed_dict``). The
    cold pass over a suffix and a fold's increment (``probes.logs.incremental``) both feed
    this way; a bar's ``last`` waits for ``MetricScan.settle``. A dict opener the next line
    replaces (``superseded_openers``) is fed only while an EasyR1 block or a panel is open."""
    texts = list(map(lines.__getitem__, indices))
    found = own_bars(texts)
    passed = superseded_openers(texts)
    for at in range(len(texts)) if passed is None else _unpassed(scan, passed):
        index, groups = indices[at], found[at]
        line = lines[index]
        if scan.panel is not None or scan.yaml_step is not None:
            # An open panel or EasyR1 block is offered each line first (``feed``): the short
            # ways would pass a line that ends it ('{x}' after a panel's top border).
            if line.strip():
                scan.feed(line, raws[index], first_line_no + index)
        elif groups[1]:
            scan.feed_bar(line, groups, NESTED_BAR_MARK in raws[index], first_line_no + index)
            if "}" in line or "Step " in line or "step:" in line:  # a dict (torchtune's or
                # verl's step line) printed on the bar's line
                scan.feed_glued(line, first_line_no + index)
            if "` stopped: `" in line:  # Lightning's finish after its bar's last redraw
                scan.finish_marks(line)
        elif line[:1] == "{" and line.rstrip()[-1:] == "}":
            scan.feed_dict(line, first_line_no + index)
        elif line.strip():
            scan.feed(line, raws[index], first_line_no + index)


def _unpassed(scan: MetricScan, passed: list[bool]) -> Iterator[int]:
    """The positions to feed, lazily (asked after each line is fed): every one not
    ``passed``, and a passed one only while ``scan`` reads an EasyR1 block or a panel; once
    neither is open, stepping over one leaves it so, and the rest of the run is stepped over."""
    before = -1
    for at in compress(range(len(passed)), map(not_, passed)):
        for skipped in range(before + 1, at):
            if scan.yaml_step is None and scan.panel is None:
                break
            yield skipped
        yield at
        before = at


def superseded_openers(texts: Sequence[str]) -> list[bool] | None:
    """Per line, whether it opens a multi-line dict and the next non-blank line opens one too
    (None: no line opens one). ``feed`` takes such a line (led by ``{``, so no stamp or Ray
    prefix; not ending in ``}``, nor in a bracketed header's ``]``, ``]:``) only as
    ``_start_dict``, which sets the open dict and its line number, both set again by the next
    opener: feeding it changes nothing, unless an EasyR1 block or a ``Metrics`` panel is open
    (``feed`` offers them every line first; ``feed_lines`` asks). Each distinct line
    is judged once: a MiB of ``{`` lines cost 0.9 s fed one by one."""
    kinds = dict.fromkeys(texts, False)
    for text in compress(kinds, map(str.startswith, map(str.lstrip, kinds), repeat("{"))):
        kinds[text] = not text.rstrip().endswith(("}", "]", ":"))
    if True not in kinds.values():
        return None
    opens = list(map(kinds.__getitem__, texts))
    passed = [False] * len(texts)
    filled = list(compress(range(len(texts)), texts))  # ("" is not fed; "  " breaks a run)
    chain = list(map(opens.__getitem__, filled))
    deque(map(passed.__setitem__, compress(filled, map(and_, chain, chain[1:])), repeat(True)),
          maxlen=0)
    return passed
