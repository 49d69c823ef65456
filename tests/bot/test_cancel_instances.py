"""Cancel presses bound to the job instance and the message their episode really posted.

* A Kubernetes Job cancelled from Slack and re-created under the same name (a new uid) is a new
  job (README): its own collapse alert's cancel acts, not answered by the first Job's 24-hour
  "done" lock; an interrupted cancel of the first Job is settled, not released onto the second.
* A deep-probe KILL verdict posted acknowledge-only (``no_kill``) offered no cancel: a forged
  cancel press on it is refused even after ``no_kill`` is lifted, as on a collapse alert.
* An interrupted cancel's reconciliation rebuilds the message its episode posted (a collapse
  alert, or a deep-probe verdict) and offers Cancel only when the episode offered it and the run
  may be cancelled now: with ``no_kill`` set since, the buttons are the recommendation's.

The crash is the press's task cancelled inside the scheduler call (what SIGTERM does to the
bot's tasks); the clock is the fake one, advanced past ``RECONCILE_AFTER_S``.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from bot import deep_probe
from bot.action_records import cancel_lock
from bot.alerts import message_key
from bot.config import Config, DeepProbeSection, RedisSection, SlackSection
from bot.config_source import ConfigSource
from bot.reconcile import RECONCILE_AFTER_S
from bot.scheduled import make_scheduler
from bot.store import RedisStore
from probes.config import KubernetesCluster
from report.models import DeepProbe, JobDetail
from tests.bot.builders import (
    FakeClock,
    FakeSweeper,
    blocks_text,
    collapsing,
    detail,
    job,
    sweep_result,
)
from tests.bot.conftest import Harness, running_bot
from tests.bot.fake_slack import FakeSlack

UIDS = "jobtables/uid"


def k8s_config(prefix: str, tmp_path: Path) -> Config:
    alpha = KubernetesCluster(name="alpha", namespace="ml", user_keys=("user",))
    return Config(clusters=(alpha,), redis=RedisSection(key_prefix=prefix),
                  slack=SlackSection(channel="C0SWEEP", operators=("UOPS",),
                                     owners={"alice": "UALICE"},
                                     incident_dir=str(tmp_path / "incidents")))


def with_no_kill(config: Config, no_kill: bool) -> Config:
    return config.model_copy(update={"slack": config.slack.model_copy(
        update={"no_kill": no_kill})})


def button_ids(blocks: Any) -> list[str]:
    blocks = json.loads(blocks) if isinstance(blocks, str) else blocks
    return [e["action_id"] for b in blocks if b.get("type") == "actions"
            for e in b["elements"]]


def last_update(slack: FakeSlack) -> dict[str, Any]:
    params = slack.to("/api/chat.update")[-1].params
    blocks = params["blocks"]
    return {"text": params["text"],
            "blocks": json.loads(blocks) if isinstance(blocks, str) else blocks}


def sigterm(cluster: str, job_id: str) -> None:
    """The bot is stopped inside the scheduler call (SIGTERM during a rollout)."""
    raise asyncio.CancelledError("SIGTERM during the cancel")


async def outcomes(h: Harness) -> list[str]:
    return [e["outcome"] for e in await h.bot.store.audit_entries()]


# -- A: a re-created Kubernetes Job is a new job ----------------------------------------------


def recreatable(prefix: str, tmp_path: Path,
                clock: FakeClock) -> tuple[FakeSweeper, dict[str, str]]:
    """A Kubernetes Job ``grpo-run`` collapsing, whose uid is ``uid["value"]``: set it anew and
    the name belongs to a re-created Job."""
    uid = {"value": "uid-1"}
    sick = collapsing(job_id="grpo-run")
    sweeper = FakeSweeper(make=lambda: sweep_result(
        [sick], at=clock(), labels={("alpha", "grpo-run"): {UIDS: uid["value"],
                                                            "user": "alice"}}),
        conf=k8s_config(prefix, tmp_path))
    return sweeper, uid


async def test_a_recreated_kubernetes_job_s_new_alert_cancels_it(
    slack: FakeSlack, store: RedisStore, prefix: str, tmp_path: Path, clock: FakeClock,
) -> None:
    """The first Job is cancelled from Slack; re-created under the name (new uid), it collapses
    again an hour later: its own alert's cancel deletes the new Job, within the first cancel's
    24-hour lock."""
    sweeper, uid = recreatable(prefix, tmp_path, clock)
    async with running_bot(slack, store, sweeper, clock) as h:
        assert await make_scheduler(h.bot).tick()
        first = h.alert_post("alpha:grpo-run")
        await h.press_alert("cancel_salvage", user="UALICE", ref="alpha:grpo-run")
        await h.bot.tasks.drain()
        assert sweeper.cancel_uids == ["uid-1"]
        uid["value"] = "uid-2"
        clock.advance(3600)
        assert await make_scheduler(h.bot).tick()
        second = h.alert_post("alpha:grpo-run")
        assert second["ts"] != first["ts"]
        await h.press_alert("cancel_salvage", user="UALICE", ref="alpha:grpo-run")
        await h.bot.tasks.drain()
        final = last_update(slack)
        audit = await outcomes(h)
        locks = [await store.holder(cancel_lock("alpha", "grpo-run", u))
                 for u in ("uid-1", "uid-2")]
    assert sweeper.cancel_uids == ["uid-1", "uid-2"]
    assert sweeper.cancel_owners == ["alice", "alice"]  # the job's user rides with the cancel
    assert audit.count("cancelled") == 2 and "duplicate" not in audit
    assert "Cancelled by" in final["text"]
    assert [(lock or {}).get("status") for lock in locks] == ["done", "done"]


async def test_an_interrupted_cancel_of_a_since_recreated_job_is_settled_not_released(
    slack: FakeSlack, store: RedisStore, prefix: str, tmp_path: Path, clock: FakeClock,
) -> None:
    """SIGTERM mid-cancel of the first Job; when reconciliation runs, the name belongs to a
    re-created Job (new uid), running: the Job being cancelled is gone, so the lock is settled
    and the old alert gets no Cancel button back (it would act on another job)."""
    sweeper, uid = recreatable(prefix, tmp_path, clock)
    async with running_bot(slack, store, sweeper, clock) as h:
        assert await make_scheduler(h.bot).tick()
        sweeper.on_cancel = sigterm
        await h.press_alert("cancel_salvage", user="UALICE", ref="alpha:grpo-run")
        await h.bot.tasks.drain()
        sweeper.on_cancel = None
        lock = cancel_lock("alpha", "grpo-run", "uid-1")
        assert (await store.holder(lock) or {}).get("status") == "cancelling"
        uid["value"] = "uid-2"
        clock.advance(RECONCILE_AFTER_S + 1)
        assert await h.bot.actions.reconcile() == [lock]
        holder = await store.holder(lock)
        final = last_update(slack)
        audit = await outcomes(h)
    assert holder is not None and holder["status"] == "done"
    assert audit[-1] == "cancelled (reconciled)"
    assert "settled after a restart" in final["text"]
    assert button_ids(final["blocks"]) == []


# -- B: a verdict that offered no cancel ------------------------------------------------------


def verdict_sweep(sweeper: FakeSweeper, clock: FakeClock,
                  monkeypatch: pytest.MonkeyPatch) -> JobDetail:
    """A running ``deep-probe`` run whose (stubbed: no SSH) deep probe says KILL."""
    flagged = detail(job("5151", "rl-grpo-new", flags=("deep-probe",)))
    sweeper.make = lambda: sweep_result([flagged], at=clock())
    killed = flagged.model_copy(update={"report": flagged.report.model_copy(update={
        "deep_probe": DeepProbe(verdict="KILL", reasons=["weight-sync garbage"], read={})})})

    async def probe(config: Config, cluster: str | None, job_id: str,
                    **_: Any) -> JobDetail:
        assert (cluster, job_id) == ("alpha", "5151")
        return killed

    monkeypatch.setattr(deep_probe, "run_deep_probe", probe)
    return killed


async def post_verdict(h: Harness, config: Config) -> dict[str, Any]:
    """Auto-probe after a sweep; return the verdict message posted (channel, ts, blocks)."""
    assert await deep_probe.after_sweep(h.bot, h.sweeper.make(), config) == ["alpha:5151"]
    (post,) = h.slack.to("/api/chat.postMessage")
    blocks = post.params["blocks"]
    return {"channel": post.answer["channel"], "ts": post.answer["ts"],
            "blocks": json.loads(blocks) if isinstance(blocks, str) else blocks}


async def press_on(h: Harness, action_id: str, where: dict[str, Any]) -> str:
    _, hook = await h.press(action_id, "alpha:5151", user="UALICE", blocks=where["blocks"],
                            channel=where["channel"], ts=where["ts"])
    return hook


@pytest.mark.parametrize("offered", [False, True], ids=["acknowledge-only", "with-cancel"])
async def test_a_cancel_on_a_verdict_that_offered_none_is_refused_after_no_kill_is_lifted(
    *, slack: FakeSlack, store: RedisStore, sweeper: FakeSweeper, clock: FakeClock,
    monkeypatch: pytest.MonkeyPatch, offered: bool,
) -> None:
    """The KILL verdict went out acknowledge-only (``no_kill``); ``no_kill`` is lifted; a
    validly signed cancel payload for that message is refused and audited. The same verdict
    posted with its Cancel button (no ``no_kill``) is cancelled by the same press."""
    verdict_sweep(sweeper, clock, monkeypatch)
    base = sweeper.conf.model_copy(update={"deep_probe": DeepProbeSection(auto=True)})
    configs = {"now": with_no_kill(base, not offered)}
    source = ConfigSource(lambda: configs["now"])
    async with running_bot(slack, store, sweeper, clock, config=source) as h:
        where = await post_verdict(h, configs["now"])
        assert button_ids(where["blocks"]) == (["cancel_salvage"] if offered
                                               else ["acknowledge"])
        configs["now"] = base
        source.load()  # no_kill lifted
        hook = await press_on(h, "cancel_salvage", where)
        await h.bot.tasks.drain()
        assert sweeper.cancels == ([("alpha", "5151")] if offered else [])
        assert await outcomes(h) == (["cancel requested", "cancelled"] if offered
                                     else ["refused"])
        if not offered:
            (reply,) = await slack.wait_for(hook)
            assert "offered no cancel" in reply.params["text"]


# -- C: reconciliation rebuilds the episode's own message -------------------------------------


async def test_an_interrupted_cancel_reconciled_under_no_kill_offers_no_cancel(
    slack: FakeSlack, store: RedisStore, sweeper: FakeSweeper, clock: FakeClock,
) -> None:
    """SIGTERM mid-cancel, then an operator sets ``no_kill``: the released alert comes back as
    a recommendation (acknowledge only, CONTRACT), saying so, not "press again"; a forged
    cancel on it is refused; acknowledge settles it."""
    configs = {"now": sweeper.conf}
    source = ConfigSource(lambda: configs["now"])
    async with running_bot(slack, store, sweeper, clock, config=source) as h:
        assert await make_scheduler(h.bot).tick()
        sweeper.on_cancel = sigterm
        await h.press_alert("cancel_salvage", user="UALICE")
        await h.bot.tasks.drain()
        sweeper.on_cancel = None
        configs["now"] = with_no_kill(sweeper.conf, True)
        source.load()
        clock.advance(RECONCILE_AFTER_S + 1)
        assert await h.bot.actions.reconcile() == [cancel_lock("alpha", "4242")]
        final = last_update(slack)
        where = {**h.alert_post(), "blocks": final["blocks"]}
        _, hook = await h.press("cancel_salvage", "alpha:4242", user="UALICE",
                                blocks=where["blocks"], channel=where["channel"],
                                ts=where["ts"])
        (reply,) = await slack.wait_for(hook)
        await h.bot.tasks.drain()
        await h.press("acknowledge", "alpha:4242", user="UALICE", blocks=where["blocks"],
                      channel=where["channel"], ts=where["ts"])
        await h.bot.tasks.drain()
        audit = await outcomes(h)
    assert button_ids(final["blocks"]) == ["acknowledge", "deep_probe"]  # no cancel
    assert "interrupted before it took effect" in final["text"]
    assert "Press again" not in final["text"] and "no_kill is set" in final["text"]
    assert "*Collapse on" in blocks_text(final["blocks"])
    assert "not cancelled from Slack: no_kill is set" in reply.params["text"]
    assert sweeper.cancels == []
    assert audit[-3:] == ["cancel interrupted; released", "refused", "acknowledged"]


@pytest.mark.parametrize("no_kill_since", [False, True], ids=["cancel-back", "no-kill-since"])
async def test_an_interrupted_cancel_on_a_kill_verdict_rebuilds_the_verdict(
    *, slack: FakeSlack, store: RedisStore, sweeper: FakeSweeper, clock: FakeClock,
    monkeypatch: pytest.MonkeyPatch, no_kill_since: bool,
) -> None:
    """A deep-probe KILL verdict's cancel is interrupted; the released message is the verdict
    again (its head and reasons), never a collapse alert, with the verdict's own buttons:
    Cancel (pressed again, it cancels once), or acknowledge once ``no_kill`` was set."""
    verdict_sweep(sweeper, clock, monkeypatch)
    base = sweeper.conf.model_copy(update={"deep_probe": DeepProbeSection(auto=True)})
    configs = {"now": base}
    source = ConfigSource(lambda: configs["now"])
    async with running_bot(slack, store, sweeper, clock, config=source) as h:
        where = await post_verdict(h, base)
        sweeper.on_cancel = sigterm
        await press_on(h, "cancel_salvage", where)
        await h.bot.tasks.drain()
        sweeper.on_cancel = None
        configs["now"] = with_no_kill(base, no_kill_since)
        source.load()
        clock.advance(RECONCILE_AFTER_S + 1)
        assert await h.bot.actions.reconcile() == [cancel_lock("alpha", "5151")]
        final = last_update(slack)
        await press_on(h, "cancel_salvage", {**where, "blocks": final["blocks"]})
        await h.bot.tasks.drain()
    text = blocks_text(final["blocks"])
    assert "Deep probe of* `alpha:5151` *rl-grpo-new*: *KILL*" in text
    assert "weight-sync garbage" in text
    assert "Collapse on" not in text and "no signal evidence" not in text
    if no_kill_since:
        assert button_ids(final["blocks"]) == ["acknowledge"]
        assert "Press again" not in final["text"]
        assert sweeper.cancels == []
    else:
        assert button_ids(final["blocks"]) == ["cancel_salvage"]
        assert "Press again to retry" in final["text"]
        assert sweeper.cancels == [("alpha", "5151")]


async def test_a_cancel_that_took_effect_on_a_kill_verdict_settles_the_verdict(
    slack: FakeSlack, store: RedisStore, sweeper: FakeSweeper, clock: FakeClock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The scancel took effect, then the bot died: reconciliation settles the lock and the
    verdict message stays the verdict, without buttons."""
    killed = verdict_sweep(sweeper, clock, monkeypatch)
    ended = detail(job("5151", "rl-grpo-new", state="CANCELLED", verdict="done",
                       flags=("deep-probe",)))
    state = {"ended": False}
    sweeper.make = lambda: sweep_result([ended if state["ended"] else killed], at=clock())
    conf = sweeper.conf.model_copy(update={"deep_probe": DeepProbeSection(auto=True)})

    def took_effect_then_sigterm(cluster: str, job_id: str) -> None:
        state["ended"] = True
        sigterm(cluster, job_id)

    async with running_bot(slack, store, sweeper, clock,
                           config=ConfigSource.fixed(conf)) as h:
        where = await post_verdict(h, conf)
        sweeper.on_cancel = took_effect_then_sigterm
        await press_on(h, "cancel_salvage", where)
        await h.bot.tasks.drain()
        clock.advance(RECONCILE_AFTER_S + 1)
        assert await h.bot.actions.reconcile() == [cancel_lock("alpha", "5151")]
        final = last_update(slack)
        audit = await outcomes(h)
    text = blocks_text(final["blocks"])
    assert "Deep probe of* `alpha:5151` *rl-grpo-new*: *KILL*" in text
    assert "Collapse on" not in text
    assert button_ids(final["blocks"]) == []
    assert "settled after a restart" in final["text"] and "CANCELLED" in final["text"]
    assert audit[-1] == "cancelled (reconciled)"


async def test_a_malformed_stored_verdict_does_not_stop_the_reconcile(
    *, slack: FakeSlack, store: RedisStore, sweeper: FakeSweeper, clock: FakeClock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The interrupted cancel's episode holds a verdict that no longer validates: the cancel
    is still reconciled (released, the job running), the message left with no buttons to
    rebuild; the ValidationError stopped the reconcile pass and the sweep after it."""
    verdict_sweep(sweeper, clock, monkeypatch)
    base = sweeper.conf.model_copy(update={"deep_probe": DeepProbeSection(auto=True)})
    async with running_bot(slack, store, sweeper, clock, config=ConfigSource(lambda: base)) as h:
        where = await post_verdict(h, base)
        sweeper.on_cancel = sigterm
        await press_on(h, "cancel_salvage", where)
        await h.bot.tasks.drain()
        sweeper.on_cancel = None
        bound = await store.get_doc(message_key(where["channel"], where["ts"]))
        episode = await store.get_doc(bound["episode"])
        await store.put_doc(bound["episode"], {**episode, "deep_probe": {"verdict": "MAYBE"}})
        clock.advance(RECONCILE_AFTER_S + 1)
        assert await h.bot.actions.reconcile() == [cancel_lock("alpha", "5151")]
    final = last_update(slack)
    assert "interrupted before it took effect" in final["text"]
    assert button_ids(final["blocks"]) == []
