"""Collapse warnings: one DM per collapse episode, with the evidence and the action buttons.

Policy: a job flagged ``collapse`` opens an *episode* (``cluster:job`` plus the first collapse
step). The episode lives in Redis, so a restarted bot or another replica sends no second DM;
it stays open until someone presses a button. After ``keep_running``/``acknowledge`` only a
collapse on a later step than the ones already shown opens a new episode; ``snooze`` silences
the job for :data:`SNOOZE_HOURS`. The DM goes to the owner (``slack.owners`` maps the cluster
user to a Slack id, opened with ``conversations.open``), else to ``slack.channel``. Buttons
carry the job ref in ``value`` (``action_id`` is the same on every message). With
``no_kill``, or for an ``ablation-exempt`` / ``no-kill`` run, there is no cancel button: the
message is a recommendation with an ``acknowledge`` button, and (seed: "capture the evidence
that disappears at termination, record it, report it, and leave the job running") the evidence
a cancel would have salvaged is written as an incident before the DM, which names its file.
While Redis is down, a process
remembers its own episodes so it does not repeat itself; it cannot know about other replicas.
Alerts are evaluated after every scheduled sweep (the monitor), not after ``/jobs`` queries.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import structlog
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.web.async_client import AsyncWebClient

from bot.config import Config
from bot.incidents import salvage_record, write_incident
from bot.store import RedisStore, StoreUnavailable
from bot.sweep import job_facts
from probes.models import ACTIVE_STATES, ClusterFacts
from report.cells import format_value as _fmt
from report.models import JobDetail
from report.trend import sparkline

log = structlog.get_logger(__name__)

SNOOZE_HOURS = 4.0
SPARK_POINTS = 20
CANCEL, KEEP, SNOOZE, ACKNOWLEDGE = "cancel_salvage", "keep_running", "snooze", "acknowledge"


def job_ref(detail: JobDetail) -> str:
    return f"{detail.report.cluster}:{detail.report.job_id}"


def episode_name(cluster: str, job_id: str) -> str:
    return f"episode:{cluster}:{job_id}"


def cancel_allowed(detail: JobDetail, config: Config) -> bool:
    """False when the run must never be cancelled from Slack (no-kill, ablation-exempt)."""
    flags = set(detail.report.flags)
    return not (config.slack.no_kill or "ablation-exempt" in flags or "no-kill" in flags)


def needs_alert(detail: JobDetail) -> bool:
    return "collapse" in detail.report.flags and detail.report.state in ACTIVE_STATES


def evidence_lines(detail: JobDetail) -> list[str]:
    """One line per signal (value vs window), then sparklines of the key metrics."""
    lines = []
    for ev in detail.evidence:
        mark = "🔴" if ev.fired else "⚪"
        lines.append(
            f"{mark} `{ev.signal}` step {ev.step}: {_fmt(ev.value)} vs window mean "
            f"{_fmt(ev.window_mean)} ({len(ev.window)} pts) {sparkline(ev.window, len(ev.window))}"
            f" — {ev.why}"
        )
    for name in ("reward", "entropy", "grad_norm", "log_ratio_abs_mean", "loss"):
        values = [p.values[name] for p in detail.history if name in p.values]
        if len(values) >= 2:
            lines.append(f"`{name}` {sparkline(values, SPARK_POINTS)} last {_fmt(values[-1])}")
    return lines


def collapse_blocks(detail: JobDetail, *, can_cancel: bool,
                    evidence_path: str | None = None) -> list[dict[str, Any]]:
    """The Block Kit message for one collapse episode (``evidence_path``: no-kill record)."""
    job = detail.report
    banked = f"banked checkpoint: step {job.banked_step}" if job.banked_step is not None else (
        "no banked checkpoint found"
    )
    head = (
        f"*Collapse on `{job_ref(detail)}` {job.name}* (owner {job.user or 'unknown'})\n"
        f"step {job.step if job.step is not None else '—'}, collapse at step "
        f"{detail.collapse_step if detail.collapse_step is not None else '—'}; {banked}"
    )
    why = job.recommendation.why if job.recommendation else "collapse rule fired"
    body = "\n".join(evidence_lines(detail))[:2900] or "(no signal evidence recorded)"
    blocks: list[dict[str, Any]] = [
        {"type": "section", "text": {"type": "mrkdwn", "text": head[:3000]}},
        {"type": "section", "text": {"type": "mrkdwn", "text": body}},
        {"type": "context", "elements": [{"type": "mrkdwn", "text": why[:2000]}]},
    ]
    if evidence_path is not None:
        note = f"Evidence recorded (the job keeps running): `{evidence_path}`"
        blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": note[:2000]}]})
    blocks.append({"type": "actions", "block_id": "collapse_actions",
                   "elements": _buttons(detail, can_cancel=can_cancel)})
    return blocks


def _button(action_id: str, text: str, value: str, **extra: Any) -> dict[str, Any]:
    return {"type": "button", "action_id": action_id, "value": value,
            "text": {"type": "plain_text", "text": text}, **extra}


def _buttons(detail: JobDetail, *, can_cancel: bool) -> list[dict[str, Any]]:
    ref = job_ref(detail)
    if not can_cancel:
        return [_button(ACKNOWLEDGE, "Acknowledge (recommendation only)", ref)]
    banked = detail.report.banked_step
    confirm = {
        "title": {"type": "plain_text", "text": "Cancel and salvage?"},
        "text": {"type": "mrkdwn", "text": (
            f"Evidence (log tail, metric window, scheduler record) is saved first, then "
            f"`{ref}` is cancelled. Banked step: {banked if banked is not None else 'none'}."
        )[:300]},
        "confirm": {"type": "plain_text", "text": "Salvage and cancel"},
        "deny": {"type": "plain_text", "text": "Keep it"},
        "style": "danger",
    }
    return [
        _button(CANCEL, "Cancel & salvage", ref, style="danger", confirm=confirm),
        _button(KEEP, "Keep running", ref),
        _button(SNOOZE, f"Snooze {SNOOZE_HOURS:g}h", ref),
    ]


class Alerter:
    """Sends collapse DMs for new episodes found in a sweep."""

    def __init__(
        self,
        *,
        store: RedisStore,
        client: AsyncWebClient,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self._store = store
        self._client = client
        self._clock = clock
        self._local: dict[str, dict[str, Any]] = {}
        """Episodes this process opened, for when Redis is unavailable."""

    async def process(self, details: list[JobDetail], config: Config, *,
                      facts: Sequence[ClusterFacts] = ()) -> list[str]:
        """DM every new collapse episode in ``details``; return the refs alerted.

        ``facts`` (the sweep's raw facts) give a no-kill evidence record its full log tail.
        """
        sent = []
        for detail in details:
            if needs_alert(detail) and await self._open_episode(detail, config, facts):
                sent.append(job_ref(detail))
        return sent

    async def _open_episode(self, detail: JobDetail, config: Config,
                            facts: Sequence[ClusterFacts]) -> bool:
        job = detail.report
        step = detail.collapse_step if detail.collapse_step is not None else (job.step or 0)
        name = episode_name(job.cluster, job.job_id)
        try:
            doc = await self._store.get_doc(name)
            if not self._is_new(doc, step):
                if doc and doc.get("state") == "open" and step > doc.get("last_step", step):
                    await self._store.put_doc(name, {**doc, "last_step": step},
                                              ttl_s=self._ttl(config))
                return False
            claimed = await self._store.put_doc(f"{name}:{step}", {"by": "alerter"},
                                                ttl_s=self._ttl(config), only_new=True)
            if not claimed:
                return False
        except StoreUnavailable as exc:
            log.warning("episode state unavailable; using process memory", error=str(exc))
            doc = self._local.get(name)
            if not self._is_new(doc, step):
                return False
        evidence = None
        if not cancel_allowed(detail, config):
            evidence = await self._record_evidence(detail, facts, config)
        record = await self._send(detail, config, step, evidence)
        if record is None:
            return False
        self._local[name] = record
        try:
            await self._store.put_doc(name, record, ttl_s=self._ttl(config))
        except StoreUnavailable as exc:
            log.warning("episode not saved", ref=job_ref(detail), error=str(exc))
        return True

    def _is_new(self, doc: dict[str, Any] | None, step: int) -> bool:
        if doc is None:
            return True
        if doc.get("state") == "open":
            return False
        if doc.get("action") == SNOOZE:
            until = datetime.fromisoformat(doc.get("snoozed_until", "1970-01-01T00:00:00+00:00"))
            if self._clock() < until:
                return False
        return bool(step > int(doc.get("last_step", -1)))

    @staticmethod
    def _ttl(config: Config) -> float:
        return config.redis.expire_hours * 3600

    async def _record_evidence(self, detail: JobDetail, facts: Sequence[ClusterFacts],
                               config: Config) -> Path | None:
        """No cancel will salvage this run: write its evidence now (file, then Redis)."""
        job = detail.report
        record = salvage_record(detail, job_facts(facts, job.cluster, job.job_id),
                                history=detail.history, actor=None, at=self._clock())
        try:
            path = await asyncio.to_thread(write_incident, record,
                                           Path(config.slack.incident_dir))
        except OSError as exc:
            log.error("no-kill evidence not written", ref=job_ref(detail), error=str(exc))
            return None
        try:
            await self._store.put_doc(f"incident:{record.id}", record.model_dump(mode="json"),
                                      ttl_s=self._ttl(config))
        except StoreUnavailable as exc:
            log.warning("no-kill evidence kept on disk only", path=str(path), error=str(exc))
        return path

    async def _send(self, detail: JobDetail, config: Config, step: int,
                    evidence: Path | None = None) -> dict[str, Any] | None:
        job = detail.report
        owner = config.slack.owners.get(job.user or "")
        blocks = collapse_blocks(detail, can_cancel=cancel_allowed(detail, config),
                                 evidence_path=str(evidence) if evidence else None)
        text = f"Collapse on {job_ref(detail)} {job.name}"
        try:
            channel = await self._dm_channel(owner) if owner else config.slack.channel
            if channel is None:
                log.warning("collapse with nowhere to post", ref=job_ref(detail))
                return None
            posted = await self._client.chat_postMessage(channel=channel, text=text, blocks=blocks)
        except (SlackApiError, SlackClientError) as exc:
            log.error("collapse DM failed", ref=job_ref(detail), error=str(exc))
            return None
        now = self._clock()
        return {
            "state": "open", "first_step": step, "last_step": step, "opened_at": now.isoformat(),
            "cluster": job.cluster, "job_id": job.job_id, "user": job.user, "owner": owner,
            "channel": posted.get("channel", channel), "ts": posted.get("ts"),
            "can_cancel": cancel_allowed(detail, config),
            "evidence": str(evidence) if evidence else None,
        }

    async def _dm_channel(self, user: str) -> str:
        opened = await self._client.conversations_open(users=user)
        channel: str = opened["channel"]["id"]
        return channel


def closed_episode(doc: dict[str, Any], *, action: str, actor: str, at: datetime) -> dict[str, Any]:
    """The episode record after someone acted on it."""
    closed = {**doc, "state": "closed", "action": action, "closed_by": actor,
              "closed_at": at.isoformat()}
    if action == SNOOZE:
        closed["snoozed_until"] = (at + timedelta(hours=SNOOZE_HOURS)).isoformat()
    return closed
