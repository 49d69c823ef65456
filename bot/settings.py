"""Process settings read from the environment once, at start.

Policy: secrets (Slack tokens, signing secret) live only in the environment, never in
``jobtables.toml`` (CONTRACT §2). They are read here exactly once; nothing else in the bot reads
``os.environ``. ``SLACK_APP_TOKEN`` switches on Socket Mode; ``SLACK_API_URL`` points the Web
API client elsewhere (tests, proxies) and always ends with ``/`` because slack_sdk joins method
names onto it with ``urljoin``. ``REDIS_PASSWORD`` authenticates to Redis.
``JOBTABLES_HOST`` is the address the HTTP listener binds (``/slack/events``, and the
unauthenticated ``/healthz`` and ``/metrics``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict, SecretStr, field_validator

from bot.errors import UserError

DEFAULT_SLACK_API_URL = "https://slack.com/api/"


class SettingsError(UserError):
    """A required environment variable is missing or malformed."""


class Settings(BaseModel):
    """What the bot process needs from its environment."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    slack_bot_token: SecretStr
    slack_signing_secret: SecretStr
    slack_app_token: SecretStr | None = None
    """Set: Socket Mode is used as well as the HTTP endpoint."""
    slack_api_url: str = DEFAULT_SLACK_API_URL
    host: str = "0.0.0.0"
    """Listen address; ``127.0.0.1`` keeps /healthz and /metrics off the network."""
    redis_password: SecretStr | None = None
    """``REDIS_PASSWORD``: used when ``[redis] url`` carries none (passwords stay out of the
    config file; the Helm chart sets it from Redis' Secret)."""

    @field_validator("slack_api_url")
    @classmethod
    def _trailing_slash(cls, v: str) -> str:
        return v if v.endswith("/") else v + "/"

    @property
    def socket_mode(self) -> bool:
        return self.slack_app_token is not None

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        """Read the settings from ``env`` (default: ``os.environ``)."""
        source = os.environ if env is None else env
        missing = [n for n in ("SLACK_BOT_TOKEN", "SLACK_SIGNING_SECRET") if not source.get(n)]
        if missing:
            raise SettingsError(f"missing environment variable(s): {', '.join(missing)}")
        return cls(
            slack_bot_token=SecretStr(source["SLACK_BOT_TOKEN"]),
            slack_signing_secret=SecretStr(source["SLACK_SIGNING_SECRET"]),
            slack_app_token=SecretStr(source["SLACK_APP_TOKEN"])
            if source.get("SLACK_APP_TOKEN")
            else None,
            slack_api_url=source.get("SLACK_API_URL") or DEFAULT_SLACK_API_URL,
            host=source.get("JOBTABLES_HOST") or "0.0.0.0",
            redis_password=SecretStr(source["REDIS_PASSWORD"])
            if source.get("REDIS_PASSWORD") else None,
        )
