"""Text a container writes itself, read from the API (its termination message): terminal
escapes are stripped as a log line's are (``probes.logs.lines.strip_ansi``).

Replayed against the API stand-in: a Job whose pods ended writing ``ESC]0;PWN BEL ESC[31mred
ESC[0m ...`` to /dev/termination-log read in the Trend and the diagnose
'RECURRING (3 attempts: Error, exit 1): ]0;PWN [31mred [0m ...' (the escapes made inert,
their bodies kept), while the log excerpt under it read 'red ...'.
"""

from __future__ import annotations

from datetime import timedelta

from probes.kubernetes.probe import KubernetesProbe
from tests.probes.kubernetes.builders import NOW, make_job, make_pod
from tests.probes.kubernetes.standin import KubeStandIn
from tests.report.factories import judge

HOSTILE = "\x1b]0;PWN\x07\x1b[31mCUDA error: out of memory\x1b[0m <!channel>\r\nat step 7"


async def test_a_termination_messages_escapes_are_stripped(standin: KubeStandIn,
                                                           probe: KubernetesProbe) -> None:
    """The Trend and the diagnose quote the message's words, none of its escapes."""
    standin.jobs["sft-msg"] = make_job("sft-msg", failed=3, finished=NOW,
                                       conditions=(("Failed", "BackoffLimitExceeded"),))
    for i in range(3):
        pod = make_pod(f"sft-msg-{i}", "sft-msg", phase="Failed", state="terminated",
                       reason="Error", created=NOW - timedelta(minutes=10 - i))
        pod.status.container_statuses[0].state.terminated.message = HOSTILE
        standin.pods[f"sft-msg-{i}"] = pod
        standin.logs[f"sft-msg-{i}"] = "starting\n"
    [job] = (await probe.collect()).jobs
    report = judge(job).report
    assert report.recommendation is not None
    for said in (report.trend, report.recommendation.why):
        assert "CUDA error: out of memory <!channel> at step 7" in said or (
            said.endswith("…") and "CUDA error" in said), said
        assert "PWN" not in said and "[31m" not in said and "\x1b" not in said, said
