"""An auth failure inside an agent's own run is the task's, not the sandbox provider's
(review of ec37f18). Trials whose agent ran and then met a 401 (``curl`` against a task's
server, ``git`` refused, ``sudo: unauthorized``, a passthrough timeout whose output quotes a
403) were counted as provider auth failures: three of them in the last 100 flagged an eval
``auth-failures``, "sandbox provider degraded". Only a trial whose sandbox never came up (no
agent phase) says that about the provider."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.report.factories import judge
from tests.report.test_harbor_dryrun_datagen import MAKE, _facts
from tests.report.test_harbor_dryrun_eval import _LOG

AGENT_401S = [
    ("RuntimeError", "curl returned 401 Unauthorized from http://localhost:8080/api"),
    ("NonZeroAgentExitCodeError", "fatal: Authentication failed for 'https://github.com/x/y'"),
    ("AgentTimeoutError", "last command output: sudo: unauthorized command"),
    ("ContextLengthExceededError", "tool output: HTTP/1.1 403 Forbidden ..."),
]


@pytest.mark.parametrize(("exc", "message"), AGENT_401S)
def test_an_agents_own_401s_are_no_provider_failure(tmp_path: Path, exc: str,
                                                    message: str) -> None:
    jobs = tmp_path / "jobs"
    job_dir = jobs / "2026-12-04__00-00-00"
    MAKE.write(job_dir, {"pass": 15, "fail": 40, "error": 6, "inflight": 8}, total=300, seed=44)
    for result in job_dir.glob("*/result.json"):
        body = json.loads(result.read_text())
        if body["exception_info"] and body["exception_info"]["exception_type"] == "RuntimeError":
            body["exception_info"].update(exception_type=exc, exception_message=message)
            result.write_text(json.dumps(body))
    report = judge(_facts(jobs, _LOG, "eval-qwen3-tbench"), now=datetime.now(UTC)).report
    assert "auth-failures" not in report.flags, (report.flags, report.trend)
