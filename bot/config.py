"""``jobtables.toml``: the roster and settings file, loaded with line-precise errors.

Policy: the file is re-read at the start of every sweep (CONTRACT §2), so edits apply on the
next sweep. Config flows one way: the bot holds one
:class:`bot.config_source.ConfigSource`; the Sweeper calls its
``load`` at the start of a sweep, and everything else reads ``current()`` (the config the latest
sweep ran with). Nothing asks the sweep engine for its config. Secrets never live here: Slack
tokens come from the environment (``bot.settings``). A bad file raises :class:`ConfigError`,
whose message names the file, the line and the key. Slack ids that grant permissions (owners,
operators) must be user ids (``U…``/``W…``): a channel or team id there is rejected.
"""

from __future__ import annotations

import os
import re
import select
import time
import tomllib
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
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


def default_config_path() -> Path:
    """``--config`` default: ``$JOBTABLES_CONFIG``, then ``./jobtables.toml``."""
    env = os.environ.get("JOBTABLES_CONFIG")
    return Path(env) if env else Path("jobtables.toml")


MAX_CONFIG_BYTES = 4 << 20
"""A config is a few KB: read up to this, so a path that never ends (``/dev/zero``) or a
huge file is refused at once rather than read for ever."""


CONFIG_READ_TIMEOUT_S = 10.0
"""How long a config read may wait for its bytes: a FIFO nobody writes to (or a pipe whose
writer hangs) is bad config after this, not a command hung for ever."""


def _read_bounded(path: Path) -> bytes:
    """Up to ``MAX_CONFIG_BYTES + 1`` bytes of ``path``, within :data:`CONFIG_READ_TIMEOUT_S`.
    Opened without blocking (a FIFO's open() waits for a writer otherwise), then read as poll()
    says bytes are there: a FIFO's EOF is only an EOF once a writer came and went (before one
    comes, poll() waits and read() answers b'' at once)."""
    timeout = CONFIG_READ_TIMEOUT_S
    deadline = time.monotonic() + timeout
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        chunks: list[bytes] = []
        size = 0
        while size <= MAX_CONFIG_BYTES:
            left = deadline - time.monotonic()
            if left <= 0 or not poller.poll(max(1, int(left * 1000))):
                if time.monotonic() < deadline:
                    continue  # poll() woke early (a signal): wait out the rest
                raise ConfigError(f"{path}: nothing to read within {timeout:g}s (a FIFO or "
                                  "pipe with no writer?)" if not chunks else
                                  f"{path}: not read whole within {timeout:g}s (its writer "
                                  "stopped writing)")
            try:
                chunk = os.read(fd, min(1 << 16, MAX_CONFIG_BYTES + 1 - size))
            except BlockingIOError:
                continue
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def load_config(path: Path) -> Config:
    """Read and validate ``path``; raise :class:`ConfigError` naming the line and key. The
    read is bounded in size (:data:`MAX_CONFIG_BYTES`) and time (:data:`CONFIG_READ_TIMEOUT_S`)."""
    try:  # a pipe (--config <(...), /dev/stdin) reads as well as a file
        data = _read_bounded(path)
    except FileNotFoundError as exc:
        raise ConfigError(f"{path}: no such config file") from exc
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc}") from exc
    if len(data) > MAX_CONFIG_BYTES:
        raise ConfigError(f"{path}: larger than {MAX_CONFIG_BYTES} bytes: not a config file")
    try:
        text = data.decode("utf-8-sig")  # a byte-order mark (Windows editors) is no statement
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: cannot read: {exc}") from exc
    return parse_config(text, source=str(path))


MAX_CONFIG_DEPTH = 32
"""How deep a config's tables and arrays may nest (a real one: 4). TOML nested thousands deep
exhausts Python's recursion in the parser, or in any walk over what it read: bad config."""


def parse_config(text: str, *, source: str = "<config>") -> Config:
    """The roster in ``text``, checked; a ``ConfigError`` naming ``source``'s line if not."""
    data = _load_toml(text, source)
    clusters = data.get("clusters")
    listed = clusters if isinstance(clusters, list) else []
    _check_benign_patterns(listed, text, source)
    _check_unique_names(listed, text, source)
    _check_owners(listed, text, source)
    try:
        # Strict: TOML values are typed, so "24" or true where a number belongs is a mistake
        # (lax validation read them as 24.0 and 1.0). Strict tuples take no lists: TOML's
        # arrays become tuples first.
        config = Config.model_validate(_tuples(data), strict=True)
    except ValidationError as exc:
        from bot.config_lines import describe_errors

        raise ConfigError(describe_errors(exc, text, source)) from exc
    _check_window(config, data, text, source)
    return config


def _load_toml(text: str, source: str) -> dict[str, Any]:
    """``text`` as TOML; a ``ConfigError`` for a syntax error or a value nested too deep."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{source}: {exc}") from exc
    except RecursionError as exc:
        from bot.config_lines import deep_value, too_deep

        raise ConfigError(too_deep(source, *deep_value(text))) from exc
    if (path := _deep_path(data)) is not None:
        from bot.config_lines import too_deep, top_line

        raise ConfigError(too_deep(source, top_line(text, path[0]), path[0]))
    return data


def _check_benign_patterns(clusters: list[Any], text: str, source: str) -> None:
    """Every cluster's ``benign_patterns`` compile (a bad one is named with its line)."""
    for index, cluster in enumerate(clusters):
        patterns = cluster.get("benign_patterns", []) if isinstance(cluster, dict) else []
        for pattern in patterns if isinstance(patterns, list) else []:
            if not isinstance(pattern, str):
                continue
            try:
                re.compile(pattern)
            except re.error as exc:
                line = _line_of(text, ("clusters", index, "benign_patterns"))
                raise ConfigError(
                    f"{source}:{line}: clusters.{index}.benign_patterns: "
                    f"bad regex {pattern!r}: {exc}"
                ) from exc


def _check_unique_names(clusters: list[Any], text: str, source: str) -> None:
    """No two clusters share a name (the second one is named with its line)."""
    seen: set[str] = set()
    for index, cluster in enumerate(clusters):
        name = cluster.get("name") if isinstance(cluster, dict) else None
        if isinstance(name, str) and name in seen:
            line = _line_of(text, ("clusters", index, "name"))
            raise ConfigError(f"{source}:{line}: clusters.{index}.name: cluster name "
                              f"{name!r} is used twice")
        if isinstance(name, str):
            seen.add(name)


def _check_owners(clusters: list[Any], text: str, source: str) -> None:
    """Every cluster's ``owners`` map users to Slack user ids (a bad one named with its line)."""
    for index, cluster in enumerate(clusters):
        owners = cluster.get("owners", {}) if isinstance(cluster, dict) else {}
        for user, slack_id in (owners.items() if isinstance(owners, dict) else ()):
            if isinstance(slack_id, str) and not SLACK_USER_ID.match(slack_id):
                line = _line_of(text, ("clusters", index, "owners", user))
                raise ConfigError(f"{source}:{line}: clusters.{index}.owners.{user}: "
                                  f"{slack_id!r} is {NOT_A_USER_ID}")


def _check_window(config: Config, data: dict[str, Any], text: str, source: str) -> None:
    """``redis.window_len`` exceeds ``thresholds.window``: else every windowed rule would be
    starved of history on a warm read."""
    kept, window = config.redis.window_len, config.thresholds.window
    if kept <= window:
        key = ("redis", "window_len") if "window_len" in data.get("redis", {}) else (
            "thresholds", "window")
        line = _line_of(text, key)
        raise ConfigError(f"{source}:{line}: {'.'.join(key)}: redis.window_len ({kept}) must be "
                          f"greater than thresholds.window ({window}): the rules read that "
                          "many previous values and the step judged")


def _line_of(text: str, key: Sequence[str | int]) -> int | None:
    """The line of ``key`` in ``text``, for a :class:`ConfigError`: the locator's module is
    imported only when a file is refused (``bot.config_lines``)."""
    from bot.config_lines import KeyLocator

    return KeyLocator(text).line_for(key)


def _tuples(value: Any) -> Any:
    """``value`` with every list (a TOML array) turned into a tuple, at any depth."""
    if isinstance(value, list):
        return tuple(_tuples(item) for item in value)
    if isinstance(value, dict):
        return {key: _tuples(item) for key, item in value.items()}
    return value


def _deep_path(data: dict[str, Any]) -> tuple[str, ...] | None:
    """The key path of a value nested deeper than ``MAX_CONFIG_DEPTH`` (walked without
    recursion), or ``None``."""
    stack: list[tuple[Any, tuple[str, ...]]] = [(data, ())]
    while stack:
        value, path = stack.pop()
        if len(path) > MAX_CONFIG_DEPTH:
            return path
        if isinstance(value, dict):
            stack.extend((v, (*path, str(k))) for k, v in value.items())
        elif isinstance(value, list):
            stack.extend((v, (*path, str(i))) for i, v in enumerate(value))
    return None
