"""A torch NCCL watchdog line's c10 head is left out of the Trend, in every torch's form.

Replayed on the real SLURM (a verl run that died on an NCCL watchdog timeout), the row's Trend
read ``nccl-timeout: [E810 03:04:…1727749 Proces…cpp:683] [Rank 1]…``: the head of the line,
never the timeout. torch's own c10 logger (no glog) prints ``[E810 03:04:11.061727749
ProcessGroupNCCL.cpp:683]`` (month unpadded, no thread id: real logs of torch 2.4-2.6, behind
the ``[rank1]:`` rank prefix) and ``[E ProcessGroupNCCL.cpp:577]`` (about 2.2); only glog's
``E0810 03:04:11.061727 2211 file.cpp:683]`` form, with a thread id, was left out.
"""

from __future__ import annotations

import pytest

from probes.logs.parse import parse_log
from report.failure_text import fault_text

_TAIL = ("Watchdog caught collective operation timeout: WorkNCCL(SeqNum=78, OpType=BROADCAST, "
         "NumelIn=80, NumelOut=80, Timeout(ms)=600000) ran for 600096 milliseconds before "
         "timing out.")


@pytest.mark.parametrize("head", [
    "[rank1]:[E810 03:04:11.061727749 ProcessGroupNCCL.cpp:683] [Rank 1] ",
    "[rank7]:[E ProcessGroupNCCL.cpp:577] [Rank 7] ",
    "[rank0]:[E606 09:09:08.169193939 ProcessGroupNCCL.cpp:2395] [PG ID 0 PG GUID 0(default_pg) "
    "Rank 0] ",
    "[E1203 10:16:10.512345 2211 ProcessGroupNCCL.cpp:632] [Rank 3] ",
])
def test_the_trend_quotes_the_timeout_not_the_line_head(head: str) -> None:
    faults = parse_log(head + _TAIL + "\n").faults
    assert faults and faults[0].kind == "nccl-timeout"
    assert fault_text(faults[0]) == _TAIL
