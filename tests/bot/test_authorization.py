"""Who may press what, checked against the stored alert and the scheduler's record at press
time: the authorization matrix of issue 10.

- the same user name on two clusters maps to two people;
- a tampered button value is refused and audited;
- a stale or edited Redis document grants nothing;
- a Kubernetes name re-created (new uid) is a new job: the old alert's buttons are refused and
  the new job alerts again; a Kubernetes label is an owner only when the config names it.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from bot.config import Config, RedisSection, SlackSection
from bot.scheduled import make_scheduler
from bot.store import RedisStore
from bot.sweep_result import SweepResult
from probes.config import KubernetesCluster, ReplayCluster
from tests.bot.builders import FakeClock, FakeSweeper, collapsing, sweep_result
from tests.bot.conftest import Harness, running_bot
from tests.bot.fake_slack import FakeSlack


def two_clusters(prefix: str, tmp_path: Path, **slack: Any) -> Config:
    """alpha's alice is UALICE; beta's alice is another person, UALICE2."""
    alpha = ReplayCluster(name="alpha", path=str(tmp_path), owners={"alice": "UALICE"})
    beta = ReplayCluster(name="beta", path=str(tmp_path), owners={"alice": "UALICE2"})
    return Config(clusters=(alpha, beta), redis=RedisSection(key_prefix=prefix),
                  slack=SlackSection(channel="C0SWEEP", operators=("UOPS",),
                                     incident_dir=str(tmp_path / "incidents"), **slack))


async def outcomes(h: Harness) -> list[tuple[str, str]]:
    return [(e["actor"], e["outcome"]) for e in await h.bot.store.audit_entries()]


async def test_same_user_name_on_two_clusters_is_two_people(
    slack: FakeSlack, store: RedisStore, prefix: str, tmp_path: Path, clock: FakeClock,
) -> None:
    """alice on alpha cannot cancel beta's alice's job; beta's alice can."""
    sick = collapsing(cluster="beta")
    sweeper = FakeSweeper(make=lambda: sweep_result([sick], at=clock(),
                                                     clusters=("alpha", "beta")),
                          conf=two_clusters(prefix, tmp_path))
    async with running_bot(slack, store, sweeper, clock) as h:
        assert await make_scheduler(h.bot).tick()
        assert h.alert_post("beta:4242")["channel"] == "DALICE2"
        hook = await h.press_alert("cancel_salvage", user="UALICE", ref="beta:4242")
        (reply,) = await slack.wait_for(hook)
        assert "Only the job's owner or an operator" in reply.params["text"]
        await h.press_alert("cancel_salvage", user="UALICE2", ref="beta:4242")
        await h.bot.tasks.drain()
        assert sweeper.cancels == [("beta", "4242")]
        assert await outcomes(h) == [("UALICE", "refused"), ("UALICE2", "cancel requested"),
                                     ("UALICE2", "cancelled")]


async def test_tampered_button_value_is_refused_and_audited(harness: Harness) -> None:
    """A signed press whose value names another job than its alert's cancels nothing."""
    assert await make_scheduler(harness.bot).tick()
    hook = await harness.press_alert("cancel_salvage", user="UOPS", value="alpha:4100")
    (reply,) = await harness.slack.wait_for(hook)
    assert "does not belong to this alert" in reply.params["text"]
    await harness.bot.tasks.drain()
    assert harness.sweeper.cancels == []
    (entry,) = await harness.bot.store.audit_entries()
    assert (entry["outcome"], entry["job_id"]) == ("tampered", "4100")
    assert "episode is alpha:4242" in entry["detail"]


async def test_deep_probe_on_an_alert_probes_only_the_alert_s_job(harness: Harness) -> None:
    """The collapse DM's Deep-probe button, its value tampered to another job, probes nothing
    and posts nothing: it is refused and audited like the other buttons."""
    assert await make_scheduler(harness.bot).tick()
    offered = [e["value"] for b in harness.alert_post()["blocks"] if b["type"] == "actions"
               for e in b["elements"] if e["action_id"] == "deep_probe"]
    assert offered == ["alpha:4242"]
    posts = len(harness.slack.to("/api/chat.postMessage"))
    hook = await harness.press_alert("deep_probe", user="UOPS", value="alpha:4100")
    (reply,) = await harness.slack.wait_for(hook)
    assert "does not belong to this alert" in reply.params["text"]
    await harness.bot.tasks.drain()
    assert len(harness.slack.to("/api/chat.postMessage")) == posts
    (entry,) = await harness.bot.store.audit_entries()
    assert (entry["action"], entry["outcome"], entry["job_id"]) == ("deep_probe", "tampered",
                                                                    "4100")


async def test_deep_probe_offer_probes_only_the_offered_run(harness: Harness) -> None:
    """The once-per-run offer's Deep-probe button, its value tampered to another job, probes
    nothing: the offer is bound to the run it was posted for."""
    from bot.config import DeepProbeSection
    from bot.deep_probe import after_sweep
    from tests.bot.builders import detail, job

    config = harness.sweeper.conf.model_copy(
        update={"deep_probe": DeepProbeSection(offer=True)})
    result = sweep_result([detail(job("5151", "rl-grpo-new", flags=("deep-probe",)))],
                          at=harness.clock())
    assert await after_sweep(harness.bot, result, config) == ["alpha:5151"]
    (offer,) = harness.slack.to("/api/chat.postMessage")
    _, hook = await harness.press("deep_probe", "alpha:4100", user="UOPS",
                                  blocks=offer.params["blocks"],
                                  channel=offer.answer["channel"], ts=offer.answer["ts"])
    (reply,) = await harness.slack.wait_for(hook)
    assert "does not belong to this alert" in reply.params["text"]
    await harness.bot.tasks.drain()
    assert len(harness.slack.to("/api/chat.postMessage")) == 1
    (entry,) = await harness.bot.store.audit_entries()
    assert (entry["outcome"], entry["job_id"]) == ("tampered", "4100")


async def test_press_on_a_message_without_an_alert_is_refused(harness: Harness) -> None:
    """A press on a message the bot never posted an alert in is refused, whatever its value."""
    _, hook = await harness.press("cancel_salvage", "alpha:4242", user="UOPS",
                                  channel="C0OTHER", ts="1699999999.000001")
    (reply,) = await harness.slack.wait_for(hook)
    assert "no record of an alert" in reply.params["text"]
    await harness.bot.tasks.drain()
    assert harness.sweeper.cancels == [] and harness.sweeper.sweeps == 0


async def test_edited_redis_document_grants_nothing(harness: Harness) -> None:
    """An episode document rewritten to name another owner does not make that person the
    owner: the permission comes from the scheduler's record read at press time."""
    assert await make_scheduler(harness.bot).tick()
    doc = await harness.bot.store.get_doc("episode:alpha:4242")
    await harness.bot.store.put_doc("episode:alpha:4242",
                                    {**doc, "user": "mallory", "owner": "UEVIL"})
    hook = await harness.press_alert("cancel_salvage", user="UEVIL")
    (reply,) = await harness.slack.wait_for(hook)
    assert "Only the job's owner or an operator" in reply.params["text"]
    await harness.bot.tasks.drain()
    assert harness.sweeper.cancels == []


async def test_owner_changed_since_the_alert_is_read_fresh(harness: Harness) -> None:
    """The scheduler now says the job is bob's: alice (the owner the alert was sent to) may no
    longer cancel it."""
    assert await make_scheduler(harness.bot).tick()
    bobs = collapsing(user="bob")
    harness.sweeper.make = lambda: sweep_result([bobs], at=harness.clock())
    hook = await harness.press_alert("cancel_salvage", user="UALICE")
    (reply,) = await harness.slack.wait_for(hook)
    assert "Only the job's owner or an operator" in reply.params["text"]


def submitted_at(result: SweepResult, when: datetime) -> SweepResult:
    """``result`` with every SLURM record saying it was submitted at ``when``."""
    facts = tuple(c.model_copy(update={"jobs": tuple(
        j.model_copy(update={"record": j.record.model_copy(update={"submit_time": when})})
        for j in c.jobs)}) for c in result.facts)
    return SweepResult(report=result.report, details=result.details, facts=facts,
                       started_at=result.started_at, duration_s=result.duration_s)


async def test_a_slurm_id_given_to_a_later_job_is_not_cancelled_from_the_old_alert(
        harness: Harness) -> None:
    """The alert's job ended and SLURM gave its id to a later job (job ids reset or wrapped):
    the same id, the same owner, another submit time. The old alert's cancel is refused as
    stale and nothing is cancelled (it cancelled the later job)."""
    first = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
    make = harness.sweeper.make
    harness.sweeper.make = lambda: submitted_at(make(), first)
    assert await make_scheduler(harness.bot).tick()
    harness.sweeper.make = lambda: submitted_at(make(), first + timedelta(hours=6))
    hook = await harness.press_alert("cancel_salvage", user="UALICE")
    (reply,) = await harness.slack.wait_for(hook)
    await harness.bot.tasks.drain()
    assert "earlier job" in reply.params["text"]
    assert harness.sweeper.cancels == []
    assert ("UALICE", "stale") in await outcomes(harness)
    harness.sweeper.make = lambda: submitted_at(make(), first)  # the alert's own job: cancels
    await harness.press_alert("cancel_salvage", user="UALICE")
    await harness.bot.tasks.drain()
    assert harness.sweeper.cancels == [("alpha", "4242")]


def k8s_config(prefix: str, tmp_path: Path, **cluster: Any) -> Config:
    alpha = KubernetesCluster(name="alpha", namespace="ml", **cluster)
    return Config(clusters=(alpha,), redis=RedisSection(key_prefix=prefix),
                  slack=SlackSection(channel="C0SWEEP", operators=("UOPS",),
                                     owners={"alice": "UALICE"},
                                     incident_dir=str(tmp_path / "incidents")))


async def test_recreated_kubernetes_name_is_a_new_job(
    slack: FakeSlack, store: RedisStore, prefix: str, tmp_path: Path, clock: FakeClock,
) -> None:
    """Same name, new uid: the old alert's cancel is refused as stale, and the new job gets its
    own alert, whose cancel deletes only the object with that uid (a precondition: a Job
    re-created again after the press is not deleted, ``test_k8s_probe``)."""
    uid = {"value": "uid-1"}
    sick = collapsing(job_id="grpo-run")
    sweeper = FakeSweeper(make=lambda: sweep_result(
        [sick], at=clock(), labels={("alpha", "grpo-run"): {
            "jobtables/uid": uid["value"], "user": "alice"}}),
        conf=k8s_config(prefix, tmp_path, user_keys=("user",)))
    async with running_bot(slack, store, sweeper, clock) as h:
        assert await make_scheduler(h.bot).tick()
        first = h.alert_post("alpha:grpo-run")
        uid["value"] = "uid-2"
        hook = await h.press_alert("cancel_salvage", user="UALICE", ref="alpha:grpo-run")
        (reply,) = await slack.wait_for(hook)
        assert "earlier job" in reply.params["text"]
        clock.advance(1800)
        assert await make_scheduler(h.bot).tick()
        second = h.alert_post("alpha:grpo-run")
        assert second["ts"] != first["ts"]
        assert await h.bot.store.get_doc("episode:alpha:grpo-run:uid-2") is not None
        await h.press_alert("cancel_salvage", user="UALICE", ref="alpha:grpo-run")
        await h.bot.tasks.drain()
    assert sweeper.cancels == [("alpha", "grpo-run")]
    assert sweeper.cancel_uids == ["uid-2"]


@pytest.mark.parametrize("named", [False, True])
async def test_kubernetes_label_is_an_owner_only_when_the_config_names_it(
    slack: FakeSlack, store: RedisStore, prefix: str, tmp_path: Path, named: bool,
) -> None:
    """A ``user`` label counts for the permission only with ``user_keys`` set in the config."""
    clock = FakeClock()
    allowed = named
    sick = collapsing(job_id="grpo-run")
    cluster = {"user_keys": ("user",)} if named else {}
    sweeper = FakeSweeper(make=lambda: sweep_result(
        [sick], at=clock(), labels={("alpha", "grpo-run"): {"user": "alice"}}),
        conf=k8s_config(prefix, tmp_path, **cluster))
    async with running_bot(slack, store, sweeper, clock) as h:
        assert await make_scheduler(h.bot).tick()
        await h.press_alert("cancel_salvage", user="UALICE", ref="alpha:grpo-run")
        await h.bot.tasks.drain()
    assert sweeper.cancels == ([("alpha", "grpo-run")] if allowed else [])


async def test_keep_running_for_anyone_when_configured(
    slack: FakeSlack, store: RedisStore, prefix: str, tmp_path: Path, clock: FakeClock,
) -> None:
    """``keep_snooze_by = "anyone"`` opens keep_running to everyone; cancel stays guarded."""
    config = two_clusters(prefix, tmp_path, keep_snooze_by="anyone")
    sweeper = FakeSweeper(make=lambda: sweep_result([collapsing()], at=clock(),
                                                     clusters=("alpha", "beta")), conf=config)
    async with running_bot(slack, store, sweeper, clock) as h:
        assert await make_scheduler(h.bot).tick()
        await h.press_alert("cancel_salvage", user="UBOB")
        await h.bot.tasks.drain()
        await h.press_alert("keep_running", user="UBOB")
        await h.bot.tasks.drain()
        assert await outcomes(h) == [("UBOB", "refused"), ("UBOB", "kept running")]
    assert sweeper.cancels == []


async def test_a_double_pressed_deep_probe_on_an_alert_probes_once(
        harness: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two presses of the alert's Deep-probe while its probe runs (a double click, or a
    replayed request reaching the other replica sharing Redis): one probe, one verdict in the
    thread; the second press is told so and audited as a duplicate. Both are acked at once:
    the probe runs after the ack, in the background."""
    import asyncio

    from bot import deep_probe

    assert await make_scheduler(harness.bot).tick()
    release = asyncio.Event()
    calls: list[str] = []

    async def slow_probe(config: Config, cluster: str | None, job_id: str) -> object:
        calls.append(f"{cluster}:{job_id}")
        await release.wait()
        raise deep_probe.UsageError("stopped by the test")

    monkeypatch.setattr(deep_probe, "run_deep_probe", slow_probe)
    first = await harness.press_alert("deep_probe", user="UALICE")
    second = await harness.press_alert("deep_probe", user="UALICE")
    try:
        (reply,) = await harness.slack.wait_for(second, within=5)
    finally:
        release.set()
    assert "already running" in reply.params["text"]
    await harness.bot.tasks.drain()
    assert calls == ["alpha:4242"]
    (failed,) = harness.slack.to(first)
    assert "stopped by the test" in failed.params["text"]
    assert ("UALICE", "duplicate") in await outcomes(harness)


async def test_deep_probe_press_by_anyone_runs_and_is_audited(
        harness: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    """Deep-probe only reads and posts a verdict (CONTRACT: only destructive buttons are kept
    to the owner and the operators), so anyone who sees the alert may press it, as anyone may
    ask ``/job``; but every press is audited: who probed which job, and what it said. The
    verdict's own Cancel is checked as any cancel."""
    from bot import deep_probe
    from report.models import DeepProbe

    async def probe(config: Config, cluster: str | None, job_id: str) -> object:
        found = collapsing(job_id)
        verdict = DeepProbe(verdict="NO-KILL", reasons=["nothing to judge"], read={})
        return found.model_copy(update={"report": found.report.model_copy(
            update={"deep_probe": verdict})})

    monkeypatch.setattr(deep_probe, "run_deep_probe", probe)
    assert await make_scheduler(harness.bot).tick()
    await harness.press_alert("deep_probe", user="UEVIL")
    await harness.bot.tasks.drain()
    verdicts = [c for c in harness.slack.to("/api/chat.postMessage")
                if "Deep probe of" in c.params.get("text", "")]
    assert len(verdicts) == 1 and verdicts[0].params["thread_ts"]
    (entry,) = [e for e in await harness.bot.store.audit_entries()
                if e["action"] == "deep_probe"]
    assert (entry["actor"], entry["job_id"], entry["outcome"]) == ("UEVIL", "4242", "NO-KILL")


async def test_a_deep_probe_press_with_no_job_in_its_value_is_audited(harness: Harness) -> None:
    """Every press is audited (README): a Deep-probe press whose value names no job (a
    tampered or replayed request) runs nothing and is answered, and it is in the trail too."""
    assert await make_scheduler(harness.bot).tick()
    where = harness.alert_post()
    _, hook = await harness.press("deep_probe", "alpha:4242; rm -rf /", user="UEVIL",
                                  blocks=where["blocks"], channel=where["channel"],
                                  ts=where["ts"])
    await harness.bot.tasks.drain()
    (answer,) = await harness.slack.wait_for(hook)
    assert "no valid job reference" in answer.params["text"]
    assert ("UEVIL", "rejected") in await outcomes(harness)


async def test_a_later_slurm_job_given_an_alerted_id_alerts_again_and_its_buttons_act_on_it(
        harness: Harness) -> None:
    """The alerted job's id goes to a later job (ids reset or wrapped), which collapses too:
    it is another job, so it gets its own DM, whose cancel acts on it (its collapse was taken
    for the old alert's, still open: no DM, and the only buttons were the old job's, refused);
    the old alert's buttons are refused as replaced."""
    first = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
    make = harness.sweeper.make
    harness.sweeper.make = lambda: submitted_at(make(), first)
    assert await make_scheduler(harness.bot).tick()
    old = harness.alert_post()
    harness.sweeper.make = lambda: submitted_at(make(), first + timedelta(hours=6))
    harness.clock.advance(1800)
    assert await make_scheduler(harness.bot).tick()
    new = harness.alert_post()
    assert new["ts"] != old["ts"]
    _, hook = await harness.press("cancel_salvage", "alpha:4242", user="UALICE",
                                  blocks=old["blocks"], channel=old["channel"], ts=old["ts"])
    (reply,) = await harness.slack.wait_for(hook)
    await harness.bot.tasks.drain()
    assert "newer alert" in reply.params["text"]
    assert harness.sweeper.cancels == []
    await harness.press_alert("cancel_salvage", user="UALICE")
    await harness.bot.tasks.drain()
    assert harness.sweeper.cancels == [("alpha", "4242")]


async def test_deep_probe_on_an_alert_whose_id_went_to_a_later_job_runs_nothing(
        harness: Harness) -> None:
    """The alert's SLURM id now names a later job (another submit time): its Deep-probe button
    reads nothing and posts no verdict in the old alert's thread (it probed the later job and
    told its verdict, with a cancel for it, under the old job's alert); audited as stale."""
    first = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
    make = harness.sweeper.make
    harness.sweeper.make = lambda: submitted_at(make(), first)
    assert await make_scheduler(harness.bot).tick()
    harness.sweeper.make = lambda: submitted_at(make(), first + timedelta(hours=6))
    before = len(harness.slack.to("/api/chat.postMessage"))
    hook = await harness.press_alert("deep_probe", user="UALICE")
    (reply,) = await harness.slack.wait_for(hook)
    await harness.bot.tasks.drain()
    assert "earlier job" in reply.params["text"]
    assert len(harness.slack.to("/api/chat.postMessage")) == before
    assert ("UALICE", "stale") in await outcomes(harness)


async def test_deep_probe_offer_whose_id_went_to_a_later_job_runs_nothing(
        harness: Harness) -> None:
    """The once-per-run offer's own Deep-probe button, pressed once the run's id names a later
    job (a Kubernetes Job re-created under its name, a SLURM id reset): nothing is probed or
    posted under the old offer, audited as stale (the offer kept no instance, so the press
    probed the later job and posted its verdict, with a cancel for it, in the old offer)."""
    from bot.config import DeepProbeSection
    from bot.deep_probe import after_sweep
    from tests.bot.builders import detail, job

    first = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
    config = harness.sweeper.conf.model_copy(
        update={"deep_probe": DeepProbeSection(offer=True)})

    def flagged() -> SweepResult:
        return sweep_result([detail(job("5151", "rl-grpo-new", flags=("deep-probe",)))],
                            at=harness.clock())

    assert await after_sweep(harness.bot, submitted_at(flagged(), first),
                             config) == ["alpha:5151"]
    (offer,) = harness.slack.to("/api/chat.postMessage")
    harness.sweeper.make = lambda: submitted_at(flagged(), first + timedelta(hours=6))
    _, hook = await harness.press("deep_probe", "alpha:5151", user="UOPS",
                                  blocks=offer.params["blocks"],
                                  channel=offer.answer["channel"], ts=offer.answer["ts"])
    (reply,) = await harness.slack.wait_for(hook)
    await harness.bot.tasks.drain()
    assert "earlier job" in reply.params["text"]
    assert len(harness.slack.to("/api/chat.postMessage")) == 1
    assert ("UOPS", "stale") in await outcomes(harness)


def requeued_at(result: SweepResult, when: datetime) -> SweepResult:
    """``result`` with every SLURM job requeued once at ``when``: SLURM gives a requeued job
    (preempted, its node failed, ``scontrol requeue``) a new submit time and counts it in
    ``restart_cnt`` (seen on the real SLURM 22.05: SubmitTime moved, restart_cnt 1)."""
    facts = tuple(c.model_copy(update={"jobs": tuple(
        j.model_copy(update={"record": j.record.model_copy(
            update={"submit_time": when, "restarts": j.record.restarts + 1})})
        for j in c.jobs)}) for c in result.facts)
    return SweepResult(report=result.report, details=result.details, facts=facts,
                       started_at=result.started_at, duration_s=result.duration_s)


async def test_a_requeued_job_still_collapsing_is_alerted_again_and_only_its_new_buttons_act(
        harness: Harness) -> None:
    """The alerted job was requeued (preempted with --requeue): SLURM moved its submit time and
    counted the requeue, which a later job given the id and requeued itself shows too, so the
    old alert's cancel is refused, says why (a requeue or another job) and cancels nothing.
    The run still collapsing gets a new DM bound to the job now under the id, whose cancel
    acts on it: a collapsing run stays cancellable from Slack after a preemption."""
    first = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
    make = harness.sweeper.make
    harness.sweeper.make = lambda: submitted_at(make(), first)
    assert await make_scheduler(harness.bot).tick()
    old = harness.alert_post()
    harness.sweeper.make = lambda: requeued_at(make(), first + timedelta(minutes=40))
    _, hook = await harness.press("cancel_salvage", "alpha:4242", user="UALICE",
                                  blocks=old["blocks"], channel=old["channel"], ts=old["ts"])
    (reply,) = await harness.slack.wait_for(hook)
    await harness.bot.tasks.drain()
    assert harness.sweeper.cancels == []
    assert "requeued 1x" in reply.params["text"]
    assert "Nothing was done" in reply.params["text"]
    harness.clock.advance(1800)
    assert await make_scheduler(harness.bot).tick()
    new = harness.alert_post()
    assert new["ts"] != old["ts"]
    await harness.press_alert("cancel_salvage", user="UALICE")
    await harness.bot.tasks.drain()
    assert harness.sweeper.cancels == [("alpha", "4242")]


async def test_a_reused_id_that_was_itself_requeued_is_not_cancelled_from_the_old_alert(
        harness: Harness) -> None:
    """The alerted job ended; SLURM gave its id to a later job of the same name and owner,
    which was requeued (restart_cnt 1, a submit time of its own). The old alert's cancel is
    refused, says why, and cancels nothing (the requeue count under the alert's name and user
    passed it off as the alert's job, so the press cancelled the later job)."""
    first = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
    make = harness.sweeper.make
    harness.sweeper.make = lambda: submitted_at(make(), first)
    assert await make_scheduler(harness.bot).tick()
    harness.sweeper.make = lambda: requeued_at(make(), first + timedelta(hours=6))
    hook = await harness.press_alert("cancel_salvage", user="UALICE")
    (reply,) = await harness.slack.wait_for(hook)
    await harness.bot.tasks.drain()
    assert harness.sweeper.cancels == []
    assert "Nothing was done" in reply.params["text"]
    assert ("UALICE", "stale") in await outcomes(harness)


async def test_a_recreated_kubernetes_job_is_not_told_as_a_slurm_requeue(
    slack: FakeSlack, store: RedisStore, prefix: str, tmp_path: Path, clock: FakeClock,
) -> None:
    """A Job re-created under the alert's name (new uid) whose pods restarted: the refusal says
    it is another job, not that SLURM cannot tell a requeue from a reused id."""
    uid = {"value": "uid-1"}
    sick = collapsing(job_id="grpo-run")

    def make() -> SweepResult:
        return sweep_result([sick], at=clock(), labels={("alpha", "grpo-run"): {
            "jobtables/uid": uid["value"], "user": "alice"}})

    sweeper = FakeSweeper(make=make, conf=k8s_config(prefix, tmp_path, user_keys=("user",)))
    async with running_bot(slack, store, sweeper, clock) as h:
        assert await make_scheduler(h.bot).tick()
        uid["value"] = "uid-2"
        sweeper.make = lambda: requeued_at(make(), clock())
        hook = await h.press_alert("cancel_salvage", user="UALICE", ref="alpha:grpo-run")
        (reply,) = await slack.wait_for(hook)
    assert "earlier job" in reply.params["text"] and "Nothing was done" in reply.params["text"]
    assert "SLURM" not in reply.params["text"] and "requeued" not in reply.params["text"]
    assert sweeper.cancels == []


@pytest.mark.parametrize("user", ["UALICE", "UOPS"])
async def test_a_press_while_its_cluster_cannot_be_read_is_refused_for_now(
        harness: Harness, user: str) -> None:
    """The press re-reads the job, but its cluster is unreachable (an SSH blip): the job is not
    'no longer reported'. The owner was told only the owner or an operator may press; an
    operator's Cancel was settled as 'already ended; nothing cancelled', its buttons removed and
    its lock done for 24 h, while the run went on collapsing. Now both are told the cluster
    could not be read, nothing is done or locked, and a press once it answers cancels."""
    make = harness.sweeper.make
    assert await make_scheduler(harness.bot).tick()
    harness.sweeper.make = lambda: sweep_result([], at=harness.clock(), clusters=(),
                                                unreachable=("alpha",))
    updates = len(harness.slack.to("/api/chat.update"))
    hook = await harness.press_alert("cancel_salvage", user=user)
    (reply,) = await harness.slack.wait_for(hook)
    await harness.bot.tasks.drain()
    assert "could not be read" in reply.params["text"]
    assert "Nothing was done" in reply.params["text"]
    assert harness.sweeper.cancels == []
    assert len(harness.slack.to("/api/chat.update")) == updates  # the alert is left as it was
    harness.sweeper.make = make
    await harness.press_alert("cancel_salvage", user=user)
    await harness.bot.tasks.drain()
    assert harness.sweeper.cancels == [("alpha", "4242")]


async def test_a_refusal_while_its_cluster_cannot_be_read_names_no_internal_detail(
        harness: Harness) -> None:
    """The refusal says the cluster could not be read and a short reason: the SSH error's
    host:port and kubeconfig/key paths stay in the audit and the log, out of Slack."""
    assert await make_scheduler(harness.bot).tick()

    def unread() -> SweepResult:
        result = sweep_result([], at=harness.clock(), clusters=(), unreachable=("alpha",))
        result.report.clusters[0] = result.report.clusters[0].model_copy(update={
            "detail": "connect to 10.4.0.9:22 failed: key /srv/secrets/id_rsa unreadable"})
        return result

    harness.sweeper.make = unread
    hook = await harness.press_alert("cancel_salvage", user="UOPS")
    (reply,) = await harness.slack.wait_for(hook)
    assert "could not be read" in reply.params["text"] and "unreadable" in reply.params["text"]
    for secret in ("10.4.0.9", "/srv/secrets", "id_rsa"):
        assert secret not in reply.params["text"], (secret, reply.params["text"])


async def test_a_job_run_again_under_its_id_after_a_cancel_can_be_cancelled_again(
        harness: Harness) -> None:
    """Cancelled from its alert, then run again under the same id (``scontrol requeue`` of the
    cancelled job, or the id given to a later job): it collapses again and gets a new alert,
    whose Cancel was answered by the first cancel's 24-hour lock ('already done') and
    cancelled nothing. The lock is the job instance's (its submit time), as a Kubernetes Job's
    is its uid's."""
    first = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
    make = harness.sweeper.make
    harness.sweeper.make = lambda: submitted_at(make(), first)
    assert await make_scheduler(harness.bot).tick()
    await harness.press_alert("cancel_salvage", user="UALICE")
    await harness.bot.tasks.drain()
    assert harness.sweeper.cancels == [("alpha", "4242")]
    harness.sweeper.make = lambda: requeued_at(make(), first + timedelta(hours=1))
    harness.clock.advance(3600)
    assert await make_scheduler(harness.bot).tick()
    hook = await harness.press_alert("cancel_salvage", user="UALICE")
    await harness.bot.tasks.drain()
    assert not harness.slack.to(hook), harness.slack.to(hook)[0].params["text"]
    assert harness.sweeper.cancels == [("alpha", "4242"), ("alpha", "4242")]
