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
  replica repeats it. A failed auto-probe releases that claim: the next sweep tries again;
  so does an offer or an auto-probe's verdict Slack did not take (a hung or refusing Slack).
  An array run (a grid in waves, each task flagged as it starts) is one run: offered once, for
  its first task, the message counting its tasks (``doc:deep_probe_run:{cluster}:{array}``).
  A sweep's offers to one owner (or to the channel) are one message, each run with its own
  button bound to it (``deep_probe_post._offers``), as an owner's collapses are one DM.
* A ``deep-probe`` row in a ``/job`` answer carries the button too; pressed on that ephemeral
  answer, the verdict comes back ephemerally to the presser (an ephemeral message has no thread
  and no ts a button's episode could be bound to). A verdict with buttons (KILL on a running
  job) is DMed to the presser instead, where its episode binds them, and the ephemeral reply
  says so; if that DM fails, the ephemeral verdict carries no button that could not be honoured.

A press's checks and audit entries (refusals, duplicates) are :mod:`bot.deep_probe_press`; the
verdict's blocks :mod:`bot.deep_probe_blocks`; its posting and the run's memory
:mod:`bot.deep_probe_post`.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import structlog

from bot.alerts import job_submitted, job_uid
from bot.cluster_names import remembered, renames
from bot.config import Config
from bot.deep_probe_blocks import code, mrkdwn, offer_blocks, row_actions, verdict_blocks
from bot.deep_probe_post import (
    Offer,
    _answer_ephemeral,
    _forget,
    _forget_run,
    _known_as,
    _new_run,
    _offer,
    _offers,
    _post,
    _remember,
    _task_order,
    _tell_unposted,
    memory_name,
    one_at_a_time,
    refused_for_good,
)
from bot.deep_probe_press import _alert_refusal, _already_running, _audit, _where
from bot.errors import JobNotFoundError, UsageError, UserError
from bot.messages import DEEP_PROBE
from bot.owners import slack_owner
from probes.config import KubernetesCluster, SlurmCluster
from probes.errors import InvalidJobIdError, ProbeError
from probes.ids import scheduler_job, split_job_ref, validate_job_id
from probes.models import ClusterFacts, JobState
from probes.slurm.transport import RunnerFactory
from report.chunks import public_reason
from report.deep_probe import judge_rollouts, not_applicable
from report.judge import build_report
from report.models import JobDetail

if TYPE_CHECKING:
    from slack_bolt.async_app import AsyncApp

    from bot.app import Bot
    from bot.presses import ActionPress
    from bot.sweep_result import SweepResult

__all__ = [  # and the names callers import from here (bot.actions, bot.app, bot.cli, tests)
    "after_sweep", "memory_name", "offer_blocks", "on_button", "one_at_a_time",
    "probed_cluster", "register", "row_actions", "run_deep_probe", "verdict_blocks",
]

log = structlog.get_logger(__name__)

Respond = Callable[..., Awaitable[Any]]


def probed_cluster(config: Config, name: str | None) -> SlurmCluster | KubernetesCluster:
    """The cluster ``name`` names, or the only active SLURM or Kubernetes one (a replay
    cluster is a recording: it has no rollouts to read; an inactive one is not swept)."""
    live = [c for c in config.clusters
            if c.active and isinstance(c, SlurmCluster | KubernetesCluster)]
    if name is None:
        if not live:  # naming a cluster cannot help: a replay or inactive one is refused too
            raise UsageError("no active SLURM or Kubernetes cluster is configured: the deep "
                             "probe reads a live job's rollouts (configured: " + ", ".join(
                                 f"{c.name} ({c.kind if c.active else 'inactive'})"
                                 for c in config.clusters) + ")")
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
    if not match[0].active:  # CONTRACT §2: skipped; the probe does not log in to it either
        raise UsageError(f"cluster {name!r} is inactive (active = false in the config): "
                         "not probed")
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
                             thresholds=config.report_settings().thresholds,
                             running_s=detail.report.elapsed_s)
    return detail.model_copy(update={"report": detail.report.model_copy(
        update={"deep_probe": verdict})})


# -- Slack ------------------------------------------------------------------------------------


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
    posted = await _post(bot, press.channel_id, detail, config, thread_ts=press.message_ts)
    if not isinstance(posted, dict):
        await _tell_unposted(config, detail, respond)


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
    offers: list[Offer] = []  # posted after the loop: one message per owner (_offers)
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
        if not config.deep_probe.auto:
            offers.append((shown, job.user, tasks))
            continue
        told = await _offer(bot, config, shown, job.user, tasks)
        if told is True:
            handled.append(f"{job.cluster}:{job.job_id}")
        elif refused_for_good(told):
            log.warning("deep-probe verdict dropped: Slack will not take it",
                        ref=f"{job.cluster}:{job.job_id}")
        elif config.slack.channel or slack_owner(config, job.cluster, job.user):
            # Not delivered (Slack hung, refused for now): probed and told again. An auto
            # verdict with nowhere to go, or refused for good, is not read again every sweep.
            await _forget(bot, job.cluster, job.job_id)
            await _forget_run(bot, job.cluster, job.job_id)
    delivered, dropped = await _offers(bot, config, offers) if offers else (set(), set())
    for shown, _, _ in offers:
        job = shown.report
        ref = f"{job.cluster}:{job.job_id}"
        if ref in delivered:
            handled.append(ref)
        elif ref in dropped:  # refused for good (DM and channel closed to the bot): once
            log.warning("deep-probe offer dropped: Slack will not take it", ref=ref)
        else:  # not delivered (Slack hung, refused for now): offered again by the next sweep
            await _forget(bot, job.cluster, job.job_id)
            await _forget_run(bot, job.cluster, job.job_id)
    return handled


def register(app: AsyncApp, bot: Bot) -> None:
    """Wire the Deep-probe button into the Bolt app (ack first, then a tracked task)."""

    async def on_action(ack: Callable[..., Awaitable[None]], body: dict[str, Any],
                        respond: Respond) -> None:
        await ack()
        # Not run for Slack's retry of a press already run (bot.app).
        bot.spawn_once(body, lambda: on_button(bot, body, bot.responder(respond, DEEP_PROBE)),
                       name="action deep_probe")

    app.action(DEEP_PROBE)(on_action)
