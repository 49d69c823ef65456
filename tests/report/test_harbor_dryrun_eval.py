"""Eval rows over Harbor trees in Harbor's real on-disk format, found by an acceptance dry-run
(sbatch jobs on the real SLURM 22.05 cluster writing the trees and log lines, read only through
``jobtables sweep --format json``).

The trees are written by ``tests/fixtures/harbor-dryrun/make_tree.py`` (Harbor's layout and
fields), read by the real collector and reducer on disk, the log by the real parser, and judged
by the real judge.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from probes.remote.harbor_reduce import reduce_trial
from tests.report.factories import judge
from tests.report.test_harbor_dryrun_datagen import MAKE, _facts

_LOG = ("2026-12-04 00:00:01 INFO cloudflared: Registered tunnel connection connIndex=0\n"
        "Sandbox agent config: api_base=https://eval-engine.example.org/v1\n")


@pytest.mark.parametrize(("auth", "flagged"), [(10, True), (3, True), (2, False), (0, False)])
def test_sandbox_auth_failures_recorded_in_the_trials(tmp_path: Path, auth: int,
                                                      flagged: bool) -> None:
    """The sandbox provider refusing credentials shows in the trials' result.json
    (exception_info: 'DaytonaError: Failed to create sandbox: 401 Unauthorized: invalid API
    key'), not in the launcher's log. An eval with such trials read no auth-failures flag
    (dry-run: eval-dry-authtrials; below half the window it read healthy): the rulebook's
    'repeated auth failures -> sandbox-provider degradation' was only looked for in the log."""
    jobs = tmp_path / "jobs"
    MAKE.write(jobs / "2026-12-04__00-00-00",
               {"pass": 15, "fail": 40, "authfail": auth, "inflight": 8}, total=300, seed=42)
    report = judge(_facts(jobs, _LOG, "eval-qwen3-tbench"), now=datetime.now(UTC)).report
    assert report.bucket == "eval"
    assert ("auth-failures" in report.flags) is flagged, (report.flags, report.trend)
    if flagged:
        assert report.verdict == "warning"
        assert report.recommendation is not None
        assert report.recommendation.action == "diagnose"
        assert "auth" in report.recommendation.why and "sandbox" in report.recommendation.why


@pytest.mark.parametrize(("exc", "message", "auth"), [
    ("DaytonaError", "Failed to create sandbox: 401 Unauthorized: invalid API key", True),
    ("AuthenticationError", "litellm.AuthenticationError: OpenAIException - bad key", True),
    ("ModalError", "HTTP 403 Forbidden: token lacks permission", True),
    ("AgentTimeoutError", "Agent execution timed out after 403.0 seconds", False),
    ("RuntimeError", "Connection refused", False),
])
def test_which_trial_exceptions_are_auth_failures(exc: str, message: str, auth: bool) -> None:
    raw = json.dumps({"trial_name": "t", "exception_info": {
        "exception_type": exc, "exception_message": message, "exception_traceback": "",
        "occurred_at": "2026-12-04T00:00:00Z"}})
    reduced = reduce_trial(raw)
    assert reduced is not None
    assert bool(reduced.get("auth_failure")) is auth


@pytest.mark.parametrize(("kind", "tunnel"), [("instant", "tunnel✗"), ("never", "tunnel✓")])
def test_instant_fail_marks_the_tunnel_as_carrying_no_traffic(tmp_path: Path, kind: str,
                                                              tunnel: str) -> None:
    """The Infra column is the launch checks, the tunnel's auth AND traffic (seed). Trials
    failing instantly with null output say the tunnel carries no traffic: a registered
    tunnel read 'tunnel✓' beside 'INSTANT-FAIL ... the tunnel is not carrying traffic'
    (replayed on the real SLURM). Sandboxes that never start are the provider's, not the
    tunnel's: its mark stands."""
    jobs = tmp_path / "jobs"
    MAKE.write(jobs / "2026-12-04__00-00-00", {kind: 12, "inflight": 8}, total=300, seed=9)
    detail = judge(_facts(jobs, _LOG, "eval-qwen3-tbench"), now=datetime.now(UTC))
    assert "instant-fail" in detail.report.flags
    assert detail.infra is not None and detail.infra.startswith(tunnel + " "), detail.infra
