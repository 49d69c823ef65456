"""An auto-probe's verdict Slack did not take is posted by a later sweep, not lost.

With ``[deep_probe] auto = true`` the scheduler probes each newly flagged run once and posts
the verdict (a KILL on a run whose rows read healthy: the deep probe's reason to exist). Once
a request of the sweep timed out, the rest of its calls give up unsent (``bot.delivery
.posting``, 112fda7): the verdict's post among them. An undelivered offer released the run's
claim (offered again); an undelivered auto verdict kept it, so no later sweep probed or posted
it again: the KILL was never told. Fake Slack hanging the Web API, the remote read stubbed
(no SSH), real Redis.
"""

from __future__ import annotations

from typing import Any

import pytest

from bot import deep_probe
from bot.breaker import posting
from bot.config import Config, DeepProbeSection
from report.models import DeepProbe, JobDetail
from tests.bot.builders import FakeClock, FakeSweeper, detail, job, sweep_result
from tests.bot.conftest import running_bot
from tests.bot.fake_slack import FakeSlack

pytestmark = pytest.mark.redis


async def test_an_undelivered_auto_verdict_is_posted_by_the_next_sweep(
        slack: FakeSlack, store: Any, sweeper: FakeSweeper, clock: FakeClock,
        monkeypatch: pytest.MonkeyPatch) -> None:
    flagged = detail(job("5151", "rl-grpo-new", flags=("deep-probe",)))
    killed = flagged.model_copy(update={"report": flagged.report.model_copy(update={
        "deep_probe": DeepProbe(verdict="KILL", reasons=["weight-sync garbage"], read={})})})
    probes: list[str] = []

    async def probe(config: Config, cluster: str | None, job_id: str,
                    **_: Any) -> JobDetail:
        probes.append(f"{cluster}:{job_id}")
        return killed

    monkeypatch.setattr(deep_probe, "run_deep_probe", probe)
    result = sweep_result([flagged], at=clock())
    config = sweeper.conf.model_copy(update={"deep_probe": DeepProbeSection(auto=True)})
    async with running_bot(slack, store, sweeper, clock) as h:
        h.bot.client.bound(0.3)  # type: ignore[attr-defined]
        for method in ("chat.postMessage", "conversations.open"):
            slack.hang(method)
        with posting():
            assert await deep_probe.after_sweep(h.bot, result, config) == []
        slack.unhang()
        with posting():  # the next sweep
            assert await deep_probe.after_sweep(h.bot, result, config) == ["alpha:5151"]
    told = [c for c in slack.to("/api/chat.postMessage")
            if "weight-sync garbage" in str(c.params)]
    assert len(told) == 1, [c.params.get("text") for c in slack.calls]
    assert probes == ["alpha:5151", "alpha:5151"]
