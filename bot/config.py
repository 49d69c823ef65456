"""``jobtables.toml``: the roster and settings file, loaded with line-precise errors.

Policy: the file is re-read at the start of every sweep (CONTRACT §2), so edits apply on the
next sweep. Secrets never live here: Slack tokens come from the environment (``bot.settings``).
A bad file raises :class:`ConfigError`, whose message names the file, the line and the key.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from bot.errors import UserError
from probes.config import ClusterConfig
from probes.rollouts import ReadPlan
from report.deep_probe import DeepProbeSettings
from report.settings import BucketRules, ReportSettings, Thresholds


class ConfigError(UserError):
    """The config file is missing, unreadable or invalid."""


class _Strict(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class MetricsSection(_Strict):
    aliases: dict[str, str] = Field(default_factory=dict)


class RedisSection(_Strict):
    url: str = "redis://127.0.0.1:6379/0"
    key_prefix: str = "jobtables:"
    window_len: int = 200
    """Metric points kept per run and metric (capped list)."""
    expire_hours: float = 72.0
    """How long a finished run's windows and alert state outlive it."""


class SlackSection(_Strict):
    channel: str | None = None
    sweep_every_minutes: float = 30.0
    no_kill: bool = False
    operators: tuple[str, ...] = ()
    owners: dict[str, str] = Field(default_factory=dict)
    cache_seconds: float = 120.0
    """A cached sweep younger than this answers ``/jobs`` directly (its age is shown)."""
    incident_dir: str = "./incidents"
    """Where salvage evidence and failure diagnoses are written (also kept in Redis)."""

    @field_validator("sweep_every_minutes")
    @classmethod
    def _positive(cls, v: float) -> float:
        if v <= 0:
            raise ValueError("must be > 0")
        return v


class ReportSection(_Strict):
    width: int = Field(default=100, ge=40, le=400)
    ablation_patterns: tuple[str, ...] | None = None


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

    period_hours: float = Field(default=24.0, gt=0)
    """One parent message per this many hours (UTC-aligned; 24 = one per day)."""
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
        return v

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


def load_config(path: Path) -> Config:
    """Read and validate ``path``; raise :class:`ConfigError` naming the line and key."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise ConfigError(f"{path}: no such config file") from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read: {exc}") from exc
    return parse_config(text, source=str(path))


def parse_config(text: str, *, source: str = "<config>") -> Config:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{source}: {exc}") from exc
    clusters = data.get("clusters")
    for index, cluster in enumerate(clusters if isinstance(clusters, list) else []):
        patterns = cluster.get("benign_patterns", []) if isinstance(cluster, dict) else []
        for pattern in patterns if isinstance(patterns, list) else []:
            if not isinstance(pattern, str):
                continue
            try:
                re.compile(pattern)
            except re.error as exc:
                line = _KeyLocator(text).line_for(("clusters", index, "benign_patterns"))
                raise ConfigError(
                    f"{source}:{line}: clusters.{index}.benign_patterns: "
                    f"bad regex {pattern!r}: {exc}"
                ) from exc
    try:
        return Config.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(_describe(exc, text, source)) from exc


def _describe(exc: ValidationError, text: str, source: str) -> str:
    locator = _KeyLocator(text)
    lines = []
    for err in exc.errors():
        loc = tuple(p for p in err["loc"] if p not in ("slurm", "kubernetes", "replay"))
        key = ".".join(str(p) for p in loc) or "(top level)"
        line = locator.line_for(loc)
        where = f"{source}:{line}" if line else source
        msg = err["msg"]
        if err["type"] == "extra_forbidden":
            msg = "unknown key"
        elif err["type"] == "union_tag_invalid":
            msg = 'kind must be "slurm", "kubernetes" or "replay"'
        lines.append(f"{where}: {key}: {msg}")
    return "; ".join(lines)


_TABLE = re.compile(r"^\s*\[(\[)?\s*([A-Za-z0-9_.\"-]+)\s*\]?\]\s*(#.*)?$")
_KEY = re.compile(r"^\s*(\"[^\"]+\"|[A-Za-z0-9_-]+)\s*=")


class _KeyLocator:
    """Maps a key path such as ``('clusters', 1, 'host')`` to its 1-based line in the file."""

    def __init__(self, text: str) -> None:
        self._lines: dict[tuple[str | int, ...], int] = {}
        table: tuple[str | int, ...] = ()
        counts: dict[tuple[str, ...], int] = {}
        for number, raw in enumerate(text.splitlines(), start=1):
            if m := _TABLE.match(raw):
                parts = tuple(p.strip('"') for p in m.group(2).split("."))
                if m.group(1):
                    idx = counts.get(parts, -1) + 1
                    counts[parts] = idx
                    table = (*parts, idx)
                else:
                    table = parts
                self._lines.setdefault(table, number)
            elif m := _KEY.match(raw):
                self._lines.setdefault((*table, m.group(1).strip('"')), number)

    def line_for(self, loc: Sequence[str | int]) -> int | None:
        path = tuple(loc)
        while path:
            if path in self._lines:
                return self._lines[path]
            path = path[:-1]
        return None
