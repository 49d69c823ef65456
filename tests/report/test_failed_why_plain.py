"""A genuine failure's recommendation says what happened, then what to do, in plain words.

Its ``why`` had read ``dated agent_logs/ entry: oom: torch.OutOfMemoryError: ...``: the
rulebook's 'diagnose + dated agent_logs/ entry' pasted ahead of the failure, so the sweep
thread's failure line read 'failed: dated agent_logs/ entry: oom: ...' and the owner's DM
'Recommendation: diagnose — dated agent_logs/ entry: ...'. The action stays ``diagnose``
(CONTRACT section 3); its why now starts with the failure and ends with the two steps.
"""

from __future__ import annotations

from datetime import timedelta

from probes.logs.parse import parse_log
from probes.models import JobFacts, JobState
from report.failure_text import FAILED_NEXT
from tests.report.factories import NOW, judge, log, record

OOM = ("Traceback (most recent call last):\n  File \"/opt/verl/verl/trainer/main_ppo.py\", "
       "line 42, in main\n    run_ppo(config)\ntorch.OutOfMemoryError: CUDA out of memory. "
       "Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.10 GiB of which 1.02 GiB "
       "is free.\n")


def test_a_failure_s_why_says_what_happened_then_what_to_do() -> None:
    steps = "".join(f"step:{s} - actor/entropy:0.5 - actor/grad_norm:0.2 - "
                    f"critic/score/mean:0.4\n" for s in range(1, 9))
    rec = record("rl-grpo-llama-70b", "4103", JobState.FAILED, exit_code=1, elapsed_s=400,
                 submit_time=NOW - timedelta(minutes=9), start_time=NOW - timedelta(minutes=8))
    text = steps + OOM
    report = judge(JobFacts(record=rec, log=log(text=text), summary=parse_log(text))).report
    assert report.recommendation is not None
    assert report.recommendation.action == "diagnose"
    why = report.recommendation.why
    assert why.startswith("oom: torch.OutOfMemoryError: CUDA out of memory"), why
    assert why.endswith(FAILED_NEXT) and "dated agent_logs/ entry:" not in why
    assert FAILED_NEXT == ("; find the cause before resubmitting, and record it in a dated "
                           "incident note")
