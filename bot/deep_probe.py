"""The deep probe in the bot: ``jobtables probe``, the Slack "Deep-probe" button, and auto-probe.

Policy:

* :func:`run_deep_probe` reads one SLURM job over one connection (``probes.deep_read``), or
  one Kubernetes job through its API (its log's printed completions and series: a pod's files
  are out of reach), builds its row exactly as a sweep would (``report.judge.build_report`` on
  that job alone) and attaches the verdict (``report.deep_probe``) as the row's
  ``deep_probe``. A replay cluster is a usage error (a recording has no rollouts to read).
* The button (``action_id`` ``deep_probe``, value ``cluster:job``) is acked by Bolt's handler
  first; the probe runs as a tracked task and its verdict is posted in the message's thread.
  The value is only an id to look up: it is validated before anything runs. The probe only
  reads and posts a verdict, so anyone who sees the message may press it (as anyone may ask
  ``/job``; CONTRACT §2 keeps only *destructive* buttons to the owner and the operators, and
  the verdict's Cancel is checked as any cancel); every press that runs a probe is audited
  (actor, job, verdict or failure), as the refused ones are. A job's probe runs once at a
  time, whichever message's button was pressed (the alert, the offer and every ``/job`` answer
  carry one): a Redis lock across replicas, and ``Bot.probing`` within each while Redis is
  down (:func:`one_at_a_time`, the auto-probe's too); a press while it runs (a double click,
  a replayed request, another message's button) is told so, audited ``duplicate`` and reads
  nothing, and an auto-probe meeting a press's leaves the run to the next sweep. Every collapse
  alert carries the button (``bot.messages``); pressed on a stored alert (a collapse DM, a
  KILL verdict) or on a posted offer, a value naming another job than the message's is
  refused and audited, as for the other buttons.
* A KILL verdict offers ``cancel_salvage`` (handled by ``bot.actions``: same permission check,
  exactly-once lock and salvage as a collapse). With ``no_kill`` or an ``ablation-exempt`` /
  ``no-kill`` run it is a recommendation with an ``acknowledge`` button. Its episode records
  whether the posted message offered Cancel (``can_cancel``: a cancel press on one that did not
  is refused even after ``no_kill`` is lifted) and the verdict itself (an interrupted cancel's
  reconciliation rebuilds the verdict message from it).
* After each scheduled sweep, with ``[deep_probe] auto = true`` (probe, post the verdict) or
  ``offer = true`` (post the button), every running ``deep-probe`` run is handled ONCE: it goes
  to the owner's DM (``slack.owners``) or ``slack.channel`` and is recorded in Redis
  (``doc:deep_probe:{cluster}:{job}``, kept ``redis.expire_hours``) so no sweep, restart or
  replica repeats it. A failed auto-probe releases that claim: the next sweep tries again.
  An array run (a grid in waves, each task flagged as it starts) is one run: offered once, for
  its first task, the message counting its tasks (``doc:deep_probe_run:{cluster}:{array}``).
* A ``deep-probe`` row in a ``/job`` answer carries the button too; pressed on that ephemeral
  answer, the verdict comes back ephemerally to the presser (an ephemeral message has no thread
  and no ts a button's episode could be bound to). A verdict with buttons (KILL on a running
  job) is DMed to the presser instead, where its episode binds them, and the ephemeral reply
  says so; if that DM fails, the ephemeral verdict carries no button that could not be honoured.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import structlog
from slack_sdk.errors import SlackApiError, SlackClientError

from bot.alerts import (
    ACKNOWLEDGE,
    CANCEL,
    cancel_allowed,
    episode_name,
    job_submitted,
    job_uid,
    message_key,
    pressed_episode,
    same_instance,
)
from bot.cluster_names import remembered, renames
from bot.config import Config
from bot.delivery import NETWORK_ERRORS, dm_channel
from bot.errors import JobNotFoundError, UsageError, UserError
from bot.messages import DEEP_PROBE
from bot.owners import slack_owner
from bot.store import StoreUnavailable
from probes.config import KubernetesCluster, SlurmCluster
from probes.errors import InvalidJobIdError, ProbeError
from probes.ids import scheduler_job, split_job_ref, validate_job_id
from probes.models import ClusterFacts, JobState
from probes.slurm.transport import RunnerFactory
from report.cells import one_line
from report.chunks import cut_text, inert, mrkdwn_object, public_reason, strong
from report.chunks import escape_code as esc
from report.deep_probe import judge_rollouts, not_applicable
from report.judge import build_report
from report.models import JobDetail, JobReport

if TYPE_CHECKING:
    from slack_bolt.async_app import AsyncApp

    from bot.app import Bot
    from bot.presses import ActionPress
    from bot.sweep import SweepResult

log = structlog.get_logger(__name__)

Respond = Callable[..., Awaitable[Any]]


def memory_name(cluster: str, job_id: str) -> str:
    return f"deep_probe:{cluster}:{job_id}"


def probed_cluster(config: Config, name: str | None) -> SlurmCluster | KubernetesCluster:
    """The cluster ``name`` names, or the only SLURM or Kubernetes one (a replay cluster is a
    recording: it has no rollouts to read)."""
    live = [c for c in config.clusters if isinstance(c, SlurmCluster | KubernetesCluster)]
    if name is None:
        if len(live) != 1:
            raise UsageError("name the job's cluster (--cluster NAME or CLUSTER:ID): "
                             f"{len(live)} SLURM and Kubernetes clusters are configured")
        return live[0]
    match = [c for c in config.clusters if c.name == name]
    if not match:
        raise UsageError(f"unknown cluster {name!r}")
    if not isinstance(match[0], SlurmCluster | KubernetesCluster):
        raise UsageError(f"cluster {name!r} is {match[0].kind}: the deep probe reads SLURM "
                         "and Kubernetes jobs")
    return match[0]


async def run_deep_probe(
    config: Config, cluster_name: str | None, job_id: str, *,
    runner_factory: RunnerFactory | None = None, now: datetime | None = None,
) -> JobDetail:
    """The job's row with its ``deep_probe`` verdict (raises ``UserError``/``ProbeError``);
    a job that is no RL run comes back without one (``report.deep_probe.not_applicable``)."""
    from probes.deep_read import read_job, read_k8s_job

    validate_job_id(job_id)
    cluster = probed_cluster(config, cluster_name)
    aliases = dict(config.metrics.aliases)
    if isinstance(cluster, KubernetesCluster):
        found = await read_k8s_job(cluster, job_id, aliases=aliases)
    else:
        found = await read_job(cluster, job_id, config.deep_probe.plan, aliases=aliases,
                               runner_factory=runner_factory)
    if found is None:
        raise JobNotFoundError(f"no job {job_id} on cluster {cluster.name!r}")
    facts, rollouts, related = found
    moment = now or datetime.now(UTC)
    # Judged with the jobs read beside it, as ``jobtables job`` judges it (a chain restart's
    # successor): the probe's row is the one the sweep shows.
    cluster_facts = ClusterFacts(name=cluster.name, kind=cluster.kind, status="ok",
                                 collected_at=moment, jobs=(facts, *related))
    _, details = build_report([cluster_facts], settings=config.report_settings(), now=moment,
                              histories=None, memory=None)
    detail = details[(cluster.name, facts.record.job_id)].model_copy(
        update={"instance": (job_uid(facts), job_submitted(facts))})  # the buttons' binding
    if not_applicable(detail.report) is not None:
        return detail  # no RL run: no verdict (report.deep_probe.not_applicable)
    verdict = judge_rollouts(rollouts, config.deep_probe.judge,
                             pending=facts.record.state is JobState.PENDING,
                             thresholds=config.report_settings().thresholds)
    return detail.model_copy(update={"report": detail.report.model_copy(
        update={"deep_probe": verdict})})


# -- Slack ------------------------------------------------------------------------------------


def code(text: str) -> str:
    """For inside an inline code span: no backtick to close it, on one line."""
    return esc(one_line(text))


def mrkdwn(text: str) -> str:
    """Cluster text made inert for mrkdwn (CONTRACT §7: ``&``, ``<``, ``>``; each backtick a
    look-alike, so it cannot pair with the bot's own code spans; a word holding ``*`` ``_``
    ``~`` in a code span, so it cannot format itself: ``report.chunks.inert``)."""
    return inert(text)


def _button(action_id: str, text: str, value: str, **extra: Any) -> dict[str, Any]:
    return {"type": "button", "action_id": action_id, "value": value,
            "text": {"type": "plain_text", "text": text}, **extra}


def offer_blocks(detail: JobDetail, tasks: Sequence[str] = ()) -> list[dict[str, Any]]:
    """The "new run, deep-probe it" message with its button; ``tasks``: the array run's
    tasks running now (one offer for the run, its button for the first task)."""
    job = detail.report
    ref = f"{job.cluster}:{job.job_id}"
    why = job.recommendation.why if job.recommendation else "new or untested RL run"
    text = (f"*New RL run* `{code(ref)}` {strong(esc(one_line(job.name)))}: don't trust its "
            "row yet.\n"
            f"{mrkdwn(why)}")
    if scheduler_job(job.job_id) != job.job_id:
        shown = ", ".join(code(t) for t in tasks[:RUN_TASKS_SHOWN]) + (
            f" +{len(tasks) - RUN_TASKS_SHOWN} more" if len(tasks) > RUN_TASKS_SHOWN else "")
        run = code(f"{job.cluster}:{scheduler_job(job.job_id)}")
        text += (f"\n{max(len(tasks), 1)} tasks of array `{run}` running ({shown}): offered "
                 "once for the run, its later tasks too; `/job` on another task offers its "
                 "own probe.")
    return [{"type": "section", "text": mrkdwn_object(cut_text(text, 3000))},
            {"type": "actions", "block_id": "deep_probe_actions",
             "elements": [_button(DEEP_PROBE, "Deep-probe", ref)]}]


REASONS_CHARS = 2900
"""A verdict's reasons section (a section holds 3,000 characters)."""
REASON_CHARS = 600
"""One reason's line at most: a longer one is cut, saying so."""


def _reason_lines(reasons: Sequence[str], ref: str) -> str:
    """Each reason on its line, escaped, whole reasons while they fit; what did not fit is
    counted and pointed at ``jobtables probe``, never sliced mid-entity or dropped unsaid."""
    lines: list[str] = []
    used = 0
    for index, reason in enumerate(reasons):
        line = cut_text(f"• {mrkdwn(reason)}", REASON_CHARS)
        if used + len(line) + 1 > REASONS_CHARS - 120:
            lines.append(f"… {len(reasons) - index} more reason(s) cut: `jobtables probe "
                         f"{code(ref)}` prints them all.")
            break
        lines.append(line)
        used += len(line) + 1
    return "\n".join(lines)


def verdict_blocks(detail: JobDetail, config: Config, *,
                   can_cancel: bool | None = None) -> list[dict[str, Any]]:
    """The verdict, its quoted reasons, and (KILL) cancel-and-salvage or a recommendation.

    ``can_cancel``: whether Cancel is offered (default: :func:`bot.alerts.cancel_allowed`)."""
    job = detail.report
    probe = job.deep_probe
    if probe is None:
        return []
    ref = f"{job.cluster}:{job.job_id}"
    read = probe.read
    head = (f"*Deep probe of* `{code(ref)}` {strong(esc(one_line(job.name)))}: "
            f"*{probe.verdict}*\n"
            f"read: {read.get('log_steps', 0)} logged steps, "
            f"{sum(d.get('samples', 0) for d in read.get('dumps', []))} rollout samples, "
            f"{read.get('trials', {}).get('sampled', 0)} trials")
    body = _reason_lines(probe.reasons, ref)
    blocks: list[dict[str, Any]] = [
        {"type": "section", "text": mrkdwn_object(cut_text(head, 3000))},
        {"type": "section", "text": mrkdwn_object(body or "(no reasons)")},
    ]
    if probe.verdict == "KILL" and job.state is JobState.RUNNING:
        if cancel_allowed(detail, config) if can_cancel is None else can_cancel:
            confirm = {
                "title": {"type": "plain_text", "text": "Cancel and salvage?"},
                "text": mrkdwn_object((
                    f"The deep probe says KILL. Evidence is saved first, then `{code(ref)}` is "
                    "cancelled.")[:300]),
                "confirm": {"type": "plain_text", "text": "Salvage and cancel"},
                "deny": {"type": "plain_text", "text": "Keep it"}, "style": "danger",
            }
            elements = [_button(CANCEL, "Cancel & salvage", ref, style="danger",
                                confirm=confirm)]
        else:
            blocks.append({"type": "context", "elements": [mrkdwn_object(
                           "no-kill: this is a recommendation; the job keeps running.")]})
            elements = [_button(ACKNOWLEDGE, "Acknowledge (recommendation only)", ref)]
        blocks.append({"type": "actions", "block_id": "deep_probe_verdict",
                       "elements": elements})
    return blocks


def _summary(detail: JobDetail) -> str:
    job = detail.report
    if job.deep_probe is None:
        return f"Deep-probe {job.cluster}:{job.job_id}?"
    return f"Deep probe of {job.cluster}:{job.job_id}: {job.deep_probe.verdict}"


def row_actions(detail: JobDetail) -> list[dict[str, Any]]:
    """The Deep-probe button under a ``deep-probe`` row (``/job``); nothing for other rows."""
    job = detail.report
    if "deep-probe" not in job.flags or job.state is not JobState.RUNNING:
        return []
    return [{"type": "actions", "block_id": "deep_probe_row",
             "elements": [_button(DEEP_PROBE, "Deep-probe", f"{job.cluster}:{job.job_id}")]}]


async def _post(bot: Bot, channel: str, detail: JobDetail, config: Config,
                thread_ts: str | None = None, *,
                tasks: Sequence[str] = ()) -> dict[str, Any] | None:
    job = detail.report
    text = _summary(detail)
    blocks = verdict_blocks(detail, config) if job.deep_probe else offer_blocks(detail, tasks)
    try:
        posted = await bot.client.chat_postMessage(channel=channel, text=text, blocks=blocks,
                                                   thread_ts=thread_ts)
    except (SlackApiError, SlackClientError, *NETWORK_ERRORS) as exc:  # a hung API times out
        log.error("deep-probe message failed", ref=f"{job.cluster}:{job.job_id}",
                  error=str(exc) or type(exc).__name__)
        return None
    data = dict(posted.data) if isinstance(posted.data, dict) else {}
    if job.deep_probe is None:
        await _bind_offer(bot, config, detail, str(data.get("channel") or channel),
                          str(data.get("ts") or ""))
    if job.deep_probe is not None and job.deep_probe.verdict == "KILL":
        await _open_episode(bot, config, detail, str(data.get("channel") or channel),
                            str(data.get("ts") or ""), can_cancel=offers_cancel(blocks))
    return data


def offer_key(channel: str, ts: str) -> str:
    """The index from a posted offer (channel, ts) to the run it offers to probe. Not an
    alert's ``message_key``: an offer has no episode, so its message takes no other button."""
    return f"deep_probe_offer:{channel}:{ts}"


async def _bind_offer(bot: Bot, config: Config, detail: JobDetail, channel: str,
                      ts: str) -> None:
    if not (channel and ts):
        return
    job = detail.report
    # The run's instance too (a Kubernetes uid, a SLURM submit time): a press once the id
    # names a later job is refused as stale (``_another_instance``), as on an alert.
    uid, submitted = detail.instance
    try:
        await bot.store.put_doc(offer_key(channel, ts),
                                {"cluster": job.cluster, "job_id": job.job_id,
                                 "uid": uid, "submitted": submitted, "job_name": job.name,
                                 "user": job.user},
                                ttl_s=config.redis.expire_hours * 3600)
    except StoreUnavailable as exc:
        log.warning("deep-probe offer not bound to its run", error=str(exc))


def offers_cancel(blocks: Sequence[dict[str, Any]]) -> bool:
    """Whether a message's buttons include ``cancel_salvage``."""
    return any(element.get("action_id") == CANCEL for block in blocks
               if block.get("type") == "actions" for element in block.get("elements", []))


async def _open_episode(bot: Bot, config: Config, detail: JobDetail, channel: str,
                        ts: str, *, can_cancel: bool) -> None:
    """A KILL verdict's buttons act like a collapse alert's: they are bound to this message,
    through an episode of its own (one per verdict message).

    The cancel press is checked against the stored episode (cluster, job id, uid, message,
    whether the message offered Cancel), never against the button value alone
    (``bot.actions``).
    """
    job = detail.report
    # The job instance read (a Kubernetes uid, a SLURM submit time): a press after the job
    # was re-created, or its id given to a later job, is refused as stale (bot.actions).
    uid, submitted = detail.instance
    # Its own key, never the collapse alerter's: a verdict shown to whoever pressed must not
    # read as the owner's collapse alert already sent (which would then never be DMed).
    name = f"{episode_name(job.cluster, job.job_id, uid)}:deep-probe:{ts}"
    record = {"cluster": job.cluster, "job_id": job.job_id, "uid": uid,
              "submitted": submitted, "name": name, "job_name": job.name, "user": job.user,
              "state": "open", "kind": "deep-probe", "channel": channel, "ts": ts,
              "can_cancel": can_cancel, "last_step": job.step or 0,
              "deep_probe": job.deep_probe.model_dump(mode="json") if job.deep_probe else None,
              "at": bot.clock().isoformat()}
    ttl = config.redis.expire_hours * 3600
    try:
        await bot.store.put_doc(name, record, ttl_s=ttl)
        if channel and ts:
            await bot.store.put_doc(message_key(channel, ts), {"episode": name}, ttl_s=ttl)
    except StoreUnavailable as exc:
        log.warning("deep-probe episode not saved; its buttons will be refused", error=str(exc))


async def on_button(bot: Bot, body: dict[str, Any], respond: Respond) -> None:
    """One Deep-probe press (already acked): probe, then post the verdict in the thread."""
    from bot.presses import ActionPress

    press = ActionPress.from_body(body)
    try:
        cluster, job_id = split_job_ref(press.value)
        if cluster is None:
            raise InvalidJobIdError("button value lacks a cluster")
    except InvalidJobIdError:
        # Audited like every press: a value that names no job is a tampered or replayed one.
        await _audit(bot, press, "?", "?", "rejected", detail=f"value {press.value[:200]!r}")
        await respond(text="That button carries no valid job reference.",
                      response_type="ephemeral", replace_original=False)
        return
    refusal = await _alert_refusal(bot, press, cluster, job_id)
    if refusal is not None:
        await respond(text=refusal, response_type="ephemeral", replace_original=False)
        return
    async with one_at_a_time(bot, cluster, job_id, user=press.user_id,
                             where=_where(press)) as mine:
        if not mine:
            await _already_running(bot, press, cluster, job_id, respond)
            return
        await _probe_and_post(bot, body, press, respond, cluster=cluster, job_id=job_id)


PRESS_LOCK_S = 900.0
"""How long a running probe's claim holds at most (a probe reads under its own deadlines)."""


def _where(press: ActionPress) -> str:
    return f"{press.channel_id or ''}:{press.message_ts or press.user_id}"


@asynccontextmanager
async def one_at_a_time(bot: Bot, cluster: str, job_id: str, *, user: str,
                        where: str) -> AsyncIterator[bool]:
    """Whether this caller (a press, or the scheduler's auto-probe) may probe the job now:
    one probe of a job at a time, whichever message's button was pressed (the alert, an
    offer, each ``/job`` answer carry one). A Redis lock across replicas, recording who and
    where; ``Bot.probing`` within this replica (all there is while Redis is down)."""
    ref, name = f"{cluster}:{job_id}", f"{cluster}:{job_id}:{DEEP_PROBE}"
    if ref in bot.probing:
        yield False
        return
    locked: bool | None = None  # None: Redis could not say
    try:
        locked = await bot.store.acquire(name, {"user": user, "where": where,
                                                "at": bot.clock().isoformat()},
                                         ttl_s=PRESS_LOCK_S)
    except StoreUnavailable as exc:
        log.warning("deep probe not deduplicated across replicas", error=str(exc))
    if locked is False:
        yield False
        return
    bot.probing.add(ref)
    try:
        yield True
    finally:
        bot.probing.discard(ref)
        if locked:
            try:
                await bot.store.release(name)
            except StoreUnavailable as exc:
                log.warning("deep-probe lock not released; it expires", error=str(exc))


async def _already_running(bot: Bot, press: ActionPress, cluster: str, job_id: str,
                           respond: Respond) -> None:
    """A press while the job's probe runs: told so (where its verdict goes), audited
    ``duplicate``; nothing more is read."""
    holder: dict[str, Any] = {}
    try:
        holder = await bot.store.holder(f"{cluster}:{job_id}:{DEEP_PROBE}") or {}
        await bot.store.audit({
            "actor": press.user_id, "team": press.team_id or "", "action": DEEP_PROBE,
            "cluster": cluster, "job_id": job_id, "outcome": "duplicate",
            "detail": f"a probe asked by {holder.get('user')} is running",
            "channel": press.channel_id or "", "ts": press.message_ts or ""})
    except StoreUnavailable as exc:
        log.warning("deep-probe duplicate press kept in the log only", user=press.user_id,
                    cluster=cluster, job_id=job_id, error=str(exc))
    ref = code(f"{cluster}:{job_id}")
    where = ("for this message; its verdict comes here once" if holder.get("where") ==
             _where(press) else "(asked from another message; its verdict goes there). Press "
             "again once it is done for a verdict here")
    await respond(text=f"A deep probe of `{ref}` is already running {where}. This press was "
                       "logged.", response_type="ephemeral", replace_original=False)


async def _probe_and_post(bot: Bot, body: dict[str, Any], press: ActionPress, respond: Respond,
                          *, cluster: str, job_id: str) -> None:
    config = bot.config.current()
    try:
        detail = await run_deep_probe(config, cluster, job_id)
    except (UserError, ProbeError) as exc:
        await _audit(bot, press, cluster, job_id, "failed", detail=str(exc))
        ref = code(f"{cluster}:{job_id}")
        await respond(text=f"Deep probe of `{ref}` failed: {mrkdwn(public_reason(str(exc)))}",
                      response_type="ephemeral", replace_original=False)
        return
    except Exception:
        ref = uuid.uuid4().hex[:8]
        log.exception("deep probe failed", ref=ref, value=press.value)
        await _audit(bot, press, cluster, job_id, "error", detail=f"reference {ref}")
        await respond(text=f"Something went wrong (reference `{ref}`); it has been logged.",
                      response_type="ephemeral", replace_original=False)
        return
    if (why := not_applicable(detail.report, command="/job")) is not None:
        await _audit(bot, press, cluster, job_id, "not applicable", detail=why)
        await respond(text=f"No deep probe: {mrkdwn(why)}", response_type="ephemeral",
                      replace_original=False)
        return
    verdict = detail.report.deep_probe
    await _audit(bot, press, cluster, job_id, verdict.verdict if verdict else "no verdict",
                 detail="")
    await _remember(bot, config, detail, by=press.user_id)
    if (body.get("container") or {}).get("is_ephemeral") or not press.channel_id:
        # An ephemeral `/job` answer has no thread and no message a button can be bound to.
        # A verdict with buttons (KILL on a running job) goes to the presser's DM, where its
        # episode binds them; the ephemeral reply says so. Otherwise it is answered in place.
        await _answer_ephemeral(bot, config, detail, press.user_id, respond)
        return
    await _post(bot, press.channel_id, detail, config, thread_ts=press.message_ts)


async def _audit(bot: Bot, press: ActionPress, cluster: str, job_id: str, outcome: str, *,
                 detail: str) -> None:
    """One press in the audit trail (who probed which job, what it said, or why nothing
    ran): anyone who sees the message may press Deep-probe, so the trail is what shows who did."""
    try:
        await bot.store.audit({
            "actor": press.user_id, "team": press.team_id or "", "action": DEEP_PROBE,
            "cluster": cluster, "job_id": job_id, "outcome": outcome, "detail": detail,
            "channel": press.channel_id or "", "ts": press.message_ts or ""})
    except StoreUnavailable as exc:
        log.warning("deep-probe press kept in the log only", error=str(exc), actor=press.user_id,
                    cluster=cluster, job_id=job_id, outcome=outcome)


async def _alert_refusal(bot: Bot, press: ActionPress, cluster: str, job_id: str
                         ) -> str | None:
    """Why the press may not probe (audited), or None. Refused: a press on a stored alert
    (collapse DM, KILL verdict) or a posted offer about another job than its value names (a
    button acts only on its message's job, whatever its value says), and one whose job's id
    now names a later job (another SLURM submit time, another Kubernetes uid). A ``/job``
    answer binds nothing (anyone may ask for any job); nor does an unreachable store: the
    probe only reads."""
    if not (press.channel_id and press.message_ts):
        return None
    try:
        # A batched alert's press finds the alert of the job its button names (bot.alerts).
        episode = await pressed_episode(bot.store, press.channel_id, press.message_ts,
                                        f"{cluster}:{job_id}") or (
            await bot.store.get_doc(offer_key(press.channel_id, press.message_ts)))
        if not episode:
            return None
        if (episode.get("cluster"), episode.get("job_id")) != (cluster, job_id):
            outcome, detail = "tampered", (f"episode is {episode.get('cluster')}:"
                                           f"{episode.get('job_id')}")
            reply = "That button does not belong to this alert; the attempt was logged."
        elif await _another_instance(bot, episode, cluster, job_id):
            outcome, detail = "stale", "the id names a later job"
            reply = (f"This alert was for an earlier job named `{code(f'{cluster}:{job_id}')}`; "
                     "the job under that id now is another one. Nothing was probed; this "
                     "attempt was logged.")
        else:
            return None
        await bot.store.audit({
            "actor": press.user_id, "team": press.team_id or "", "action": DEEP_PROBE,
            "cluster": cluster, "job_id": job_id, "outcome": outcome, "detail": detail,
            "channel": press.channel_id, "ts": press.message_ts})
    except StoreUnavailable as exc:
        log.warning("deep-probe press not checked against its alert", error=str(exc))
        return None
    log.warning("deep-probe press refused", why=outcome, value=press.value, user=press.user_id)
    return reply


async def _another_instance(bot: Bot, episode: dict[str, Any], cluster: str,
                            job_id: str) -> bool:
    """Whether the job now under the alert's id is provably another (``same_instance``), read
    by the one-job query; a job not found or a cluster not read leaves it to the probe."""
    if not (episode.get("submitted") or episode.get("uid")):
        return False
    try:
        result = await bot.sweeper.job(cluster, job_id)
    except (ProbeError, UserError):
        return False
    return not same_instance(episode, result.job_facts(cluster, job_id))


def _has_buttons(blocks: list[dict[str, Any]]) -> bool:
    return any(block.get("type") == "actions" for block in blocks)


async def _answer_ephemeral(bot: Bot, config: Config, detail: JobDetail, user_id: str,
                            respond: Respond) -> None:
    blocks = verdict_blocks(detail, config)
    if _has_buttons(blocks) and user_id:
        channel = await dm_channel(bot.client, user_id)
        if channel is None:
            log.error("deep-probe DM failed", user=user_id)
        posted = await _post(bot, channel, detail, config) if channel is not None else None
        if posted is not None:
            await respond(text=f"{_summary(detail)}. The verdict and its buttons are in your DM "
                               "with the bot.",
                          response_type="ephemeral", replace_original=False)
            return
        # No DM: show the verdict without buttons that no stored episode could honour.
        blocks = [block for block in blocks if block.get("type") != "actions"]
        blocks.append({"type": "context", "elements": [mrkdwn_object(
                       "The verdict could not be sent to your DM, so it has no buttons here; "
                       "press Deep-probe on a posted message to act on it.")]})
    await respond(text=_summary(detail), blocks=blocks, response_type="ephemeral",
                  replace_original=False)


async def _remember(bot: Bot, config: Config, detail: JobDetail, *, by: str,
                    only_new: bool = False) -> bool:
    job = detail.report
    doc = {"cluster": job.cluster, "job_id": job.job_id, "by": by,
           "at": bot.clock().isoformat(),
           "deep_probe": job.deep_probe.model_dump(mode="json") if job.deep_probe else None}
    try:
        return await bot.store.put_doc(memory_name(job.cluster, job.job_id), doc,
                                       ttl_s=config.redis.expire_hours * 3600, only_new=only_new)
    except StoreUnavailable as exc:
        log.warning("deep-probe verdict not remembered", error=str(exc))
        return not only_new


async def _known_as(bot: Bot, config: Config, job: JobReport,
                    renamed: Mapping[str, str]) -> bool:
    """Whether the run is remembered under an old name of its cluster (``renamed``: old ->
    new, :mod:`bot.cluster_names`); if so it is remembered under the new one too."""
    for old, new in renamed.items():
        if new != job.cluster:
            continue
        try:
            doc = await bot.store.get_doc(memory_name(old, job.job_id))
            if isinstance(doc, dict):
                await bot.store.put_doc(memory_name(job.cluster, job.job_id),
                                        {**doc, "cluster": job.cluster},
                                        ttl_s=config.redis.expire_hours * 3600,
                                        only_new=True)  # never over a newer verdict
                return True
        except StoreUnavailable as exc:
            log.warning("deep-probe memory under the old name unread", error=str(exc))
    return False


async def _forget(bot: Bot, cluster: str, job_id: str) -> None:
    try:
        await bot.store.delete_doc(memory_name(cluster, job_id))
    except StoreUnavailable as exc:
        log.warning("deep-probe claim not released", error=str(exc))


RUN_TASKS_SHOWN = 4
"""An array run's offer names at most this many of its running tasks."""


def _task_order(job_id: str) -> tuple[str, int, str]:
    """Sorts an array's tasks by number (``1056_2`` before ``1056_10``)."""
    task = job_id.partition("_")[2]
    return scheduler_job(job_id), int(task) if task.isdigit() else -1, job_id


async def _new_run(bot: Bot, config: Config, cluster: str, job_id: str,
                   offered: set[tuple[str, str]]) -> bool:
    """Whether ``job_id``'s run gets an offer now. An array task is one cell of a run in
    waves: the run is offered once, for its first task (the later tasks of this sweep and of
    later waves are not: one DM per run, not one per task), claimed in Redis so that no
    later sweep, restart or replica offers it again. Any other job is its own run."""
    run = scheduler_job(job_id)
    if run == job_id:
        return True
    if (cluster, run) in offered:
        return False
    offered.add((cluster, run))
    try:
        return await bot.store.put_doc(f"deep_probe_run:{cluster}:{run}", {"first": job_id},
                                       ttl_s=config.redis.expire_hours * 3600, only_new=True)
    except StoreUnavailable as exc:
        log.warning("deep-probe run claim unavailable; offered once this sweep", error=str(exc))
        return True


async def after_sweep(bot: Bot, result: SweepResult, config: Config) -> list[str]:
    """Offer (or, with ``auto``, run) the deep probe once per newly flagged running run (an
    array run once, for its first task)."""
    handled: list[str] = []
    if not (config.deep_probe.auto or config.deep_probe.offer):
        return handled
    flagged = sorted((d for d in result.details.values()
                      if "deep-probe" in d.report.flags and d.report.state is JobState.RUNNING),
                     key=lambda d: (d.report.cluster, *_task_order(d.report.job_id)))
    offered: set[tuple[str, str]] = set()
    renamed = renames(await remembered(bot.store), config) if flagged else {}
    for detail in flagged:
        job = detail.report
        if await _known_as(bot, config, job, renamed):
            continue  # offered under the cluster's old name (renamed in the config)
        if not await _remember(bot, config, detail, by="scheduler", only_new=True):
            continue  # already offered or probed: the run's memory says so
        if not await _new_run(bot, config, job.cluster, job.job_id, offered):
            continue  # a task of an array run already offered
        live = result.job_facts(job.cluster, job.job_id)
        shown = detail.model_copy(update={"instance": (job_uid(live), job_submitted(live))})
        if config.deep_probe.auto:
            try:
                async with one_at_a_time(bot, job.cluster, job.job_id, user="scheduler",
                                         where="scheduler") as mine:
                    if not mine:  # a press is probing it: its verdict comes from there
                        raise UsageError("a Deep-probe press of it is running")
                    shown = await run_deep_probe(config, job.cluster, job.job_id)
            except (UserError, ProbeError) as exc:
                log.warning("auto deep probe failed; the next sweep retries",
                            ref=f"{job.cluster}:{job.job_id}", error=str(exc))
                await _forget(bot, job.cluster, job.job_id)
                await _forget_run(bot, job.cluster, job.job_id)
                continue
            await _remember(bot, config, shown, by="scheduler")
        tasks = [d.report.job_id for d in flagged if d.report.cluster == job.cluster
                 and scheduler_job(d.report.job_id) == scheduler_job(job.job_id)]
        if await _offer(bot, config, shown, job.user, tasks):
            handled.append(f"{job.cluster}:{job.job_id}")
        elif not config.deep_probe.auto:  # not delivered (Slack hung, refused): offered again
            await _forget(bot, job.cluster, job.job_id)
            await _forget_run(bot, job.cluster, job.job_id)
    return handled


async def _forget_run(bot: Bot, cluster: str, job_id: str) -> None:
    """An array run's claim released (its first task's auto-probe failed): retried."""
    if scheduler_job(job_id) != job_id:
        try:
            await bot.store.delete_doc(f"deep_probe_run:{cluster}:{scheduler_job(job_id)}")
        except StoreUnavailable as exc:
            log.warning("deep-probe run claim not released", error=str(exc))


async def _offer(bot: Bot, config: Config, shown: JobDetail, user: str | None,
                 tasks: Sequence[str]) -> bool:
    """Post the offer (or auto verdict) to the owner's DM (``user``: the sweep's owner of the
    run), else the channel."""
    owner = slack_owner(config, shown.report.cluster, user)
    channel: str | None = config.slack.channel
    if owner:
        dm = await dm_channel(bot.client, owner)
        if dm is None:
            log.error("deep-probe DM failed", owner=owner)
        channel = dm or channel
    if not channel:
        return False
    return await _post(bot, channel, shown, config, tasks=tasks) is not None


def register(app: AsyncApp, bot: Bot) -> None:
    """Wire the Deep-probe button into the Bolt app (ack first, then a tracked task)."""

    async def on_action(ack: Callable[..., Awaitable[None]], body: dict[str, Any],
                        respond: Respond) -> None:
        await ack()
        bot.tasks.spawn(on_button(bot, body, bot.responder(respond, DEEP_PROBE)),
                        name="action deep_probe")

    app.action(DEEP_PROBE)(on_action)
