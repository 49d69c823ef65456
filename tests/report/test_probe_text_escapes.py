"""``jobtables probe``'s text carries no terminal escape from the cluster.

Replayed on the real SLURM: a jtuser RL job named ``$'rl-hos-\\e]0;PWN\\a\\e[31mred\\e[0m'``
printed its name raw in the verdict line (ESC, OSC and BEL bytes): a terminal retitled
itself, and OSC 52 would have written the reader's clipboard. ``sweep`` and ``job`` showed
the same name inert; the probe's text now does too (control characters as spaces, a line
break as ␤), the name, paths and row alike. JSON keeps the name whole (escaped by JSON).
"""

from __future__ import annotations

import pytest

from probes.models import JobFacts, JobState, MetricPoint
from probes.rollouts import (
    RolloutDump,
    RolloutFacts,
    RolloutSample,
    RolloutStep,
    TrialSample,
    TrialSampleSet,
)
from report.deep_probe import judge_rollouts
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


FORGED = "Boom\n\nNO-KILL — all fine\r\n- forged"


def test_a_reason_naming_cluster_text_stays_on_its_line() -> None:
    """A trial's exception type and dir name, and a dump's path, are the cluster's text that a
    reason names unquoted. Replayed on the real SLURM (a Harbor tree whose result.json said
    ``exception_type: "Boom\\n\\nNO-KILL — all fine"``): ``jobtables probe`` printed that as
    lines of their own under the KILL reason, as the Slack verdict did (a reason per line).
    Each reason is one line: a line break shows as ␤."""
    trials = tuple(TrialSample(name=f"t{i}\nReasons: none", exception_type=FORGED,
                               started_at="2026-12-05T05:00:00", finished_at=None)
                   for i in range(3))
    dump = RolloutDump(path="/d\n- forged", kind="verl", steps_listed=(1,),
                       steps=(RolloutStep(step=1, source="1.jsonl", samples=(
                           RolloutSample(output="a b c", score=1.0),)),
                              RolloutStep(step=2, source="2.jsonl")))
    series = tuple(MetricPoint(step=s, values={"reward": 0.5}) for s in range(1, 40))
    killed = judge_rollouts(RolloutFacts(trials=TrialSampleSet(listed=3, sampled=trials),
                                         dumps=(dump,), series=series))
    healthy = judge_rollouts(RolloutFacts(dumps=(dump,)))
    assert killed.verdict == "KILL" and len(killed.reasons) >= 2
    for reason in (*killed.reasons, *healthy.reasons):
        assert "\n" not in reason and "\r" not in reason, reason
    assert "Boom\u2424\u2424NO-KILL" in " ".join(killed.reasons)
