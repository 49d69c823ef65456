"""Fault scanning: every real terminal signal next to its benign near-miss twin.

Lines are rebuilt from the code that prints them (research/formats.md §5-§6) or quoted from
real logs there; hosts, pids and ids are made up.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from textwrap import dedent

import pytest

from probes.logs.clock import read_stamp
from probes.logs.faults import scan_faults, summary_root_cause
from probes.logs.launch_checks import is_internal_url
from probes.logs.parse import parse_log
from probes.models import JobFacts, JobState, LogSummary, SchedulerRecord
from report.failure_text import diagnosis, fault_text


def _lines(text: str) -> list[str]:
    return dedent(text).strip("\n").split("\n")


def _kinds(text: str) -> list[str]:
    return [f.kind for f in scan_faults(_lines(text)).faults]


OOM_LINE = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total "
    "capacity of 79.19 GiB of which 9.00 MiB is free."
)
NCCL_LINE = (
    "[rank1]:[E810 03:04:11.061727749 ProcessGroupNCCL.cpp:683] [Rank 1] Watchdog caught "
    "collective operation timeout: WorkNCCL(SeqNum=78, OpType=BROADCAST, NumelIn=80, "
    "NumelOut=80, Timeout(ms)=600000) ran for 600096 milliseconds before timing out."
)
SHM_CURRENT = (
    "(EngineCore_DP0 pid=336) INFO 12-29 13:12:50 [shm_broadcast.py:542] No available shared "
    "memory broadcast block found in 60 seconds. This typically happens when some processes are "
    "hanging or doing some time-consuming work (e.g. compilation)."
)

SIGNALS = [
    # (id, log text, expected fault kinds)
    ("cuda-oom-torch21", OOM_LINE, ["oom"]),
    (
        "cuda-oom-torch20",
        "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 2 GiB",
        ["oom"],
    ),
    ("cuda-error-oom", "RuntimeError: CUDA error: out of memory", ["oom"]),
    (
        # torchrun's agent sent SIGTERM (scancel, a node fault): its traceback ends so
        # (real log, torch 2.13 replayed on SLURM)
        "torchrun-agent-sigterm",
        """\
        Traceback (most recent call last):
          File "/venv/.../torch/distributed/elastic/multiprocessing/api.py", line 86, in \
        _terminate_process_handler
            raise SignalException(f"Process {os.getpid()} got signal: {sigval}", sigval=sigval)
        torch.distributed.elastic.multiprocessing.api.SignalException: Process 28181 got signal: 15
        """,
        ["sigterm"],
    ),
    (
        "torchrun-agent-sigkill",
        "torch.distributed.elastic.multiprocessing.api.SignalException: Process 4411 got signal: 9",
        ["sigkill"],
    ),
    (
        "slurm-oom-kill",
        "slurmstepd: error: Detected 2 oom_kill events in StepId=123456.batch. "
        "Some of the step tasks have been OOM Killed.",
        ["oom"],
    ),
    (
        # the cgroup wording of older SLURM (Sigma2's and NeSI's job-failure docs quote it)
        "slurm-oom-kill-events-cgroup",
        "slurmstepd: error: Detected 1 oom-kill event(s) in step 997857.batch cgroup. Some of "
        "your processes may have been killed by the cgroup out-of-memory handler.",
        ["oom"],
    ),
    (
        "ray-memory-monitor",
        "(raylet) [2023-04-09 07:23:59,445 E 395 395] (raylet) node_manager.cc:"
        "3049: 10 Workers (tasks / actors) killed due to memory pressure (OOM), 0 Workers crashed "
        "due to other reasons at node (ID: e5d9, IP: 10.0.62.231)",
        ["oom"],
    ),
    ("nccl-watchdog", NCCL_LINE, ["nccl-timeout"]),
    (
        "nccl-dump-signal",
        "[rank0]:[E606 09:09:08.1 ProcessGroupNCCL.cpp:1] Received a dump signal "
        "due to a collective timeout from  rank 1 and we will try our best to dump the debug info.",
        ["nccl-timeout"],
    ),
    ("sigterm-elastic", "    traceback : Signal 15 (SIGTERM) received by PID 4242", ["sigterm"]),
    ("sigterm-exitcode", "    exitcode  : -15 (pid: 4242)", ["sigterm"]),
    (
        "sigterm-slurm",
        "slurmstepd: error: *** JOB 123 ON gpu-001 CANCELLED AT 2024-05-03T10:00:05 "
        "DUE to SIGNAL Terminated ***",
        ["sigterm"],
    ),
    (
        "sigterm-agent",
        "torch.distributed.elastic.agent.server.api: [WARNING] Received "
        "Signals.SIGTERM death signal, shutting down workers",
        ["sigterm"],
    ),
    ("sigkill-elastic", "    traceback : Signal 9 (SIGKILL) received by PID 4242", ["sigkill"]),
    ("sigkill-exitcode", "    exitcode  : -9 (pid: 4242)", ["sigkill"]),
    ("sigkill-bare", "Killed", ["sigkill"]),
    (
        "sigkill-bash",
        "/var/spool/slurmd/job123/slurm_script: line 12: 4242 Killed"
        "                  python train.py",
        ["sigkill"],
    ),
    (
        "actor-died",
        "(TaskRunner pid=1) ray.exceptions.ActorDiedError: The actor died unexpectedly "
        "before finishing this task.",
        ["raylet-died"],
    ),
    (
        "ray-actor-error",
        "ray.exceptions.RayActorError: The actor died unexpectedly before finishing this task.",
        ["raylet-died"],
    ),
    (
        "node-heartbeat",
        "2022-09-02 12:53:00,741 WARNING worker.py:1829 -- The node with node id: "
        "5ad7 and address: 10.0.0.2 has been marked dead because the detector has missed too many "
        "heartbeats from it.",
        ["raylet-died"],
    ),
    (
        "worker-died",
        "(raylet) A worker died or was killed while executing a task by an unexpected "
        "system error. To troubleshoot the problem, check the logs for the dead worker.",
        ["raylet-died"],
    ),
    ("raylet-died-old", "The Raylet died with this message: oops", ["raylet-died"]),
    (
        "grpc-deadline",
        "grpc._channel._InactiveRpcError: status = StatusCode.DEADLINE_EXCEEDED",
        ["rpc-timeout"],
    ),
    ("sampling-timeout", "ERROR sampler: sampling request timed out after 600 s", ["rpc-timeout"]),
    ("rpc-timeout", "RPC timeout after 30s talking to engine 3", ["rpc-timeout"]),
    (
        "asyncio-sampling",
        "asyncio.TimeoutError while waiting for vllm engine generate()",
        ["rpc-timeout"],
    ),
    (
        "time-limit",
        "slurmstepd: error: *** JOB 123456 ON gpu-001 CANCELLED AT 2024-05-03T10:00:05 "
        "DUE TO TIME LIMIT ***",
        ["time-limit"],
    ),
]

NEAR_MISSES = [
    # (id, benign twin, benign_counts key or None when the line is simply not noteworthy)
    (
        "oom-hint",
        "Tip: set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid CUDA OOM",
        None,
    ),
    ("memory-metric", "perf/max_memory_allocated_gb:71.2 - perf/max_memory_reserved_gb:75.0", None),
    (
        "ray-memory-zero",
        "(raylet) 0 Workers (tasks / actors) killed due to memory pressure (OOM)",
        None,
    ),
    ("shm-heartbeat-current", SHM_CURRENT, "shm-broadcast"),
    (
        "shm-heartbeat-early",
        "WARNING 01-26 10:23:53 shm_broadcast.py:501] No available block found in 60 second. ",
        "shm-broadcast",
    ),
    (
        "shm-heartbeat-middle",
        "DEBUG 01-26 10:23:53 shm_broadcast.py:501] No available shared "
        "memory broadcast block found in 60 second.",
        "shm-broadcast",
    ),
    (
        "sigterm-handler",
        "SIGTERM handler is not set because current thread is not the main thread.",
        None,
    ),
    (
        "elastic-closing",
        "W0813 08:21:22 api.py:897] Sending process 1246013 closing signal SIGTERM",
        None,
    ),
    (
        "killed-in-prose",
        "The process is killed by SIGKILL by OOM killer due to high memory usage.",
        None,
    ),
    ("killed-word", "Killed 3 stale tmux sessions", None),
    ("rpc-config", "Setting RPC timeout to 120 s", None),
    ("rpc-config-kw", "rpc_timeout=600 sampling_timeout=300", None),
    (
        "time-limit-scancel",
        "slurmstepd: error: *** JOB 123 ON gpu-001 CANCELLED AT 2024-05-03T10:00:05 ***",
        None,
    ),
    (
        "vllm-context",
        "This model's maximum context length is 32768 tokens. However, your request "
        "has 40000 input tokens. Please reduce the length of the input messages.",
        "context-overflow",
    ),
    (
        "engine-context",
        "Engine rejected request: 40000 input tokens > 32768 max",
        "context-overflow",
    ),
    (
        "decoder-too-long",
        "The decoder prompt (length 12324) is longer than the maximum model length of 8192.",
        "context-overflow",
    ),
    (
        "anthropic-too-long",
        "prompt is too long: 250000 tokens > 200000 maximum",
        "context-overflow",
    ),
    (
        "litellm-window",
        "litellm.ContextWindowExceededError: litellm.BadRequestError: "
        "ContextWindowExceededError: OpenAIException - This model's maximum context length is "
        "262144",
        "context-overflow",
    ),
    (
        "agent-timeout",
        "Trial fix-git__a8Kd3Qz failed: Exception info: AgentTimeoutError: Agent "
        "execution timed out after 1200.0 seconds",
        "agent-timeout",
    ),
    (
        "prob-diff",
        "step:7 - policy/rollout_train_prob_diff_mean:523000000.0 - reward:0.41",
        "prob-diff",
    ),
    (
        "loading-shards",
        "Loading checkpoint shards:  50%|█████     | 2/4 [00:03<00:03,  1.6s/it]",
        "bring-up",
    ),
    ("image-pull", 'Back-off pulling image "registry.local/rl:v3"', "bring-up"),
    ("nccl-init", "gpu-001:1234:1234 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>", "bring-up"),
    (
        "opcount",
        "gpu-001:1234:1300 [0] NCCL INFO AllReduce: opCount 4a1 sendbuff 0x7f",
        "debug-chatter",
    ),
]


@pytest.mark.parametrize(("text", "kinds"), [s[1:] for s in SIGNALS], ids=[s[0] for s in SIGNALS])
def test_signal_lines_are_faults(text: str, kinds: list[str]) -> None:
    """Each real terminal signal is reported with the right kind."""
    assert _kinds(text) == kinds


@pytest.mark.parametrize(
    ("text", "key"), [s[1:] for s in NEAR_MISSES], ids=[s[0] for s in NEAR_MISSES]
)
def test_near_misses_are_not_faults(text: str, key: str | None) -> None:
    """A benign twin of a signal is never a fault, and noise is counted under its key."""
    scan = scan_faults([text])
    assert scan.faults == ()
    if key is not None:
        assert scan.benign_counts.get(key) == 1


def test_fault_excerpt_and_line_number() -> None:
    """A fault names its line (offset by first_line_no) and quotes it without the Ray prefix."""
    scan = scan_faults(
        ["step:1 - loss:1.0", f"(WorkerDict pid=26110) {OOM_LINE}"], first_line_no=500
    )
    (fault,) = scan.faults
    assert fault.line_no == 501
    assert fault.excerpt.startswith("torch.OutOfMemoryError: CUDA out of memory")


def test_shm_heartbeat_with_watchdog_is_nccl_timeout() -> None:
    """The shm heartbeat co-firing with a WorkNCCL timeout is the hang, not noise."""
    scan = scan_faults([SHM_CURRENT, SHM_CURRENT, NCCL_LINE])
    assert [f.kind for f in scan.faults] == ["nccl-timeout"]
    assert "shm-broadcast" not in scan.benign_counts
    assert scan.faults[0].detail is not None and "shared memory" in scan.faults[0].detail


def test_a_co_firing_hang_is_quoted_by_its_own_line_first() -> None:
    """What the Trend and the diagnose recommendation quote of such a hang starts with the
    WorkNCCL timeout, the heartbeat after it (it quoted the heartbeat alone, pointing the
    reader at the ring buffer the rulebook says not to chase)."""
    scan = scan_faults([SHM_CURRENT, SHM_CURRENT, NCCL_LINE])
    (fault,) = scan.faults
    quoted = fault_text(fault)
    # its own line first, the c10 line head left out (report.failure_text._C10_PREFIX)
    assert quoted.startswith("Watchdog caught collective operation timeout: WorkNCCL(")
    assert quoted.index("WorkNCCL") < quoted.index("shared memory")
    facts = JobFacts(record=SchedulerRecord(cluster="c", job_id="1", name="rl",
                                            state=JobState.FAILED))
    facts = facts.model_copy(update={"summary": LogSummary(line_count=3, faults=scan.faults)})
    assert "WorkNCCL" in diagnosis(facts)[:200]


def test_shm_heartbeat_with_sigabrt_is_nccl_timeout() -> None:
    """SIGABRT co-firing with the shm heartbeat counts for the NCCL rule."""
    scan = scan_faults([SHM_CURRENT, "Fatal Python error: Aborted"])
    assert [f.kind for f in scan.faults] == ["nccl-timeout"]
    assert scan.faults[0].line_no == 2


def test_sigabrt_alone_is_not_a_fault() -> None:
    """SIGABRT without an NCCL hang is left to the traceback and elastic rules."""
    assert scan_faults(["Fatal Python error: Aborted"]).faults == ()


def test_shm_heartbeat_alone_is_benign_and_counted() -> None:
    """Re-firing heartbeats alone are counted, never a fault."""
    scan = scan_faults([SHM_CURRENT] * 5)
    assert scan.faults == ()
    assert scan.benign_counts["shm-broadcast"] == 5


PYTHON_TRACEBACK = """\
    Traceback (most recent call last):
      File "/app/train.py", line 10, in <module>
        main()
      File "/app/train.py", line 7, in main
        raise KeyError("labels")
    KeyError: 'labels'
    step:2 - loss:1.0
"""


def test_python_traceback_excerpt_is_final_exception_line() -> None:
    """A traceback is reported at its final ``SomeError: message`` line."""
    scan = scan_faults(_lines(PYTHON_TRACEBACK))
    (fault,) = scan.faults
    assert (fault.kind, fault.line_no, fault.excerpt) == ("traceback", 6, "KeyError: 'labels'")


def test_oom_traceback_is_oom() -> None:
    """A traceback ending in CUDA OOM is reported once, as oom."""
    text = PYTHON_TRACEBACK.replace("KeyError: 'labels'", OOM_LINE)
    assert _kinds(text) == ["oom"]


HARBOR_PASSTHROUGH = """\
    Traceback (most recent call last):
      File "/usr/lib/python3.12/asyncio/tasks.py", line 520, in wait_for
        return await fut
    asyncio.exceptions.CancelledError

    The above exception was the direct cause of the following exception:

    Traceback (most recent call last):
      File "/usr/lib/python3.12/asyncio/tasks.py", line 519, in wait_for
        async with timeouts.timeout(timeout):
    TimeoutError

    The above exception was the direct cause of the following exception:

    Traceback (most recent call last):
      File "/app/harbor/trial/trial.py", line 301, in _run_agent_phase
        raise AgentTimeoutError(
    harbor.trial.errors.AgentTimeoutError: Agent execution timed out after 1200.0 seconds
"""


@pytest.mark.parametrize(
    ("final", "key"),
    [
        (
            "harbor.trial.errors.AgentTimeoutError: Agent execution timed out after 1200.0 seconds",
            "agent-timeout",
        ),
        ("harbor.llms.base.ContextLengthExceededError", "context-overflow"),
        ("litellm.ContextWindowExceededError: litellm.BadRequestError: boom", "context-overflow"),
        ("harbor.llms.base.OutputLengthExceededError: too long", "output-length"),
        (
            "openai.BadRequestError: Error code: 400 - {'message': \"This model's maximum context "
            'length is 32768 tokens."}',
            "context-overflow",
        ),
    ],
)
def test_passthrough_traceback_is_benign(final: str, key: str) -> None:
    """A traceback whose chain ends in a Harbor passthrough exception is never a fault."""
    text = HARBOR_PASSTHROUGH.replace(
        "harbor.trial.errors.AgentTimeoutError: Agent execution timed out after 1200.0 seconds",
        final,
    )
    scan = scan_faults(_lines(text))
    assert scan.faults == ()
    assert scan.benign_counts[key] >= 1


def test_chained_traceback_reports_the_last_exception() -> None:
    """In a chain the exception that propagated (the last one) is the fault."""
    text = HARBOR_PASSTHROUGH.replace(
        "harbor.trial.errors.AgentTimeoutError: Agent execution timed out after 1200.0 seconds",
        "RuntimeError: verifier crashed",
    )
    scan = scan_faults(_lines(text))
    assert [(f.kind, f.excerpt) for f in scan.faults] == [
        ("traceback", "RuntimeError: verifier crashed")
    ]


def test_timeout_error_around_sampling_is_rpc_timeout() -> None:
    """A bare TimeoutError raised in sampling code is an RPC/sampling timeout."""
    text = """\
        Traceback (most recent call last):
          File "/app/skyrl/generators/sampling_client.py", line 88, in sample
            out = await asyncio.wait_for(self.engine.generate(req), 600)
        TimeoutError
    """
    assert _kinds(text) == ["rpc-timeout"]


def test_timeout_error_elsewhere_is_a_traceback() -> None:
    """A bare TimeoutError outside sampling code stays a plain traceback."""
    text = """\
        Traceback (most recent call last):
          File "/app/upload.py", line 8, in push
            s3.put(obj)
        TimeoutError
    """
    assert _kinds(text) == ["traceback"]


def test_interleaved_ray_tracebacks_stay_apart() -> None:
    """Tracebacks from two Ray actors interleaved line by line are both reported whole."""
    text = """\
        (A pid=1) Traceback (most recent call last):
        (B pid=2) Traceback (most recent call last):
        (A pid=1)   File "a.py", line 1, in f
        (B pid=2)   File "b.py", line 1, in g
        (A pid=1) ValueError: from a
        (B pid=2) ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing.
        (B pid=2) 	class_name: WorkerDict
        (A pid=1) step:3 - loss:1.0
    """
    scan = scan_faults(_lines(text))
    assert [(f.kind, f.excerpt) for f in scan.faults] == [
        ("traceback", "ValueError: from a"),
        (
            "raylet-died",
            "ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing.",
        ),
    ]


def test_grpc_status_on_continuation_line_is_rpc_timeout() -> None:
    """grpc prints DEADLINE_EXCEEDED on the line after the exception; both make one fault."""
    lines = [
        "Traceback (most recent call last):",
        '  File "client.py", line 3, in call',
        "grpc._channel._InactiveRpcError: <_InactiveRpcError of RPC that terminated with:",
        "\tstatus = StatusCode.DEADLINE_EXCEEDED",
        '\tdetails = "Deadline Exceeded"',
        ">",
    ]
    scan = scan_faults(lines)
    assert [f.kind for f in scan.faults] == ["rpc-timeout"]
    assert scan.faults[0].excerpt.startswith("grpc._channel._InactiveRpcError")


def test_ray_task_error_reports_the_inner_exception() -> None:
    """A RayTaskError wrapper is skipped in favour of the exception it carries."""
    text = """\
        Traceback (most recent call last):
          File "main.py", line 5, in <module>
            ray.get(ref)
        ray.exceptions.RayTaskError(RuntimeError): ray::WorkerDict.generate() (pid=9, ip=10.0.0.1)
          File "worker.py", line 12, in generate
        RuntimeError: CUDA error: out of memory
    """
    scan = scan_faults(_lines(text))
    assert [(f.kind, f.excerpt) for f in scan.faults] == [
        ("oom", "RuntimeError: CUDA error: out of memory")
    ]


def test_cut_off_traceback_is_still_reported() -> None:
    """A traceback cut off at the end of the tail is still a traceback fault."""
    text = """\
        Traceback (most recent call last):
          File "/app/train.py", line 10, in <module>
    """
    scan = scan_faults(_lines(text))
    assert [f.kind for f in scan.faults] == ["traceback"]
    assert "train.py" in scan.faults[0].excerpt


def test_exception_group_reports_the_sub_exception() -> None:
    """An uncaught ExceptionGroup is reported at its first sub-exception."""
    text = """\
          + Exception Group Traceback (most recent call last):
          |   File "run.py", line 3, in <module>
          | ExceptionGroup: unhandled errors in a TaskGroup (1 sub-exception)
          +-+---------------- 1 ----------------
            | Traceback (most recent call last):
            |   File "run.py", line 9, in job
            | ValueError: bad shard
            +------------------------------------
        done
    """
    assert [f.excerpt for f in scan_faults(_lines(text)).faults] == ["ValueError: bad shard"]


ELASTIC = """\
    [rank0]: Traceback (most recent call last):
    [rank0]:   File "/app/train.py", line 40, in <module>
    [rank0]:     trainer.train()
    [rank0]: RuntimeError: shape mismatch in lm_head: [4096, 151936] vs [4096, 152064]
    [rank1]: Traceback (most recent call last):
    [rank1]:   File "/app/train.py", line 40, in <module>
    [rank1]: RuntimeError: NCCL communicator was aborted on rank 1.
    W0813 08:21:22.980000 1245 torch/distributed/elastic/multiprocessing/api.py:897] Sending process 1246013 closing signal SIGTERM
    E0813 08:21:22.980000 1245 torch/distributed/elastic/multiprocessing/api.py:984] failed (exitcode: 1) local_rank: 0 (pid: 1246012) of binary: /usr/bin/python3
    Traceback (most recent call last):
      File "/usr/bin/torchrun", line 8, in <module>
        sys.exit(main())
      File "/usr/lib/python3/torch/distributed/run.py", line 143, in __call__
        raise ChildFailedError(
    torch.distributed.elastic.multiprocessing.errors.ChildFailedError:<SPACE>
    ============================================================
    train.py FAILED
    ------------------------------------------------------------
    Failures:
      <NO_OTHER_FAILURES>
    ------------------------------------------------------------
    Root Cause (first observed failure):
    [0]:
      time      : 2026-06-08_19:04:45
      host      : gpu-007.cluster
      rank      : 0 (local_rank: 0)
      exitcode  : 1 (pid: 1246012)
      error_file: <N/A>
      traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html
    ============================================================
""".replace("<SPACE>", " ")  # noqa: E501  (torch prints a trailing space here)


def test_child_failed_detail_is_first_real_traceback() -> None:
    """ChildFailedError's detail is the first real traceback above the summary, not the summary."""
    scan = scan_faults(_lines(ELASTIC))
    child = [f for f in scan.faults if f.kind == "child-failed"]
    assert len(child) == 1
    assert child[0].detail == (
        "RuntimeError: shape mismatch in lm_head: [4096, 151936] vs [4096, 152064]"
    )
    assert "To enable traceback" not in str([f.detail for f in scan.faults])
    assert "sigterm" not in [f.kind for f in scan.faults]


def test_child_failed_without_traceback_uses_summary_signal() -> None:
    """With no traceback above it, the summary's signal line is the diagnosis."""
    text = ELASTIC[ELASTIC.index('    Traceback (most recent call last):\n      File "/usr/bin') :]
    text = text.replace("exitcode  : 1 (pid: 1246012)", "exitcode  : -9 (pid: 1246012)")
    text = text.replace(
        "traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html",
        "traceback : Signal 9 (SIGKILL) received by PID 1246012",
    )
    scan = scan_faults(_lines(text))
    child = next(f for f in scan.faults if f.kind == "child-failed")
    assert child.detail == "Signal 9 (SIGKILL) received by PID 1246012"
    assert "sigkill" in [f.kind for f in scan.faults]


TORCH = Path(__file__).resolve().parents[2] / "fixtures" / "torch-2.13.0"


@pytest.mark.parametrize("name", ["childfailed.out", "childfailed_record.out"])
def test_real_child_failed_is_diagnosed_by_first_traceback(name: str) -> None:
    """Real torchrun output: detail is rank 1's error; agent-stopped ranks add no SIGTERM."""
    lines = (TORCH / name).read_text().split("\n")
    scan = scan_faults(lines)
    child = [f for f in scan.faults if f.kind == "child-failed"]
    assert [f.detail for f in child] == [
        "RuntimeError: shard 7 is corrupt: expected 4096 rows, got 0"
    ]
    assert "sigterm" not in [f.kind for f in scan.faults]
    assert scan.benign_counts["elastic-sibling"] >= 1


def test_real_record_summary_alone_still_names_root_cause() -> None:
    """With only the summary in the tail, the @record Root Cause traceback is the diagnosis."""
    lines = (TORCH / "childfailed_record.out").read_text().split("\n")
    start = next(i for i, t in enumerate(lines) if "ChildFailedError:" in t)
    (child,) = [f for f in scan_faults(lines[start:]).faults if f.kind == "child-failed"]
    assert child.detail == "RuntimeError: shard 7 is corrupt: expected 4096 rows, got 0"


def test_root_cause_signal_is_kept() -> None:
    """A signal in the Root Cause block (not a stopped sibling) is still reported."""
    summary = [
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
        "=" * 60,
        "Failures:",
        "  exitcode  : -15 (pid: 1)",
        "-" * 60,
        "Root Cause (first observed failure):",
        "[0]:",
        "  exitcode  : -9 (pid: 2)",
        "  traceback : Signal 9 (SIGKILL) received by PID 2",
        "=" * 60,
    ]
    kinds = [f.kind for f in scan_faults(summary).faults]
    assert kinds == ["child-failed", "sigkill", "sigkill"]


def test_summary_root_cause_falls_back_to_exit_code() -> None:
    """A summary that only says 'To enable traceback' yields the exit code, not that hint."""
    summary = [
        "=" * 60,
        "train.py FAILED",
        "-" * 60,
        "Root Cause (first observed failure):",
        "[0]:",
        "exitcode  : 1 (pid: 5)",
        "traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html",
        "=" * 60,
    ]
    assert summary_root_cause(summary) == "exitcode 1"


def test_summary_root_cause_reads_recorded_traceback() -> None:
    """With ``@record`` the summary carries the child's traceback; its last exception wins."""
    summary = [
        "Root Cause (first observed failure):",
        "[0]:",
        "exitcode  : 1 (pid: 5)",
        "traceback : Traceback (most recent call last):",
        'File "train.py", line 3, in <module>',
        "main()",
        "ValueError: bad config",
        "=" * 60,
    ]
    assert summary_root_cause(summary) == "ValueError: bad config"


def test_benign_patterns_suppress_faults() -> None:
    """A line matching a cluster's benign pattern is never a fault, traceback or not."""
    text = PYTHON_TRACEBACK + "    Killed\n"
    scan = scan_faults(_lines(text), benign_patterns=[r"KeyError: 'labels'", r"^Killed$"])
    assert scan.faults == ()
    assert scan.benign_counts["cluster-pattern"] == 2


def test_invalid_benign_pattern_is_taken_literally() -> None:
    """A benign pattern that is not a valid regex matches as literal text instead of raising."""
    scan = scan_faults(["Killed (["], benign_patterns=["Killed (["])
    assert scan.benign_counts == {"cluster-pattern": 1}


def test_huge_lines_are_scanned_without_error() -> None:
    """A 1 MB line is scanned (on its head) and a signal at its start is still found."""
    huge = OOM_LINE + " x" * 500_000
    scan = scan_faults([huge, "y" * 1_000_000, "Killed"])
    assert [f.kind for f in scan.faults] == ["oom", "sigkill"]
    assert len(scan.faults[0].excerpt) <= 400


def test_bring_up_only_tail() -> None:
    """A tail of bring-up lines and nothing else is bring-up."""
    text = """\
        Waiting for gang admission of 4 nodes
        Pulling image "registry.local/rl:v3"
        Loading checkpoint shards: 100%|██████████| 4/4 [00:10<00:00,  2.5s/it]
    """
    scan = scan_faults(_lines(text))
    assert scan.bring_up is True
    assert scan.benign_counts["bring-up"] == 3


def test_bring_up_with_fault_is_not_bring_up() -> None:
    """A bring-up tail that also holds a fault is not buffer-filling."""
    scan = scan_faults(["Loading checkpoint shards: 1/4", OOM_LINE])
    assert scan.bring_up is False


def test_fault_count_is_bounded() -> None:
    """A flood of signal lines keeps only the most recent hundred faults."""
    scan = scan_faults(["Killed"] * 1000)
    assert len(scan.faults) == 100
    assert scan.faults[-1].line_no == 1000


INFRA = """\
    2026-11-30T15:00:01Z INF Registered tunnel connection connIndex=0 location=sjc07
    Sandbox config: {"api_base": "http://10.0.3.7:8000/v1", "model": "q"}
    (APIServer pid=1) INFO 11-30 15:01:00 [loggers.py:123] Engine 000: Avg prompt throughput: 12.0 tokens/s, Running: 7 reqs, Waiting: 0 reqs
    2026-11-30 15:01:02,100 INFO:     10.0.0.5:43210 - "POST /v1/chat/completions HTTP/1.1" 200 OK
    2026-11-30 15:02:03,200 INFO:     10.0.0.5:43211 - "POST /v1/chat/completions HTTP/1.1" 200 OK
    INFO:     10.0.0.5:43212 - "POST /v1/chat/completions HTTP/1.1" 500 Internal Server Error
    daytona: sandbox create failed: 401 Unauthorized
    daytona: sandbox create failed: 401 Unauthorized
"""  # noqa: E501


def test_infra_signals_from_eval_log() -> None:
    """Tunnel, api_base, engine 200s, running requests and auth failures are read."""
    infra = scan_faults(_lines(INFRA)).infra
    assert infra.tunnel_ok is True
    assert infra.api_base == "http://10.0.3.7:8000/v1"
    assert infra.api_base_internal is True
    assert infra.engine_ok_requests == 2
    assert infra.last_engine_ok_at == datetime(2026, 11, 30, 15, 2, 3, 200000, tzinfo=UTC)
    assert infra.engine_running_requests == 7
    assert infra.auth_failures == 2


def test_infra_is_unknown_when_log_says_nothing() -> None:
    """A log with no launch lines leaves every check unknown."""
    infra = scan_faults(["step:1 - loss:1.0"]).infra
    assert (infra.tunnel_ok, infra.api_base, infra.engine_ok_requests) == (None, None, None)
    assert infra.auth_failures == 0


@pytest.mark.parametrize(
    ("lines", "expected"),
    [
        (["2026-01-01T00:00:00Z INF Registered tunnel connection connIndex=0"], True),
        (['t=2026 lvl=info msg="started tunnel" obj=tunnels name=command_line'], True),
        (["tunnel to sandbox established"], True),
        (["cloudflared: tunnel error: failed to dial edge"], False),
        (["ERR_NGROK_108: your account is limited"], False),
        (["tunnel not ready, retrying", "tunnel connected"], True),
        (["tunnel connected", "tunnel connection lost"], False),
        (["2026-01-01T00:00:00Z INF Unregistered tunnel connection connIndex=0"], None),
    ],
)
def test_tunnel_state_is_latest_event(lines: list[str], expected: bool | None) -> None:
    """The latest tunnel event decides the tunnel check."""
    assert scan_faults(lines).infra.tunnel_ok is expected


@pytest.mark.parametrize(
    ("url", "internal"),
    [
        ("http://10.0.3.7:8000/v1", True),
        ("http://172.20.1.1/v1", True),
        ("http://192.168.1.4:8000", True),
        ("http://127.0.0.1:8000/v1", True),
        ("http://localhost:8000/v1", True),
        ("http://vllm.ml.svc.cluster.local:8000/v1", True),
        ("http://gpu-node-12:8000/v1", True),
        ("https://abc-def.trycloudflare.com/v1", False),
        ("https://8.8.8.8/v1", False),
        ("http://172.32.0.1/v1", False),
        ("not a url", None),
    ],
)
def test_api_base_internal(url: str, internal: bool | None) -> None:
    """Private, loopback and cluster-local hosts are internal; public hosts are not."""
    assert is_internal_url(url) is internal


@pytest.mark.parametrize(
    ("line", "api_base"),
    [
        ("api_base=https://x.trycloudflare.com/v1 model=q", "https://x.trycloudflare.com/v1"),
        ("export OPENAI_BASE_URL='http://127.0.0.1:8000/v1'", "http://127.0.0.1:8000/v1"),
        ("agent kwargs: {'api_base': None}", None),
    ],
)
def test_api_base_forms(line: str, api_base: str | None) -> None:
    """api_base is read from key=value, JSON and environment forms; None is ignored."""
    assert scan_faults([line]).infra.api_base == api_base


def test_line_timestamp_forms() -> None:
    """ISO timestamps with Z, offsets, commas or no zone all come back zone-aware in UTC."""
    assert read_stamp("2026-11-30T15:00:01Z x") == datetime(2026, 11, 30, 15, 0, 1, tzinfo=UTC)
    assert read_stamp("2026-11-30 16:00:01,5+0100 x") == datetime(
        2026, 11, 30, 15, 0, 1, 500000, tzinfo=UTC
    )
    assert read_stamp("2026-11-30T15:00:01.25 naive") == datetime(
        2026, 11, 30, 15, 0, 1, 250000, tzinfo=UTC
    )
    assert read_stamp("no time here") is None


def test_traceback_glued_to_a_training_bar_redraw_is_the_first_real_one() -> None:
    """Real TRL SFT under torchrun: rank 1's ``[rank1]: Traceback`` is written right after the
    training bar's redraw (no newline), so it opens on the bar's line. It is still the first real
    traceback the ChildFailedError quotes, not rank 0's gloo "Connection closed by peer"."""
    text = (TORCH.parent / "trl-1.16.0" / "ddp_childfailed_glued.out").read_text()
    summary = parse_log(text)
    (child,) = [f for f in summary.faults if f.kind == "child-failed"]
    assert child.detail == (
        "RuntimeError: DataLoader worker (pid 4123) is killed by signal: Bus error. It is "
        "possible that dataloader's workers are out of shared memory.")
    first = min((f for f in summary.faults if f.kind == "traceback"), key=lambda f: f.line_no)
    assert first.excerpt.startswith("RuntimeError: DataLoader worker (pid 4123)")
