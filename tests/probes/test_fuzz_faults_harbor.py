"""Property tests: the fault scanner and the Harbor reducers never raise on hostile input."""

from __future__ import annotations

import json
import math
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from probes.logs import fault_patterns
from probes.harbor import build_trial_tree, summarize_trials, trial_from_reduced
from probes.logs.faults import scan_faults
from probes.remote.harbor_reduce import reduce_job, reduce_trial
from probes.slurm.checkpoints import build_listing, expand_roots, steps_from_names

FIXTURE = (
    Path(__file__).resolve().parents[1]
    / "fixtures/harbor-0.26.0/jobs/2026-11-30__10-00-00/crack-7z-hash__LL53Qp2/result.json"
)
FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Fragments of real signals and their near-misses, so random lines hit the interesting paths.
FRAGMENTS = [
    "Traceback (most recent call last):",
    '  File "x.py", line 1, in f',
    "ValueError: boom",
    "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
    "Root Cause (first observed failure):",
    "  traceback : Signal 9 (SIGKILL) received by PID 1",
    "=" * 60,
    "During handling of the above exception, another exception occurred:",
    "  + Exception Group Traceback (most recent call last):",
    "  | ValueError: inner",
    "No available shared memory broadcast block found in 60 seconds.",
    "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1)",
    "Fatal Python error: Aborted",
    "Killed",
    "(TaskRunner pid=1) ",
    "[rank0]: ",
    "ray.exceptions.RayTaskError(RuntimeError): ray::x()",
    "harbor.trial.errors.AgentTimeoutError: Agent execution timed out after 1 seconds",
    '"POST /v1/chat/completions HTTP/1.1" 200 OK',
    "api_base=http://10.0.0.1:8000/v1",
    "2026-11-30T15:00:01Z INF Registered tunnel connection",
    "Running: 3 reqs",
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2 MiB",
    "slurmstepd: error: Detected 1 oom_kill event in StepId=1.batch.",
    "(raylet) 3 Workers (tasks / actors) killed due to memory pressure (OOM)",
    "ray.exceptions.ActorDiedError: The actor died unexpectedly",
    "node x has been marked dead because the detector has missed too many heartbeats",
    "status = StatusCode.DEADLINE_EXCEEDED",
    "sampling request timed out",
    "RPC timeout after 3s",
    "*** JOB 1 ON n CANCELLED AT 2024-05-03T10:00:05 DUE TO TIME LIMIT ***",
    "*** JOB 1 ON n CANCELLED AT 2024-05-03T10:00:05 DUE to SIGNAL Terminated ***",
    "  exitcode  : -9 (pid: 1)",
    "Received Signals.SIGTERM death signal",
    "asyncio.TimeoutError in vllm engine",
    "This model's maximum context length is 4096 tokens.",
    "policy/rollout_train_prob_diff_mean:5e9",
    "NCCL INFO AllReduce: opCount 4a1",
    "Loading checkpoint shards: 1/4",
    "Waiting for gang admission",
    "\t",
    "",
]
line = st.one_of(
    st.text(max_size=200),
    st.sampled_from(FRAGMENTS),
    st.builds(lambda a, b: a + b, st.sampled_from(FRAGMENTS), st.text(max_size=40)),
)


@FAST
@given(st.lists(line, max_size=60), st.lists(st.text(max_size=20), max_size=3))
def test_scan_faults_never_raises(lines: list[str], patterns: list[str]) -> None:
    """Any lines and any (even invalid) benign patterns scan without raising."""
    scan = scan_faults(lines, benign_patterns=patterns, first_line_no=7)
    assert all(7 <= f.line_no < 7 + max(len(lines), 1) for f in scan.faults)
    assert all(len(f.excerpt) <= 400 for f in scan.faults)


ascii_line = st.one_of(
    st.text(st.characters(min_codepoint=32, max_codepoint=126), max_size=80),
    st.builds(
        lambda a, b, c: a + b + c,
        st.text(st.characters(min_codepoint=32, max_codepoint=126), max_size=20),
        st.sampled_from(FRAGMENTS),
        st.text(st.characters(min_codepoint=32, max_codepoint=126), max_size=20),
    ),
)
SIGNALS = [v for v in vars(fault_patterns).values() if isinstance(v, fault_patterns.Signal)] + [
    sig for table in (fault_patterns._BENIGN, fault_patterns._RULES) for _, sig in table
]


@settings(max_examples=300, deadline=None)
@given(ascii_line)
def test_needle_gate_never_changes_a_match(text: str) -> None:
    """Every regex match holds one of its needles, so gating on needles changes nothing."""
    low = text.lower()
    for signal in SIGNALS:
        matched = signal.pattern.search(text) is not None
        assert (signal.search(text, low) is not None) == matched, signal.pattern.pattern
        assert not matched or fault_patterns.may_signal(low)


@FAST
@given(st.binary(max_size=2000))
def test_scan_faults_on_decoded_random_bytes(data: bytes) -> None:
    """Random bytes decoded with replacement characters, split on \\n and \\r, scan cleanly."""
    text = data.decode("utf-8", errors="replace")
    lines = text.replace("\r", "\n").split("\n")
    assert scan_faults(lines).benign_counts is not None


@settings(max_examples=5, deadline=None)
@given(st.sampled_from(FRAGMENTS), st.sampled_from(["x", "é", "\x00", " "]))
def test_scan_faults_megabyte_lines(fragment: str, filler: str) -> None:
    """Lines of a megabyte, with or without a signal at their head, are handled."""
    scan = scan_faults([fragment + filler * 1_000_000, filler * 1_000_000])
    assert len(scan.faults) <= 2


@FAST
@given(st.binary(max_size=3000))
def test_reducers_never_raise_on_bytes(data: bytes) -> None:
    """Random bytes reduce to a dict or None, never an exception."""
    for reduced in (reduce_trial(data), reduce_job(data)):
        assert reduced is None or isinstance(reduced, dict)


@FAST
@given(st.integers(min_value=0, max_value=FIXTURE.stat().st_size))
def test_truncated_real_result_is_none_or_complete(cut: int) -> None:
    """A real trial result.json cut anywhere is either rejected or (when whole) read."""
    raw = FIXTURE.read_bytes()
    reduced = reduce_trial(raw[:cut])
    if cut < len(raw.rstrip()):
        assert reduced is None
    else:
        assert reduced is not None and reduced["reward"] == 1.0


json_value = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=15), inner, max_size=4)
    ),
    max_leaves=30,
)
harbor_keys = st.sampled_from(
    [
        "verifier_result",
        "rewards",
        "reward",
        "agent_result",
        "metadata",
        "n_episodes",
        "n_output_tokens",
        "exception_info",
        "exception_type",
        "started_at",
        "finished_at",
        "step_results",
        "stats",
        "evals",
        "metrics",
        "mean",
        "n_total_trials",
        "n_trials",
    ]
)
harbor_shaped = st.recursive(
    json_value,
    lambda inner: st.dictionaries(harbor_keys, inner, max_size=6),
    max_leaves=40,
)


@FAST
@given(harbor_shaped)
def test_reducers_and_models_accept_any_json(value: object) -> None:
    """Any JSON, NaN and infinities included, reduces and builds a tree without raising."""
    raw = json.dumps(value)
    trial = reduce_trial(raw)
    job = reduce_job(raw)
    trials = {"t": trial} if trial is not None else {}
    tree = build_trial_tree("/r", trials, job=job)
    stats = summarize_trials(tree)
    assert stats.mean_reward is None or math.isfinite(stats.mean_reward)


@FAST
@given(
    st.dictionaries(
        st.sampled_from(
            [
                "reward",
                "n_turns",
                "n_output_tokens",
                "started_at",
                "finished_at",
                "exception_type",
                "mtime",
            ]
        ),
        json_value,
    )
)
def test_trial_from_reduced_accepts_wrong_types(reduced: dict[str, object]) -> None:
    """A tampered reduced dict (e.g. from a replay directory) still becomes a TrialResult."""
    assert trial_from_reduced("t", reduced).name == "t"
    assert build_trial_tree("/r", {"t": reduced}).trials[0].name == "t"


@FAST
@given(st.lists(st.text(max_size=30), max_size=20), st.text(max_size=40))
def test_checkpoint_parsers_never_raise(names: list[str], template: str) -> None:
    """Arbitrary entry names and templates never break the checkpoint parsers."""
    steps = steps_from_names(names)
    assert steps == sorted(set(steps))
    listing = build_listing({"/r": names}, latest_markers={"/r": template})
    assert listing.roots == ("/r",)
    expand_roots([template], workdir="/w", name="n", job_id="1", user=None)
