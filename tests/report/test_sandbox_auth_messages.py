"""The sandbox providers' own words for refused credentials are auth failures.

CONTRACT §6 ``auth-failures``: "repeated tunnel/sandbox auth failures". Harbor's sandbox
providers do not all say 401: Daytona's SDK refuses a wrong key as ``DaytonaError: Failed to
create sandbox: API key not found`` (daytonaio/daytona#1772), Modal's as ``AuthError`` /
``UNAUTHENTICATED: Token validation failed`` (modal-labs/libmodal#46). Harbor records the
exception in each trial's result.json (the sandbox never came up: no agent, no verifier); a
launcher prints it in its log. Neither was counted: the trials read as sandboxes that never
started, and the log's lines as nothing, so an eval whose every sandbox was refused for its key
never said auth.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from probes.logs.parse import parse_log
from probes.remote.harbor_reduce import reduce_trial

_DAYTONA = ("daytona_sdk.common.errors.DaytonaError: Failed to create sandbox: "
            "API key not found")
_MODAL = "modal.exception.AuthError: UNAUTHENTICATED: Token validation failed"


@pytest.mark.parametrize(("exc", "message", "auth"), [
    ("DaytonaError", "Failed to create sandbox: API key not found", True),
    ("AuthError", "Token validation failed", True),
    ("ModalError", "UNAUTHENTICATED: Token validation failed", True),
    # near-misses: a missing file or key of the task's own, a timeout
    ("FileNotFoundError", "config.json not found", False),
    ("KeyError", "'api_key'", False),
    ("EnvironmentStartTimeoutError", "Environment start timed out after 600.0 seconds", False),
])
def test_provider_refusals_in_a_trial_are_auth_failures(exc: str, message: str,
                                                        auth: bool) -> None:
    raw = json.dumps({"trial_name": "t", "exception_info": {
        "exception_type": exc, "exception_message": message, "exception_traceback": "",
        "occurred_at": "2026-12-05T06:00:00Z"}})
    reduced = reduce_trial(raw)
    assert reduced is not None
    assert bool(reduced.get("auth_failure")) is auth


@pytest.mark.parametrize(("line", "counted"), [
    (_DAYTONA, 3),
    (_MODAL, 3),
    ("WARNING: Sandbox template 'python' not found, falling back to 'base'", 0),
])
def test_provider_refusals_in_the_log_are_counted(line: str, counted: int) -> None:
    text = "Starting harbor job\n" + (line + "\n") * 3
    summary = parse_log(text, mtime=datetime(2026, 12, 5, 6, 0, tzinfo=UTC))
    assert summary.infra.auth_failures == counted
