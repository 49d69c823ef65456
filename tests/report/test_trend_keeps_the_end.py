"""A Trend cut to its width keeps the informative end of a fault or an error.

Before, ``shorten`` cut every long text at the end: torchrun's SIGTERM read
``sigterm: torch.distributed.elastic.multiprocessing.api.Sign…`` (no "got signal: 15"), and a
Kubernetes log fetch refused by RBAC read ``Log fetch failed: read log of
pod/rl-grpo-qwen3-8b-swe-agentic-0-worker-0-x7k2p: HT…`` (no status). Now a dotted module path
is dropped to its last component and long names and paths lose their middle first; only then
is the end cut.
"""

from __future__ import annotations

from probes.logs.parse import parse_log
from probes.models import JobFacts, JobState
from report.models import JobDetail
from report.trend import TREND_MAX, shorten
from tests.report.factories import judge, log, record

STEPS = "".join(
    f"{{'loss': {1.2 - 0.01 * i:.3f}, 'grad_norm': 0.5, 'learning_rate': 1e-05, "
    f"'epoch': {0.01 * i:.2f}}}\n" for i in range(12))

# torchrun's agent receiving SIGTERM (torch 2.4+: glog-style warnings, then the agent's own
# traceback from torch/distributed/elastic/multiprocessing/api.py)
TORCHRUN_SIGTERM = """\
W1204 03:41:07.113000 28181 torch/distributed/elastic/agent/server/api.py:704] Received 15 \
death signal, shutting down workers
W1204 03:41:07.114000 28181 torch/distributed/elastic/multiprocessing/api.py:897] Sending \
process 28190 closing signal SIGTERM
Traceback (most recent call last):
  File "/venv/bin/torchrun", line 8, in <module>
    sys.exit(main())
  File "/venv/lib/python3.11/site-packages/torch/distributed/elastic/multiprocessing/api.py", \
line 86, in _terminate_process_handler
    raise SignalException(f"Process {os.getpid()} got signal: {sigval}", sigval=sigval)
torch.distributed.elastic.multiprocessing.api.SignalException: Process 28181 got signal: 15
"""

POD = "rl-grpo-qwen3-8b-swe-agentic-0-worker-0-x7k2p"
# The API server's answer to a Role without pods/log, as probes.kubernetes.client words it
K8S_403 = (f'read log of pod/{POD}: HTTP 403 Forbidden: pods "{POD}" is forbidden: User '
           '"system:serviceaccount:ml:jobtables" cannot get resource "pods/log" in API group '
           '"" in the namespace "ml"')


def _judged(text: str, state: JobState, **fetch: str) -> JobDetail:
    job = JobFacts(record=record("sft-llama-8b", "4242", state, exit_code=1),
                   log=log(text=text, **fetch), summary=parse_log(text))
    return judge(job)


def test_a_torchrun_sigterm_keeps_its_signal() -> None:
    """Was ``sigterm: torch.distributed.elastic.multiprocessing.api.Sign…``."""
    job = _judged(STEPS + TORCHRUN_SIGTERM, JobState.FAILED).report
    assert "sigterm" in job.flags
    assert job.trend.startswith("sigterm: SignalException: Process 28181 got signal: 15"), \
        job.trend
    assert len(job.trend) <= TREND_MAX


def test_a_refused_log_fetch_keeps_its_status() -> None:
    """Was ``Log fetch failed: read log of pod/rl-grpo-qwen3-8b-swe-agentic-0-worker-0-x7k2p: HT…``
    (the HTTP status lost); now ``...read log of pod/rl-g…x7k2p: HTTP 403 Forb…``."""
    job = _judged("", JobState.RUNNING, status="failed", error=K8S_403).report
    assert "fetch-failed" in job.flags and job.verdict == "unknown"
    assert job.trend.startswith("Log fetch failed: read log of pod/rl-g"), job.trend
    assert "x7k2p: HTTP 403 Forb" in job.trend, job.trend  # the pod's both ends, the status
    assert len(job.trend) <= TREND_MAX


def test_a_long_path_loses_its_middle() -> None:
    """A missing log's path keeps its file name (was cut inside the directories)."""
    text = "No log found (/lustre/scratch/alice/experiments/sft-llama-8b/logs/slurm-4242.out)"
    short = shorten(text)
    assert short.startswith("No log found (/lustre/") and short.endswith("slurm-4242.out)")
    assert len(short) == TREND_MAX and short.count("…") == 1


def test_what_fits_or_has_no_name_is_unchanged() -> None:
    """A text that fits is never touched (a module path in it stays); prose is cut at the end
    as before; short numbers and words are never cut in the middle."""
    fits = "ray.exceptions.RayTaskError: boom"
    assert shorten(fits) == fits
    prose = "Loss descending steadily across the last several logged steps of the run"
    assert shorten(prose) == prose[: TREND_MAX - 1].rstrip() + "…"
    numbers = "grad_norm 3.20 (>1.0), entropy −62% vs trend, log_ratio 0.031 (>2x 0.012) fired"
    assert shorten(numbers) == numbers[: TREND_MAX - 1].rstrip() + "…"


def test_a_long_number_is_never_cut_in_its_middle() -> None:
    """'grad_norm 12345678901234.5' squeezed read '123456…01234.5', still a number but another
    one (review of b15245d): numbers are cut only at the end, with the ellipsis."""
    text = ("grad_norm 12345678901234.5 spike at step 40 with loss 1.2345678901234567 and "
            "nothing else to see")
    cut = shorten(text, 60)
    assert len(cut) <= 60
    assert "12345678901234.5" in cut and "…01234" not in cut
