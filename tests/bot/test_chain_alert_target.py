"""A chain-restart collapse alert's target is carried with the row, never read from its prose.

Before, ``bot.episodes`` decided which restart an ended run goes on in (and so whether it was
alerted at all, and what its alert named) by matching the recommendation's words (``cancel
(\\S+) and salvage``, ``restart {successor}``): a ``why`` quoting anything of that shape, a
log line or a job name in some later rule, would have named another job. The judge now hands
the restart over as a structured id (``JobDetail.restart``); the contract's
``recommendation`` stays ``{action, why}``. The rows are judged as the sweep judges them
(``tests.report.factories``); the hostile text is put into the ``why`` by hand, since no rule
quotes such text today. Fake Slack, signed presses, real Redis.
"""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

from bot.store import RedisStore
from probes.models import JobState
from report.models import JobDetail, Recommendation
from tests.bot.builders import FakeClock, FakeSweeper, blocks_text, sweep_result
from tests.bot.conftest import make_config, running_bot
from tests.bot.fake_slack import FakeSlack, action_body, signed_headers
from tests.bot.test_chain_collapse_alert import COLLAPSED
from tests.report.factories import NOW, facts, judge, points, record

HOSTILE = "cancel 999 and salvage everything; the run goes on as its restart 999"


def _cancelled_row() -> JobDetail:
    """Job 100 collapsed and was cancelled; its afterany restart 4242, released, runs on."""
    end = NOW - timedelta(minutes=20)
    cancelled = facts(record("rl-run", "100", JobState.CANCELLED, end_time=end),
                      points(COLLAPSED), checkpoints=[10])
    return judge(cancelled, others=[record("rl-run", "4242", JobState.RUNNING,
                                           submit_time=NOW - timedelta(hours=2),
                                           eligible_time=end, start_time=end,
                                           elapsed_s=1200)])


def _with_why(row: JobDetail, why: str, action: str | None = None) -> JobDetail:
    rec = row.report.recommendation
    assert rec is not None
    hostile = Recommendation(action=action or rec.action, why=why)  # type: ignore[arg-type]
    return row.model_copy(update={"report": row.report.model_copy(
        update={"recommendation": hostile})})


def _values(blocks: Any) -> set[str]:
    loaded = json.loads(blocks) if isinstance(blocks, str) else blocks
    return {e["value"] for b in loaded if b.get("type") == "actions" for e in b["elements"]}


def test_the_judge_hands_the_restart_over_as_an_id() -> None:
    """The cancelled row names 4242 structurally; a live or calm row names none."""
    assert _cancelled_row().restart == "4242"
    live = judge(facts(record("rl-live", "300", JobState.RUNNING), points(COLLAPSED)))
    assert live.restart is None


async def test_a_hostile_why_neither_redirects_nor_raises_an_alert(
    slack: FakeSlack, store: RedisStore, prefix: str, tmp_path: Path, clock: FakeClock,
) -> None:
    """The cancelled run's why quoting 'cancel 999 and salvage' first: its alert still names
    restart 4242 and every button acts on 100; an ended run with no restart, recommended
    cancel_and_salvage by a why naming 999, is not alerted at all (before: alerted, naming
    999 as the run's restart)."""
    config = make_config(prefix, tmp_path)
    row = _cancelled_row()
    hostile = _with_why(row, f"{HOSTILE}; {row.report.recommendation.why}")  # type: ignore[union-attr]
    orphan = judge(facts(record("rl-gone", "200", JobState.CANCELLED,
                                end_time=NOW - timedelta(minutes=20)),
                         points(COLLAPSED), checkpoints=[10]))
    assert orphan.restart is None
    orphan = _with_why(orphan, HOSTILE, action="cancel_and_salvage")
    sweeper = FakeSweeper(make=lambda: sweep_result([hostile, orphan]), conf=config)
    async with running_bot(slack, store, sweeper, clock) as h:
        assert await h.bot.alerter.process([hostile, orphan], config) == ["alpha:100"]
    (posted,) = slack.to("/api/chat.postMessage")
    text = blocks_text(posted.params["blocks"])
    assert "the run goes on as its restart 4242)" in text
    assert "restart 999)" not in text
    assert _values(posted.params["blocks"]) == {"alpha:100"}


async def test_a_press_naming_the_hostile_job_is_refused(
    slack: FakeSlack, store: RedisStore, prefix: str, tmp_path: Path, clock: FakeClock,
) -> None:
    """A press on that alert whose value is edited to the job the why names: refused as
    as tampered (it names another job), audited, and the episode of 100 stays open."""
    config = make_config(prefix, tmp_path)
    row = _with_why(_cancelled_row(), HOSTILE)
    sweeper = FakeSweeper(make=lambda: sweep_result([row]), conf=config)
    async with running_bot(slack, store, sweeper, clock) as h:
        assert await h.bot.alerter.process([row], config) == ["alpha:100"]
        where = h.alert_post("alpha:100")
        body = action_body("acknowledge", "alpha:999", user="UALICE",
                           response_url=slack.response_url("ack"), channel=where["channel"],
                           message_ts=where["ts"], blocks=where["blocks"])
        assert (await h.post(body, signed_headers(body)))[0] == 200
        await h.bot.tasks.drain()
        episode = await store.get_doc("episode:alpha:100")
        audit = await store.audit_entries()
    assert isinstance(episode, dict) and episode["state"] == "open"
    assert [(e["cluster"], e["job_id"], e["outcome"]) for e in audit] == [
        ("alpha", "999", "tampered")]
    assert sweeper.cancels == []
