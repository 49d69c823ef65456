"""``JOBTABLES_LOG_JSON=0`` switched JSON logs on (any non-empty value did)."""

from __future__ import annotations

import pytest

from bot.logs import json_logs


@pytest.mark.parametrize(("value", "on"), [("1", True), ("true", True), ("YES", True),
                                           ("on", True), ("0", False), ("false", False),
                                           ("no", False), ("off", False), ("", False)])
def test_the_variable_reads_as_a_boolean(value: str, on: bool,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JOBTABLES_LOG_JSON", value)
    assert json_logs() is on


def test_unset_is_console(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("JOBTABLES_LOG_JSON", raising=False)
    assert json_logs() is False


CHILD = """
import logging
from bot.logs import configure_logging, get_logger
configure_logging()
logging.getLogger("slack_bolt.AsyncApp").warning(
    "As you gave `client` as well, `token` will be unused.")
logging.getLogger("slack_sdk.web.async_base_client").info("A retry handler found: %s", "x")
try:
    raise ConnectionRefusedError(111, "Connect call failed")
except OSError:
    logging.getLogger("slack_sdk.socket_mode").exception("Failed to connect")
get_logger("bot.server").info("bot listening", port=8080)
"""


def test_json_mode_makes_every_line_json_the_libraries_too() -> None:
    """The image and the unit set JOBTABLES_LOG_JSON=1 for 'JSON log lines' (deploy/README):
    the bot's own lines were JSON but Bolt's and slack_sdk's (stdlib logging: a token warning
    at every start, retries, Socket Mode reconnects with their tracebacks) were plain text
    among them, which a JSON log pipeline cannot parse."""
    import json
    import os
    import subprocess
    import sys

    env = {**os.environ, "JOBTABLES_LOG_JSON": "1", "JOBTABLES_LOG_LEVEL": "INFO"}
    run = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True,
                         text=True, timeout=60, check=True)
    lines = run.stderr.splitlines()
    records = [json.loads(line) for line in lines]  # each line one JSON object
    assert [r["event"] for r in records] == [
        "As you gave `client` as well, `token` will be unused.", "A retry handler found: x",
        "Failed to connect", "bot listening"]
    assert [r["level"] for r in records] == ["warning", "info", "error", "info"]
    assert records[0]["logger"] == "slack_bolt.AsyncApp" and "timestamp" in records[0]
    assert "ConnectionRefusedError" in records[2]["exception"]
