"""An engine's 401s answered before the agents' key was fixed are over once it answers on.

Replayed under a real sbatch job as jtuser (eval-qwen3-x-tbench-keyfixed): vLLM behind the
tunnel with ``--api-key``; its access log answered the agents' first 5 requests ``401
Unauthorized`` (a stale key in their config), then, the agents relaunched with the right key,
``200 OK`` every 3 s with 16 requests running. ``jobtables job`` went on reading ``warning
[auth-failures] 5 engine 401/403s: the agents' API key is refused``, diagnose, with 20+ answers
of 200 since and for the rest of the run: the count was the whole log's (the rulebook: confirm
a CURRENT window). The engine's refusals are over after ``RECENT_RESPONSES`` (20) answers in a
row with none; refusals among the latest answers (half the agents with another key) count.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from probes.logs.parse import parse_log
from tests.probes.logs.pieces import fold_in_pieces

_401 = ('(APIServer pid=812) INFO:     10.4.7.21:51234 - "POST /v1/chat/completions HTTP/1.1" '
        "401 Unauthorized\n")
_200 = ('(APIServer pid=812) INFO:     10.4.7.21:51234 - "POST /v1/chat/completions HTTP/1.1" '
        "200 OK\n")
_LAUNCH = ("2026-12-05T16:00:00Z INF Registered tunnel connection connIndex=0 event=0\n"
           "Sandbox agent config: api_base=https://eval-engine.example.org/v1\n")
MTIME = datetime(2026, 12, 5, 16, 5, tzinfo=UTC)


@pytest.mark.parametrize(("text", "failures"), [
    (_LAUNCH + _401 * 5 + _200 * 25, 0),     # fixed: 25 answers since, none refused
    (_LAUNCH + _401 * 5 + _200 * 10, 5),     # 10 answers since: still the latest window
    (_LAUNCH + (_401 + _200) * 15, 15),      # half the agents refused all along
])
@pytest.mark.parametrize("read", ["cold", "folded"])
def test_engine_refusals_count_within_the_latest_answers(text: str, failures: int,
                                                         read: str) -> None:
    summary = (parse_log(text, mtime=MTIME) if read == "cold"
               else fold_in_pieces(text, 4, mtime=MTIME))
    assert summary.infra.engine_auth_failures == failures
    assert summary.infra.auth_failures == failures
