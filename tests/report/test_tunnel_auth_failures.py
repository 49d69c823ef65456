"""A tunnel refused for its credentials, over and over, raises auth-failures and says so
(found by an acceptance dry run: an sbatch eval on the real SLURM whose log holds cloudflared's
retry loop against a bad tunnel secret, read through ``jobtables sweep --format json``).

CONTRACT §6: ``auth-failures`` is "repeated tunnel/sandbox auth failures". cloudflared says a
refused tunnel credential as ``ERR Register tunnel error from server side error="Unauthorized:
Invalid tunnel secret"`` / ``ERR Failed to serve quic connection error="Unauthorized: Failed to
get tunnel"`` (lines as cloudflared prints them, from cloudflare/cloudflared#426 and
homeassistant-apps/app-cloudflared#494), retrying every few seconds. The auth check knew only
``401 Unauthorized``, ``authentication failed``, ``invalid api key`` and ``AuthenticationError``:
the row read ``tunnel✗`` and verdict ``healthy``, no flag, no diagnosis.
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
    '2026-12-05T02:47:28Z ERR Failed to serve quic connection error="Unauthorized: Failed to get '
    'tunnel" connIndex=0 event=0 ip=198.41.192.67\n'
    '2026-12-05T02:47:28Z ERR Register tunnel error from server side error="Unauthorized: Failed '
    'to get tunnel" connIndex=0 event=0 ip=198.41.192.67\n'
    "2026-12-05T02:47:29Z INF Retrying connection in up to 2s connIndex=0 event=0 "
    "ip=198.41.192.67\n"
)
_SECRET = ('2026-12-05T02:48:44Z ERR Register tunnel error from server side error="Unauthorized: '
           'Invalid tunnel secret" connIndex=0\n'
           "2026-12-05T02:48:44Z INF Retrying connection in up to 2s seconds connIndex=0\n")
_LOG = "Sandbox agent config: api_base=https://eval-engine.example.org/v1\n" + _REFUSED \
    + _SECRET + _REFUSED


@pytest.mark.parametrize("read", ["cold", "folded"])
def test_a_tunnel_refused_for_its_credentials_counts_auth_failures(read: str) -> None:
    """Five refusals in the loop: counted alike read whole or folded piece by piece."""
    mtime = datetime(2026, 12, 5, 3, 0, tzinfo=UTC)
    summary = (parse_log(_LOG, mtime=mtime) if read == "cold"
               else fold_in_pieces(_LOG, 4, mtime=mtime))
    assert summary.infra.tunnel_ok is False
    assert summary.infra.auth_failures == 5
    assert summary.infra.tunnel_auth_failures == 5


def test_the_eval_row_flags_the_tunnels_auth_failures(tmp_path: Path) -> None:
    jobs = tmp_path / "jobs"
    MAKE.write(jobs / "2026-12-05__02-45-00", {"pass": 1, "fail": 1, "inflight": 8}, total=60,
               seed=83)
    detail = judge(_facts(jobs, _LOG, "eval-qwen3-tbench"), now=datetime.now(UTC))
    row = detail.report
    assert "auth-failures" in row.flags and row.verdict == "warning", (row.flags, row.verdict)
    assert detail.infra is not None and detail.infra.startswith("tunnel✗ ")
    assert row.recommendation is not None and row.recommendation.action == "diagnose"
    assert "tunnel" in row.recommendation.why and "sandbox" not in row.recommendation.why, \
        row.recommendation.why


def test_one_refusal_before_the_tunnel_registers_is_no_flag(tmp_path: Path) -> None:
    """cloudflared's first try may be refused before a retry registers (seen in
    cloudflare/cloudflared#657): one refusal is not 'repeated'."""
    log = (_SECRET + "2026-12-05T02:48:46Z INF Registered tunnel connection connIndex=0 "
           "connection=5f1c event=0 ip=198.41.200.13 location=sjc06 protocol=quic\n")
    jobs = tmp_path / "jobs"
    MAKE.write(jobs / "2026-12-05__02-45-00", {"pass": 4, "fail": 4, "inflight": 8}, total=60,
               seed=84)
    detail = judge(_facts(jobs, log, "eval-qwen3-tbench"), now=datetime.now(UTC))
    assert "auth-failures" not in detail.report.flags
    assert detail.infra is not None and detail.infra.startswith("tunnel✓ ")
