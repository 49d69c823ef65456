"""An engine refusing the agents' key is told apart from a degraded sandbox provider.

An eval whose vLLM is exposed through a public tunnel runs it with ``--api-key`` (the tunnel's
URL is public); agents launched with another key get every request answered ``401`` in vLLM's
access log (``"POST /v1/chat/completions HTTP/1.1" 401 Unauthorized``). Replayed under a real
sbatch job, the row read '20 auth failures: sandbox provider degraded': the sandboxes came up,
the engine refused the key. CONTRACT §6's ``auth-failures`` still holds; the Trend and the
diagnosis now say whose credentials are refused.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.report.factories import judge
from tests.report.test_harbor_dryrun_datagen import MAKE, _facts

_LAUNCH = ("2026-12-05T02:40:01Z INF Registered tunnel connection connIndex=0 event=0 "
           "ip=198.41.192.67 location=sjc06 protocol=quic\n"
           "Sandbox agent config: api_base=https://eval-engine.example.org/v1\n")
_REFUSED = ('(APIServer pid=812) INFO:     198.41.192.67:51234 - "POST /v1/chat/completions '
            'HTTP/1.1" 401 Unauthorized\n')
_SANDBOX = ("2026-12-05T02:47:28 WARNING harbor.environments.daytona: Failed to create sandbox:"
            " 401 Unauthorized: invalid API key\n")


@pytest.mark.parametrize(("lines", "whose"), [
    (_REFUSED * 20, "engine"),
    (_SANDBOX * 20, "sandbox provider"),  # near miss: the provider's refusals, as before
    (_REFUSED * 4 + _SANDBOX * 16, "sandbox provider"),
])
def test_whose_credentials_are_refused(tmp_path: Path, lines: str, whose: str) -> None:
    jobs = tmp_path / "jobs"
    MAKE.write(jobs / "2026-12-05__02-40-00", {"pass": 2, "fail": 6, "inflight": 16}, total=300,
               seed=8, minutes_ago=10)
    report = judge(_facts(jobs, _LAUNCH + lines, "eval-qwen3-x-tbench"),
                   now=datetime.now(UTC)).report
    assert "auth-failures" in report.flags, (report.flags, report.trend)
    assert report.recommendation is not None
    assert whose in report.trend and whose in report.recommendation.why, report.trend
    if whose == "engine":
        assert "sandbox" not in report.trend
