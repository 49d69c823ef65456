"""Job-end DMs to the job's owner: failed, completed, stalled / zombie; ``/jobs notify on|off``.

Policy: the DMs follow the scheduled sweep's changes (:func:`report.changes.diff`), which are
computed once per interval by the replica that won the tick, so each end is told once, also
across restarts and replicas. The owner comes from the owners mapping
(``bot.actions.owner_of``); a job without a mapped owner gets no DM (the day's thread still
has it). What each DM says:

* ``failed``: the first real fault (traceback, OOM, ...; a time limit is not one), the trend
  line (for ``child-failed`` the first real traceback above the elastic summary), and the
  recommendation;
* ``finished``: the completion, and the recommendation, which names the cleanup routine;
* ``stalled``: stall or zombie, with the trend and the recommendation.

Array tasks that ended alike are one DM (``×N``). ``/jobs notify off`` is kept per Slack user
in Redis (``doc:notify:{user}``, a year's TTL, renewed by every change of mind); ``on`` is the
default. All cluster text is escaped for mrkdwn; a failed DM is logged and never stops others.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import structlog
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.web.async_client import AsyncWebClient

from bot.actions import owner_of
from bot.config import Config
from bot.store import RedisStore, StoreUnavailable
from bot.sweep import SweepResult
from report.changes import Change
from report.chunks import escape_mrkdwn
from report.models import JobDetail

log = structlog.get_logger(__name__)

TOLD = frozenset({"failed", "finished", "stalled"})
PREF_TTL_S = 365 * 24 * 3600.0
_FENCE = "```"


def pref_name(user: str) -> str:
    return f"notify:{user}"


def _first_fault(detail: JobDetail) -> str | None:
    for fault in detail.faults:
        if not fault.startswith("time-limit"):
            return fault
    return None


def _code(text: str, limit: int = 1500) -> str:
    body = escape_mrkdwn(text).replace(_FENCE, "ˋˋˋ")
    return f"{_FENCE}\n{body[:limit]}\n{_FENCE}"


def dm_text(change: Change, detail: JobDetail, count: int = 1) -> str:
    """The DM for one change (``count``: array tasks that ended alike)."""
    job = detail.report
    many = f" (×{count} tasks)" if count > 1 else ""
    ref = escape_mrkdwn(f"{job.cluster}:{job.job_id}")
    name = escape_mrkdwn(job.name)
    rec = job.recommendation
    advice = f"*Recommendation:* {escape_mrkdwn(rec.action)} — {escape_mrkdwn(rec.why)}" \
        if rec and rec.action != "none" else ""
    if change.kind == "failed":
        lines = [f"❌ *{name}* `{ref}`{many} ended {escape_mrkdwn(job.state.value)}."]
        fault = _first_fault(detail)
        if fault:
            lines += ["First real fault:", _code(fault)]
        if job.trend and job.trend != fault:
            lines.append(_code(job.trend))
        lines.append(advice or "*Recommendation:* diagnose before relaunching.")
    elif change.kind == "finished":
        lines = [f"✅ *{name}* `{ref}`{many} completed."]
        lines.append(advice or "No cleanup routine matched; nothing to do.")
    else:
        what = "zombie (all trials done, still RUNNING)" if "zombie" in job.flags else "stalled"
        lines = [f"⏸ *{name}* `{ref}`{many} is {what}.", _code(job.trend or "no progress")]
        if advice:
            lines.append(advice)
    lines.append("_Turn these off with `/jobs notify off`._")
    return "\n".join(line for line in lines if line)[:3000]


class Notifier:
    """Sends job-end DMs and keeps each user's on/off choice."""

    def __init__(self, *, store: RedisStore, client: AsyncWebClient) -> None:
        self._store = store
        self._client = client

    async def set_enabled(self, user: str, on: bool) -> str:
        """``/jobs notify on|off``: store the choice; the ephemeral answer."""
        try:
            await self._store.put_doc(pref_name(user), {"off": not on}, ttl_s=PREF_TTL_S)
        except StoreUnavailable as exc:
            log.warning("notify preference not saved", user=user, error=str(exc))
            return "⚠️ The bot's state store is unavailable; your choice was not saved."
        return ("Job-end DMs are *on*: you will hear when your jobs fail, complete or stall."
                if on else "Job-end DMs are *off*. `/jobs notify on` turns them back on.")

    async def enabled(self, user: str) -> bool:
        try:
            doc = await self._store.get_doc(pref_name(user))
        except StoreUnavailable:
            return True  # the default; a DM too many beats a silent failure
        return not (isinstance(doc, dict) and doc.get("off"))

    async def process(self, changes: Sequence[Change], result: SweepResult,
                      config: Config) -> int:
        """DM the owners of jobs that failed, completed or stalled; returns the DMs sent."""
        groups: dict[tuple[str, str, str, str], list[Change]] = {}
        for change in changes:
            detail = result.details.get((change.cluster, change.job_id))
            owner = owner_of(detail.report.user, config) if detail else None
            if change.kind in TOLD and owner:
                groups.setdefault((owner, change.kind, change.cluster, change.name),
                                  []).append(change)
        sent = 0
        for (owner, _, _, _), members in groups.items():
            if not await self.enabled(owner):
                continue
            first = members[0]
            detail = result.details[(first.cluster, first.job_id)]
            sent += await self._send(owner, dm_text(first, detail, len(members)))
        return sent

    async def _send(self, owner: str, text: str) -> int:
        try:
            opened: Any = await self._client.conversations_open(users=owner)
            await self._client.chat_postMessage(channel=opened["channel"]["id"], text=text)
        except (SlackApiError, SlackClientError) as exc:
            log.error("job-end DM failed", owner=owner, error=str(exc))
            return 0
        return 1
