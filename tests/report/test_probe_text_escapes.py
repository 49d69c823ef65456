"""``jobtables probe``'s text carries no terminal escape from the cluster.

Replayed on the real SLURM: a jtuser RL job named ``$'rl-hos-\\e]0;PWN\\a\\e[31mred\\e[0m'``
printed its name raw in the verdict line (ESC, OSC and BEL bytes): a terminal retitled
itself, and OSC 52 would have written the reader's clipboard. ``sweep`` and ``job`` showed
the same name inert; the probe's text now does too (control characters as spaces, a line
break as ␤), the name, paths and row alike. JSON keeps the name whole (escaped by JSON).
"""

from __future__ import annotations

import pytest

from probes.models import JobFacts, JobState
from report.models import DeepProbe
from report.probe_text import render_probe_text
from tests.report.factories import judge, record

HOSTILE = "rl-x\x1b]0;PWN\x07\x1b[31mred\x1b]52;c;cHdu\x07\nrl-forged"


@pytest.mark.parametrize("probed", [True, False], ids=["probed", "not-rl"])
def test_no_control_character_reaches_the_terminal(probed: bool) -> None:
    name = HOSTILE if probed else HOSTILE.replace("rl-", "sft-")
    detail = judge(JobFacts(record=record(name, "7", JobState.RUNNING)))
    if probed:
        probe = DeepProbe(verdict="NO-KILL", reasons=["nothing to judge \x1b[2J"],
                          read={"log": "/l/\x1b]0;x\x07.out", "skipped": ["a\x1bb"],
                                "files_opened": 1, "bytes_read": 1, "elapsed_s": 0.1})
        detail = detail.model_copy(update={"report": detail.report.model_copy(
            update={"deep_probe": probe})})
    text = render_probe_text(detail)
    assert not [ch for ch in text if ch != "\n" and not ch.isprintable()]
    assert "\u2424" in text.splitlines()[0]  # the name's line break, shown, not broken
