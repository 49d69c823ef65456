"""An internal api_base is named whole: its address is the finding.

Replayed on the real SLURM: an eval launched with ``api_base=http://10.0.3.7:8000/v1`` read
``api_base is internal (http://1…:8000/v1), not the public URL`` in its Trend and in its
recommendation: the Trend's squeeze took the middle of the URL, its host, the one part that
says which address is wrong. A URL's scheme, host and port (and a bare IP address) are never
squeezed; only a URL's path may lose its middle, and the recommendation is not cut to the
Trend's width.
"""

from __future__ import annotations

from datetime import timedelta

from probes.logs.parse import parse_log
from probes.models import JobFacts, JobState
from report.trend import TREND_MAX, shorten
from tests.report.factories import NOW, facts, judge, log, record, tree, trial

LAUNCH = """\
2026-12-04T09:50:01Z INF Registered tunnel connection connIndex=0 event=0 ip=198.41.200.13 \
location=sjc06 protocol=quic
harbor run --dataset terminal-bench --agent terminus-2 --model hosted_vllm/Mistral-Small-24B \
--n-concurrent 16 --agent-kwarg api_base=http://10.0.3.7:8000/v1 --jobs-dir jobs
"""


def test_an_internal_api_base_keeps_its_host_in_trend_and_why() -> None:
    """Was ``api_base is internal (http://1…:8000/v1), not the public URL``."""
    job = JobFacts(record=record("eval-mistral-x-tbench", "62", JobState.RUNNING,
                                      start_time=NOW - timedelta(minutes=5), elapsed_s=300),
                   log=log(text=LAUNCH), summary=parse_log(LAUNCH))
    report = judge(job).report
    assert "api-base-internal" in report.flags
    assert "http://10.0.3.7:8000" in report.trend, report.trend
    assert len(report.trend) <= TREND_MAX
    assert report.recommendation is not None
    assert "(http://10.0.3.7:8000/v1), not the public URL" in report.recommendation.why


def test_a_url_keeps_its_origin_and_loses_only_its_path() -> None:
    """The path of a long URL is squeezed; scheme, host and port stay whole."""
    text = ("api_base is internal (http://10.0.3.7:8000/v1/openai/deployments/"
            "qwen-7b-instruct), not the public URL")
    out = shorten(text)
    assert "(http://10.0.3.7:8000/v1/op…nstruct)" in out, out
    assert len(out) <= TREND_MAX


def test_a_bare_ip_address_is_not_squeezed() -> None:
    """``10.100.200.250:8000`` is an address, like a number: a cut one reads as another."""
    out = shorten("engine unreachable at 10.100.200.250:8000 after 12 retries; check the "
                  "router and its upstream pool")
    assert "10.100.200.250:8000" in out, out
    assert len(out) <= TREND_MAX


def test_launch_check_trends_fit_the_trend_width_whole() -> None:
    """The rule texts themselves ran past the Trend's 60 chars, so every such row ended
    mid-word: 'api_base is internal (http://10.0.3.7:8000/v1), not the pub…', 'Engine idle for
    39m: no 200s, 0 running reqs; agents not ge…'. The Trend says it short, whole; the
    recommendation keeps the full sentence."""
    post = '"POST /v1/chat/completions HTTP/1.1" 200 OK'
    zero = "INFO: Decode batch. #running-req: 0, #queue-req: 0"
    text = (LAUNCH + f"[2026-11-30 07:00:00] INFO:     127.0.0.1:5 - {post}\n"
            f"[2026-11-30 07:45:00] INFO:     127.0.0.1:5 - {post}\n"
            f"[2026-11-30 07:45:00] {zero}\n[2026-11-30 07:59:30] {zero}\n")
    job = facts(record("eval-qwen-swebench"), trials=tree([trial(1.0)] * 10, trials_total=300),
                log_fetch=log(text=text, mtime=NOW),
                summary_kw=parse_log(text).model_dump(exclude={"points"}))
    report = judge(job).report
    assert {"engine-idle", "api-base-internal"} <= set(report.flags)
    assert report.trend.startswith("Engine idle for 14m"), report.trend
    assert "…" not in report.trend, report.trend
    assert report.recommendation is not None
    assert "agents not generating" in report.recommendation.why
    internal = JobFacts(record=record("eval-m", "63", JobState.RUNNING,
                                      start_time=NOW - timedelta(minutes=5), elapsed_s=300),
                        log=log(text=LAUNCH), summary=parse_log(LAUNCH))
    trend = judge(internal).report.trend
    assert "http://10.0.3.7:8000/v1" in trend and "…" not in trend, trend
