"""The process around the app: settings from the environment, background tasks, run_bot."""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest
import structlog
from structlog.testing import capture_logs

from bot.cli import DEMO_RECORDING
from bot.errors import UserError
from bot.server import run_bot
from bot.settings import Settings, SettingsError
from bot.store import RedisStore
from bot.tasks import TaskSet
from tests.bot.fake_slack import SIGNING_SECRET, FakeSlack


@pytest.mark.parametrize(
    ("env", "api_url", "socket_mode"),
    [
        ({}, "https://slack.com/api/", False),
        ({"SLACK_API_URL": "http://127.0.0.1:9/api"}, "http://127.0.0.1:9/api/", False),
        ({"SLACK_APP_TOKEN": "xapp-1"}, "https://slack.com/api/", True),
        ({"SLACK_APP_TOKEN": ""}, "https://slack.com/api/", False),  # near miss: empty is unset
    ],
)
def test_settings_from_env(env: dict[str, str], api_url: str, socket_mode: bool) -> None:
    """Tokens come from the environment; the API URL always ends with a slash."""
    base = {"SLACK_BOT_TOKEN": "xoxb-1", "SLACK_SIGNING_SECRET": "s"}
    settings = Settings.from_env({**base, **env})
    assert settings.slack_api_url == api_url and settings.socket_mode is socket_mode
    assert "xoxb-1" not in repr(settings)


def test_missing_secrets_are_named() -> None:
    """A missing token is one clear error naming the variables."""
    with pytest.raises(SettingsError, match="SLACK_BOT_TOKEN, SLACK_SIGNING_SECRET"):
        Settings.from_env({})


async def test_crashed_task_is_logged_at_once() -> None:
    """A background task's exception is logged when it happens, not when awaited."""
    tasks = TaskSet()

    async def boom() -> None:
        raise RuntimeError("probe exploded")

    with capture_logs() as logs:
        tasks.spawn(boom(), name="boom")
        await tasks.drain()
    (entry,) = [e for e in logs if e["event"] == "background task crashed"]
    assert entry["task"] == "boom" and tasks.crashes == 1 and len(tasks) == 0


@pytest.fixture
def bot_env(slack: FakeSlack, prefix: str, tmp_path: Path,
            monkeypatch: pytest.MonkeyPatch) -> Path:
    config = tmp_path / "jobtables.toml"
    config.write_text(f"""
[[clusters]]
name = "alpha"
kind = "replay"
path = "{DEMO_RECORDING}"

[redis]
key_prefix = "{prefix}"

[slack]
channel = "C0SWEEP"
incident_dir = "{tmp_path / 'incidents'}"
[slack.owners]
alice = "UALICE"
""")
    monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-test")
    monkeypatch.setenv("SLACK_SIGNING_SECRET", SIGNING_SECRET)
    monkeypatch.setenv("SLACK_API_URL", slack.base_url)
    monkeypatch.delenv("SLACK_APP_TOKEN", raising=False)
    return config


@pytest.fixture
def restore_logging() -> Iterator[None]:
    """run_bot configures structlog for the process; give later tests the old set-up back."""
    saved = structlog.get_config()
    yield
    structlog.configure(**saved)


async def test_run_bot_posts_the_current_interval_and_stops(
    bot_env: Path, slack: FakeSlack, store: RedisStore, restore_logging: None,
) -> None:
    """`jobtables bot` starts, sweeps the current interval into the channel, stops on cancel."""
    assert os.environ["SLACK_API_URL"] == slack.base_url
    task = asyncio.create_task(run_bot(bot_env, port=0), name="run_bot")
    try:
        # The recorded collapse DMs alice first (alerts go before the channel's posts).
        (alert, parent, *_) = await slack.wait_for("/api/chat.postMessage", 2)
        assert parent.params["channel"] == "C0SWEEP"
        await slack.wait_for("/api/conversations.open")  # the recorded collapse DMs alice
        assert alert.params["channel"] != "C0SWEEP"
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


@pytest.mark.usefixtures("store", "restore_logging")
@pytest.mark.parametrize("host", ["127.0.0.1", "no-such-host.invalid"])
async def test_a_port_it_cannot_listen_on_is_one_line_not_an_internal_error(
    bot_env: Path, monkeypatch: pytest.MonkeyPatch, host: str,
) -> None:
    """`jobtables bot --port N` with N taken (another bot, a dev server), or a JOBTABLES_HOST
    no address has, is the user's to fix: a UserError (exit 2, one line naming the address).
    It was bind()'s OSError: 'internal error (ref ...)', exit 1, and a traceback."""
    import socket

    monkeypatch.setenv("JOBTABLES_HOST", host)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(UserError, match=rf"^cannot listen on {re.escape(host)}:{port}: "):
            await run_bot(bot_env, port=port)


async def test_run_bot_says_the_port_it_bound(
    bot_env: Path, slack: FakeSlack, store: RedisStore, restore_logging: None,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`jobtables bot --port 0` names the port the system gave it on stderr (at any log level),
    and that port serves /healthz: a supervisor or test starting it on port 0 can find it."""
    task = asyncio.create_task(run_bot(bot_env, port=0), name="run_bot")
    try:
        await slack.wait_for("/api/chat.postMessage")  # serving: the line came before
        err = capsys.readouterr().err
        found = re.search(r"listening on http://[^ ]+:(\d+)/slack/events", err)
        assert found is not None, err
        port = int(found.group(1))
        assert port != 0
        async with aiohttp.ClientSession() as http, http.get(
                f"http://127.0.0.1:{port}/healthz") as response:
            assert response.status == 200
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
