"""A collapse found on a walltime TIMEOUT whose chain restart is live reaches the owner.

The judge names the restart to cancel (``report.judge_rl.chain_collapse_rule``: the restart
resumes the collapsed policy from the run's last save), but the alerter sent DMs for live rows
only, so this collapse, as urgent as any (the restart is burning GPUs on a collapsed policy),
reached nobody: it sat in the tables as one row among the day's TIMEOUTs. It is alerted like
any other collapse, naming the restart; its buttons cannot cancel the restart (a button acts
only on the job its alert was raised for, and that one has ended), so the alert is a
recommendation with ``acknowledge``, and its evidence is recorded at once.
"""

from __future__ import annotations

from pathlib import Path

from bot.store import RedisStore
from probes.models import JobState
from report.models import JobDetail
from tests.bot.builders import FakeClock, FakeSweeper, blocks_text, sweep_result
from tests.bot.conftest import make_config, running_bot
from tests.bot.fake_slack import FakeSlack
from tests.report.factories import NOW, facts, healthy_rl, judge, points, record, with_last

COLLAPSED = healthy_rl(grad_norm=with_last([0.2] * 12, 3.1, 0.2),
                       entropy=with_last([0.5] * 12, 0.24, 0.5))


def _timeout_row(restart: JobState = JobState.RUNNING, name: str = "rl-run") -> JobDetail:
    """The judged TIMEOUT row of a run that collapsed on its last steps, its restart 4242."""
    timed_out = facts(record(name, "100", JobState.TIMEOUT, end_time=NOW),
                      points(COLLAPSED), checkpoints=[10])
    return judge(timed_out, others=[record(name, "4242", restart, depends_on=("100",))])


async def test_a_chain_restart_collapse_is_dmed_naming_the_restart(
    slack: FakeSlack, store: RedisStore, prefix: str, tmp_path: Path, clock: FakeClock,
) -> None:
    """The owner gets the DM; it names restart 4242 to cancel and offers no Cancel button."""
    config = make_config(prefix, tmp_path)
    row = _timeout_row()
    assert row.report.recommendation is not None
    assert row.report.recommendation.action == "cancel_and_salvage"
    sweeper = FakeSweeper(make=lambda: sweep_result([row]), conf=config)
    async with running_bot(slack, store, sweeper, clock) as h:
        assert await h.bot.alerter.process([row], config) == ["alpha:100"]
    (opened,) = slack.to("/api/conversations.open")
    assert opened.params["users"] == "UALICE"
    (posted,) = slack.to("/api/chat.postMessage")
    text = blocks_text(posted.params["blocks"])
    assert "cancel 4242" in text
    assert "Evidence recorded (the job ended TIMEOUT; the run goes on as its restart 4242)" in text
    assert "keeps running" not in text
    actions = [e["action_id"] for b in posted.params["blocks"] if b.get("type") == "actions"
               for e in b["elements"]]
    assert actions == ["acknowledge", "deep_probe"]


async def test_a_restart_that_ended_or_a_calm_timeout_alerts_nobody(
    slack: FakeSlack, store: RedisStore, prefix: str, tmp_path: Path, clock: FakeClock,
) -> None:
    """Near-misses: the restart already ended (nothing goes on), or a TIMEOUT that did not
    collapse: no DM."""
    config = make_config(prefix, tmp_path)
    ended = _timeout_row(JobState.FAILED)
    calm = judge(facts(record("rl-calm", "200", JobState.TIMEOUT, end_time=NOW),
                       points(healthy_rl())),
                 others=[record("rl-calm", "4343", JobState.RUNNING, depends_on=("200",))])
    sweeper = FakeSweeper(make=lambda: sweep_result([ended, calm]), conf=config)
    async with running_bot(slack, store, sweeper, clock) as h:
        assert await h.bot.alerter.process([ended, calm], config) == []
    assert not slack.to("/api/chat.postMessage")


async def test_a_cancel_that_released_its_restart_is_dmed_naming_it(
    slack: FakeSlack, store: RedisStore, prefix: str, tmp_path: Path, clock: FakeClock,
) -> None:
    """A collapsed run cancelled while its afterany restart waited: the cancel released the
    restart, which goes on collapsed; the owner is told to cancel it."""
    from datetime import timedelta

    config = make_config(prefix, tmp_path)
    end = NOW - timedelta(minutes=20)
    cancelled = facts(record("rl-run", "100", JobState.CANCELLED, end_time=end),
                      points(COLLAPSED), checkpoints=[10])
    row = judge(cancelled, others=[record("rl-run", "4242", JobState.RUNNING,
                                          submit_time=NOW - timedelta(hours=2),
                                          eligible_time=end, start_time=end,
                                          elapsed_s=1200)])
    sweeper = FakeSweeper(make=lambda: sweep_result([row]), conf=config)
    async with running_bot(slack, store, sweeper, clock) as h:
        assert await h.bot.alerter.process([row], config) == ["alpha:100"]
    (posted,) = slack.to("/api/chat.postMessage")
    text = blocks_text(posted.params["blocks"])
    assert "cancel 4242" in text
    assert "Evidence recorded (the job ended CANCELLED; the run goes on as its restart 4242)" \
        in text
