"""Prometheus metrics for the bot, on a registry of its own.

Policy: one :class:`Telemetry` per app instance with its own ``CollectorRegistry`` (two apps
in one test process must not collide on the global registry). ``GET /metrics`` renders it.
Metric names follow Prometheus conventions (``_seconds``, ``_total``). Labels are cluster
names, Slack method names and error codes only: never a job, a user or a token (``/metrics``
is unauthenticated).
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

CONTENT_TYPE = CONTENT_TYPE_LATEST


class Telemetry:
    """The counters and histograms the bot updates."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.sweep_duration = Histogram(
            "jobtables_sweep_duration_seconds",
            "Wall time of one sweep, labelled by each cluster it covered",
            ["cluster"],
            registry=self.registry,
            buckets=(0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300),
        )
        self.probe_errors = Counter(
            "jobtables_probe_errors_total",
            "Clusters found unreachable in a sweep, and failed cancels",
            ["cluster"],
            registry=self.registry,
        )
        self.slack_api_errors = Counter(
            "jobtables_slack_api_errors_total",
            "Slack Web API calls that failed (after the SDK's retries), by Slack's error code",
            ["method", "error"],
            registry=self.registry,
        )
        self.response_url_errors = Counter(
            "jobtables_response_url_errors_total",
            "Answers to a slash command or button (response_url) that Slack did not accept",
            ["surface", "error"],
            registry=self.registry,
        )
        self.cancels = Counter(
            "jobtables_cancels_total",
            "Cancel-and-salvage attempts by outcome",
            ["cluster", "outcome"],
            registry=self.registry,
        )
        self.store_errors = Counter(
            "jobtables_store_unavailable_total",
            "Operations that found Redis unavailable",
            registry=self.registry,
        )
        self.commands = Counter(
            "jobtables_commands_total",
            "Slash commands answered, by command and source of the answer",
            ["command", "source"],
            registry=self.registry,
        )

    def render(self) -> bytes:
        """The text exposition format for ``GET /metrics``."""
        body: bytes = generate_latest(self.registry)
        return body
