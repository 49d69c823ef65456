"""A request its client cancelled is traffic through the tunnel, not a tunnel failure.

cloudflared logs every proxied request that ends early on the client's side as an ERR line
with the connection's ``connIndex`` (lines as cloudflared prints them, from
cloudflare/cloudflared#1012 and #1480, and an OpenAI-style ``/v1/chat/completions`` client in
orchidfiles/ungate#49): ``ERR  error="Incoming request ended abruptly: context canceled"
connIndex=0 event=1 ingressRule=0 originService=http://localhost:8000`` and ``ERR Request failed
error="Incoming request ended abruptly: context canceled" connIndex=0 dest=https://.../v1/chat/
completions event=0 ...``. In an agentic eval every AgentTimeoutError cancels its agent's
in-flight LLM request, so these lines come with the timeouts the rulebook calls normal. Each one
read as a tunnel error (``ERR ... connIndex``): a registered tunnel carrying requests showed
``tunnel✗`` in the Infra column for the rest of the run.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from probes.logs.parse import parse_log
from tests.probes.logs.pieces import fold_in_pieces
from tests.report.factories import judge
from tests.report.test_harbor_dryrun_datagen import MAKE, _facts

_REGISTERED = ("2026-12-05T05:40:01Z INF Registered tunnel connection connIndex=0 "
               "connection=5f1c event=0 ip=198.41.200.13 location=sjc06 protocol=quic\n"
               "Sandbox agent config: api_base=https://eval-engine.example.org/v1\n")
_CANCELLED = (
    '2026-12-05T05:52:13Z ERR  error="Incoming request ended abruptly: context canceled" '
    "connIndex=0 event=1 ingressRule=0 originService=http://localhost:8000\n"
    '2026-12-05T05:52:13Z ERR Request failed error="Incoming request ended abruptly: context '
    'canceled" connIndex=0 dest=https://eval-engine.example.org/v1/chat/completions event=0 '
    "ip=198.41.200.43 type=http\n"
    '2026-12-05T05:53:02Z ERR  error="stream 5081 canceled by remote with error code 0" '
    "connIndex=1 event=1 ingressRule=0 originService=http://localhost:8000\n"
)
_LOST = ('2026-12-05T05:54:20Z WRN Connection terminated error="timeout: no recent network '
         'activity" connIndex=0\n'
         '2026-12-05T05:54:20Z ERR Failed to serve tunnel connection error="connection with edge '
         'closed" connIndex=0 event=0 ip=198.41.200.13\n')


@pytest.mark.parametrize("read", ["cold", "folded"])
@pytest.mark.parametrize(("log", "ok"), [
    (_REGISTERED + _CANCELLED, True),
    (_REGISTERED + _CANCELLED + _LOST, False),  # near-miss: the tunnel itself lost afterwards
])
def test_a_cancelled_request_is_no_tunnel_failure(read: str, log: str, ok: bool) -> None:
    mtime = datetime(2026, 12, 5, 6, 0, tzinfo=UTC)
    summary = (parse_log(log, mtime=mtime) if read == "cold"
               else fold_in_pieces(log, 3, mtime=mtime))
    assert summary.infra.tunnel_ok is ok
    assert summary.infra.auth_failures == 0


def test_the_eval_row_keeps_its_tunnel_mark(tmp_path: Path) -> None:
    jobs = tmp_path / "jobs"
    MAKE.write(jobs / "2026-12-05__05-40-00", {"pass": 4, "timeout": 12, "inflight": 8},
               total=60, seed=85)
    detail = judge(_facts(jobs, _REGISTERED + _CANCELLED * 6, "eval-qwen3-tbench"),
                   now=datetime.now(UTC))
    assert detail.infra is not None and detail.infra.startswith("tunnel✓ "), detail.infra
    assert detail.report.flags == [], detail.report.flags
