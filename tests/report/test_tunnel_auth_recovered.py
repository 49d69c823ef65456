"""A tunnel refused at launch that then registered is no auth failure now.

Replayed on the real SLURM 22.05 as jtuser (eval-qwen3-x-tbench-authold): cloudflared refused
the tunnel's credentials twice at launch (``ERR ... error="Unauthorized: Failed to get
tunnel"``, its retry loop), then registered (``INF Registered tunnel connection``) and the
eval ran: engine 200s every 30 s, a trial landing every 3 minutes. ``jobtables sweep`` read
``warning [auth-failures] 4 tunnel auth failures: the tunnel's credentials are refused``,
diagnose, beside ``tunnel✓``, and would for the whole run: the count was the whole log's. The
rulebook: confirm a CURRENT window; the launch checks' own policy is that the latest tunnel
event wins. A registration (or a request the tunnel carried) ends the refusals before it.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from probes.logs.parse import parse_log
from tests.probes.logs.pieces import fold_in_pieces
from tests.report.factories import judge
from tests.report.test_harbor_dryrun_datagen import MAKE, _facts

_REFUSED = (
    '2026-12-05T14:50:34Z ERR Failed to serve quic connection error="Unauthorized: Failed to get '
    'tunnel" connIndex=0 event=0 ip=198.41.192.67\n'
    '2026-12-05T14:50:34Z ERR Register tunnel error from server side error="Unauthorized: Failed '
    'to get tunnel" connIndex=0 event=0 ip=198.41.192.67\n'
    "2026-12-05T14:50:34Z INF Retrying connection in up to 2s connIndex=0 event=0 "
    "ip=198.41.192.67\n"
)
_REGISTERED = ("2026-12-05T14:50:37Z INF Registered tunnel connection connIndex=0 event=0 "
               "ip=198.41.192.7 location=sjc06 protocol=quic\n")
_SERVING = (
    '(APIServer pid=812) INFO:     10.4.7.21:51234 - "POST /v1/chat/completions HTTP/1.1" 200 OK\n'
    "(APIServer pid=812) INFO 12-05 14:58:37 [loggers.py:123] Engine 000: Avg prompt throughput: "
    "0.0 tokens/s, Avg generation throughput: 800.0 tokens/s, Running: 16 reqs, Waiting: 0 "
    "reqs, GPU KV cache usage: 1.0%, Prefix cache hit rate: 64.0%\n"
)
_API = "Sandbox agent config: api_base=https://eval-engine.example.org/v1\n"
RECOVERED = _REFUSED * 2 + _REGISTERED + _API + _SERVING * 5
RELAPSED = _REGISTERED + _API + _SERVING * 5 + _REFUSED * 2
"""Near miss: registered and serving, then refused over and over: refused now."""
MTIME = datetime(2026, 12, 5, 14, 59, tzinfo=UTC)


@pytest.mark.parametrize("read", ["cold", "folded"])
def test_refusals_before_the_tunnel_registered_are_over(read: str) -> None:
    summary = (parse_log(RECOVERED, mtime=MTIME) if read == "cold"
               else fold_in_pieces(RECOVERED, 4, mtime=MTIME))
    assert summary.infra.tunnel_ok is True
    assert summary.infra.auth_failures == 0
    assert summary.infra.tunnel_auth_failures == 0


@pytest.mark.parametrize("read", ["cold", "folded"])
def test_refusals_after_it_registered_count(read: str) -> None:
    summary = (parse_log(RELAPSED, mtime=MTIME) if read == "cold"
               else fold_in_pieces(RELAPSED, 4, mtime=MTIME))
    assert summary.infra.tunnel_ok is False
    assert summary.infra.tunnel_auth_failures == summary.infra.auth_failures == 4


@pytest.mark.parametrize(("text", "flagged"), [(RECOVERED, False), (RELAPSED, True)])
def test_the_eval_row(tmp_path: Path, text: str, flagged: bool) -> None:
    jobs = tmp_path / "jobs"
    MAKE.write(jobs / "2026-12-05__14-50-37", {"pass": 10, "fail": 20, "inflight": 16},
               total=300, seed=20)
    now = datetime.now(UTC)  # the tree's times are make_tree's, from the real clock
    detail = judge(_facts(jobs, text, "eval-qwen3-x-tbench-authold", now=now), now=now)
    row = detail.report
    assert ("auth-failures" in row.flags) is flagged, (row.flags, row.trend)
    if not flagged:
        assert row.verdict == "healthy", row.trend
        assert detail.infra is not None and detail.infra.startswith("tunnel✓ ")
