"""``jobtables.toml``'s models: the roster and settings, each section checked as it is built.

Policy: the file is re-read at the start of every sweep (CONTRACT §2), so edits apply on the
next sweep. Config flows one way: the bot holds one
:class:`bot.config_source.ConfigSource`; the Sweeper calls its
``load`` at the start of a sweep, and everything else reads ``current()`` (the config the latest
sweep ran with). Nothing asks the sweep engine for its config. Secrets never live here: Slack
tokens come from the environment (``bot.settings``). A bad file raises :class:`ConfigError`,
whose message names the file, the line and the key; reading and parsing the file live in
``bot.config_file``. Slack ids that grant permissions (owners,
operators) must be user ids (``U…``/``W…``): a channel or team id there is rejected.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    field_validator,
    model_validator,
)

from bot.errors import UnknownClusterError, UserError
from probes.config import RECENT_HOURS_MAX, ClusterConfig, ReadPlan
from report.settings import BucketRules, DeepProbeSettings, ReportSettings, Thresholds


class ConfigError(UserError):
    """The config file is missing, unreadable or invalid."""


class _Strict(BaseModel):
    # No number in the file may be inf or nan (TOML has both): with inf the scheduler's
    # next_tick_at overflowed, with nan every comparison is False.
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)


SLACK_USER_ID = re.compile(r"\A[UW][A-Z0-9]{2,20}\Z")
"""A Slack user id (``U…``, or ``W…`` on Enterprise Grid); channels (``C…``/``D…``/``G…``),
teams and bots are not people and cannot own a job or press a destructive button."""
NOT_A_USER_ID = "not a Slack user id (expected U… or W…, e.g. U0AAAAAAAAA)"


def _user_id(value: str, key: str = "") -> str:
    if not SLACK_USER_ID.match(value):
        raise ValueError(f"{key + ' = ' if key else ''}{value!r} is {NOT_A_USER_ID}")
    return value


WINDOW_LEN_MAX = 10_000
"""``[redis] window_len`` at most: points kept per run and metric."""
SWEEP_EVERY_MAX = 7 * 24 * 60
"""``[slack] sweep_every_minutes`` at most (a week)."""
CACHE_SECONDS_MAX = 24 * 3600
"""``[slack] cache_seconds`` at most (a day)."""
API_TIMEOUT_MAX = 300.0
"""``[slack] api_timeout_seconds`` at most (five minutes)."""
PERIOD_HOURS_MAX = 366 * 24
"""``[digest] period_hours`` at most (a year)."""


def _canonical_target(canonical: str) -> str:
    """A ``[metrics.aliases]`` value: a canonical name (checked per key, so check-config names
    the alias's own line)."""
    from probes.logs.metric_names import CANONICAL_NAMES

    if canonical not in CANONICAL_NAMES:
        raise ValueError(f"{canonical!r}: not a canonical metric name "
                         f"(CONTRACT section 4: {', '.join(sorted(CANONICAL_NAMES))})")
    return canonical


class MetricsSection(_Strict):
    aliases: dict[str, Annotated[str, AfterValidator(_canonical_target)]] = Field(
        default_factory=dict)


class RedisSection(_Strict):
    """``[redis]``: one server by ``url``, or a Sentinel-managed primary by ``sentinels``.

    Passwords never live here: ``REDIS_PASSWORD`` (the data nodes' ACL password) and
    ``REDIS_SENTINEL_PASSWORD`` (the sentinels' own, if they require one) come from the
    environment (``bot.settings``).
    """

    url: str = "redis://127.0.0.1:6379/0"
    """``redis://`` or ``rediss://`` (TLS) ``[user@]host:port/db``, or ``unix:///path``.
    Unused when ``sentinels`` is set."""
    sentinels: tuple[str, ...] = ()
    """``host:port`` of each Sentinel (``[::1]:26379`` for IPv6); set: the primary of
    ``service_name`` is asked of them, and found again after a failover."""
    service_name: str | None = None
    """The name the sentinels monitor the primary under (``sentinel monitor NAME ...``)."""
    db: int = Field(default=0, ge=0)
    """Database number on the Sentinel-managed primary (with ``url`` it is the URL's path)."""
    username: str | None = None
    """ACL user (Redis 6+); with ``url``, a user named in the URL wins."""
    tls: bool = False
    """TLS to the sentinels and the primary (with ``url``, write ``rediss://`` instead)."""
    tls_ca_file: str | None = None
    """CA bundle that signs the servers' certificates (default: the system's)."""
    key_prefix: str = "jobtables:"
    window_len: int = Field(default=200, ge=2, le=WINDOW_LEN_MAX)
    """Metric points kept per run and metric (capped list); longer than ``[thresholds]
    window`` (the rules read that many previous values and the step judged)."""
    expire_hours: float = Field(default=72.0, gt=0, le=RECENT_HOURS_MAX)
    """How long a finished run's windows and alert state outlive it (at most ten years)."""

    @field_validator("url")
    @classmethod
    def _url(cls, v: str) -> str:
        parts = urlsplit(v)
        if parts.scheme not in ("redis", "rediss", "unix"):
            raise ValueError(f"{v!r}: scheme must be redis://, rediss:// (TLS) or unix://")
        if parts.password:
            raise ValueError("a password in the URL: set REDIS_PASSWORD in the environment "
                             "instead (secrets never live in the config)")
        return v

    @field_validator("sentinels")
    @classmethod
    def _sentinels(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        for address in v:
            sentinel_address(address)
        return v

    @model_validator(mode="after")
    def _service_name(self) -> RedisSection:
        if self.sentinels and not self.service_name:
            raise ValueError("sentinels is set: service_name (the monitored primary's name) "
                             "is required")
        if self.service_name and not self.sentinels:
            raise ValueError("service_name is set but sentinels is empty")
        if self.tls and not self.sentinels:
            raise ValueError("tls applies to sentinels; for one server write rediss:// in url")
        return self


def sentinel_address(address: str) -> tuple[str, int]:
    """``host:port`` (or ``[v6]:port``) as a pair; ValueError naming the entry."""
    host, sep, port = address.rpartition(":")
    host = host.removeprefix("[").removesuffix("]")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"{address!r} is not host:port (e.g. 10.0.0.5:26379)")
    return host, int(port)


class SlackSection(_Strict):
    channel: str | None = None
    sweep_every_minutes: float = Field(default=30.0, ge=1, le=SWEEP_EVERY_MAX)
    """A scheduled sweep every this many minutes (1 minute to a week)."""
    no_kill: bool = False
    operators: tuple[str, ...] = ()
    owners: dict[str, str] = Field(default_factory=dict)
    """Cluster user -> Slack id on EVERY cluster (older form; per-cluster ``owners`` win)."""
    keep_snooze_by: Literal["owner_or_operator", "anyone"] = "owner_or_operator"
    """Who may press ``keep_running``/``snooze``/``acknowledge`` (cancel: owner or operator)."""
    cache_seconds: float = Field(default=120.0, ge=0, le=CACHE_SECONDS_MAX)
    """A cached sweep younger than this answers ``/jobs`` directly (its age is shown)."""
    incident_dir: str = "./incidents"
    """Where salvage evidence and failure diagnoses are written (also kept in Redis)."""
    api_timeout_seconds: float = Field(default=10.0, gt=0, le=API_TIMEOUT_MAX)
    """How long one Web API request may go unanswered (slack_sdk's default is 30 s), a DM
    file's upload included (1.7 MB at 5,000 jobs: 1.4 Mbit/s at the default). Slack answers
    in well under a second; once one request of a sweep's posting timed out, the next
    waits half of this, and if it times out too the rest of that posting gives up at once
    and is retried (``bot.delivery.posting``)."""

    @field_validator("operators")
    @classmethod
    def _operator_ids(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(_user_id(u) for u in v)

    @field_validator("owners")
    @classmethod
    def _owner_ids(cls, v: dict[str, str]) -> dict[str, str]:
        return {user: _user_id(slack_id, user) for user, slack_id in v.items()}


WIDTH_MIN, WIDTH_MAX = 40, 400
"""Table widths in columns (``[report] width``, ``--width``): narrower cannot hold a row."""


class ReportSection(_Strict):
    width: int = Field(default=100, ge=WIDTH_MIN, le=WIDTH_MAX)
    ablation_patterns: tuple[str, ...] | None = None

    @field_validator("ablation_patterns")
    @classmethod
    def _ablation_regexes(cls, v: tuple[str, ...] | None) -> tuple[str, ...] | None:
        for pattern in v or ():
            _check_regex(pattern)
        return v


class DeepProbeSection(_Strict):
    """``[deep_probe]``: where the deep probe reads, how much, and whether the bot runs it."""

    auto: bool = False
    """True: the scheduler probes each newly flagged ``deep-probe`` run once by itself."""
    offer: bool = False
    """True: each newly flagged run gets one message with the Deep-probe button (no probe)."""
    plan: ReadPlan = Field(default_factory=ReadPlan)
    judge: DeepProbeSettings = Field(default_factory=DeepProbeSettings)


class DigestSection(_Strict):
    """``[digest]``: the scheduled sweep's one parent message per period (bot/digest.py)."""

    period_hours: float = Field(default=24.0, ge=1, le=PERIOD_HOURS_MAX)
    """One parent message per this many hours (UTC-aligned; 24 = one per day; 1 to 366 days)."""
    full_tables_every: int = Field(default=0, ge=0)
    """Also post the full tables into the thread every N sweeps (0: only at period start)."""


class Config(_Strict):
    clusters: tuple[ClusterConfig, ...] = ()
    buckets: BucketRules = Field(default_factory=BucketRules)
    thresholds: Thresholds = Field(default_factory=Thresholds)
    metrics: MetricsSection = Field(default_factory=MetricsSection)
    redis: RedisSection = Field(default_factory=RedisSection)
    slack: SlackSection = Field(default_factory=SlackSection)
    report: ReportSection = Field(default_factory=ReportSection)
    deep_probe: DeepProbeSection = Field(default_factory=DeepProbeSection)
    digest: DigestSection = Field(default_factory=DigestSection)

    @field_validator("clusters")
    @classmethod
    def _unique_names(cls, v: tuple[ClusterConfig, ...]) -> tuple[ClusterConfig, ...]:
        seen: set[str] = set()
        for c in v:
            if c.name in seen:
                raise ValueError(f"cluster name {c.name!r} is used twice")
            seen.add(c.name)
            for slack_id in c.owners.values():
                _user_id(slack_id)
        return v

    def cluster(self, name: str) -> ClusterConfig:
        """The cluster called ``name``, or :class:`UnknownClusterError`."""
        for cluster in self.clusters:
            if cluster.name == name:
                return cluster
        raise UnknownClusterError(name, [c.name for c in self.clusters])

    def select(self, names: Sequence[str] | None) -> list[ClusterConfig]:
        """The clusters named (all of them for none), or :class:`UnknownClusterError`."""
        if not names:
            return list(self.clusters)
        wanted = {self.cluster(n).name for n in names}
        return [c for c in self.clusters if c.name in wanted]

    @field_validator("buckets")
    @classmethod
    def _regexes_compile(cls, v: BucketRules) -> BucketRules:
        for field in ("rl", "sft", "datagen", "eval"):
            for pattern in getattr(v, field):
                _check_regex(pattern)
        return v

    def report_settings(self, *, width: int | None = None) -> ReportSettings:
        extra: dict[str, Any] = {}
        if self.report.ablation_patterns is not None:
            extra["ablation_patterns"] = self.report.ablation_patterns
        return ReportSettings(
            buckets=self.buckets,
            thresholds=self.thresholds,
            width=width or self.report.width,
            no_kill=self.slack.no_kill,
            **extra,
        )


def _check_regex(pattern: str) -> None:
    try:
        re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"bad regex {pattern!r}: {exc}") from exc
