"""A cluster renamed in the config between two sweeps: no second DM, the first alert works.

Collapse episodes are keyed by cluster name. Renaming ``alpha`` to ``gpu`` (same SSH account,
same kubeconfig context, same replay path) made the open collapse on ``4242`` a new episode:
a second DM for the alert already sent, whose first message's Cancel answered "no cluster
named 'alpha'". The rename is now recognised by what the entry points at.
"""

from __future__ import annotations

from pathlib import Path

from bot.config import Config, RedisSection, SlackSection
from bot.store import RedisStore
from bot.sweep_result import SweepResult
from probes.config import ReplayCluster
from tests.bot.builders import FakeClock, FakeSweeper, collapsing, sweep_result
from tests.bot.conftest import running_bot
from tests.bot.fake_slack import FakeSlack


def _config(prefix: str, tmp_path: Path, name: str, path: str = "rec") -> Config:
    cluster = ReplayCluster(name=name, path=str(tmp_path / path), owners={"alice": "UALICE"})
    return Config(clusters=(cluster,), redis=RedisSection(key_prefix=prefix),
                  slack=SlackSection(channel="C0SWEEP", operators=("UOPS",),
                                     incident_dir=str(tmp_path / "incidents")))


async def test_a_renamed_cluster_sends_no_second_dm_and_its_first_alert_cancels(
    slack: FakeSlack, store: RedisStore, prefix: str, tmp_path: Path,
) -> None:
    """alpha:4242's alert, then the config renames alpha to gpu: the same collapse seen as
    gpu:4242 is not alerted again, and Cancel on the first alert cancels gpu's 4242."""
    before, after = _config(prefix, tmp_path, "alpha"), _config(prefix, tmp_path, "gpu")
    sweeper = FakeSweeper(make=lambda: sweep_result([collapsing("4242", cluster="gpu")],
                                                    clusters=("gpu",)), conf=after)
    async with running_bot(slack, store, sweeper, FakeClock()) as h:
        assert await h.bot.alerter.process([collapsing("4242", cluster="alpha")], before)
        assert await h.bot.alerter.process([collapsing("4242", cluster="gpu")], after) == []
        assert len(slack.to("/api/chat.postMessage")) == 1
        await h.press_alert("cancel_salvage", user="UALICE", ref="alpha:4242")
        await h.bot.tasks.drain()
        assert sweeper.cancels == [("gpu", "4242")]


async def test_another_cluster_in_the_old_ones_place_is_not_a_rename(
    slack: FakeSlack, store: RedisStore, prefix: str, tmp_path: Path,
) -> None:
    """alpha replaced by gpu pointing elsewhere: gpu's 4242 is another job, alerted anew,
    and alpha's old alert cancels nothing."""
    before = _config(prefix, tmp_path, "alpha")
    after = _config(prefix, tmp_path, "gpu", path="other")
    sweeper = FakeSweeper(make=lambda: sweep_result([collapsing("4242", cluster="gpu")],
                                                    clusters=("gpu",)), conf=after)
    async with running_bot(slack, store, sweeper, FakeClock()) as h:
        assert await h.bot.alerter.process([collapsing("4242", cluster="alpha")], before)
        assert await h.bot.alerter.process([collapsing("4242", cluster="gpu")],
                                           after) == ["gpu:4242"]
        await h.press_alert("cancel_salvage", user="UALICE", ref="alpha:4242")
        await h.bot.tasks.drain()
        assert sweeper.cancels == []


async def test_a_renamed_clusters_runs_are_not_offered_a_deep_probe_again(
    slack: FakeSlack, store: RedisStore, prefix: str, tmp_path: Path,
) -> None:
    """A new RL run offered its deep probe on alpha is not offered again as gpu's run (the
    offer is once per run; the run did not change with the cluster's name)."""
    from bot.cluster_names import note_names
    from bot.config import DeepProbeSection
    from bot.deep_probe import after_sweep
    from tests.bot.builders import detail, job

    before, after = (_config(prefix, tmp_path, name).model_copy(
        update={"deep_probe": DeepProbeSection(offer=True)}) for name in ("alpha", "gpu"))

    def flagged(where: str) -> SweepResult:
        return sweep_result([detail(job("5151", "rl-grpo-new", cluster=where,
                                        flags=("deep-probe",)))], clusters=(where,))

    sweeper = FakeSweeper(make=lambda: flagged("gpu"), conf=after)
    async with running_bot(slack, store, sweeper, FakeClock()) as h:
        await note_names(store, before)
        assert await after_sweep(h.bot, flagged("alpha"), before) == ["alpha:5151"]
        await note_names(store, after)
        assert await after_sweep(h.bot, flagged("gpu"), after) == []
        assert await after_sweep(h.bot, flagged("gpu"), after) == []
    assert len(slack.to("/api/chat.postMessage")) == 1


async def test_the_home_tab_shows_a_renamed_clusters_open_episode_under_its_new_name(
    slack: FakeSlack, store: RedisStore, prefix: str, tmp_path: Path,
) -> None:
    """alice's open collapse on alpha:4242 is still open after the rename: her Home tab lists
    it, as ``gpu:4242`` (the name /job takes now), not 'No open collapse episodes.'."""
    from tests.bot.test_home import open_home

    before, after = _config(prefix, tmp_path, "alpha"), _config(prefix, tmp_path, "gpu")
    sweeper = FakeSweeper(make=lambda: sweep_result([collapsing("4242", cluster="gpu")],
                                                    clusters=("gpu",)), conf=after)
    async with running_bot(slack, store, sweeper, FakeClock()) as h:
        assert await h.bot.alerter.process([collapsing("4242", cluster="alpha")], before)
        assert await h.bot.alerter.process([collapsing("4242", cluster="gpu")], after) == []
        text = await open_home(h, "UALICE")
    assert "`gpu:4242` collapse since" in text and "No open collapse episodes." not in text, text


async def test_a_renamed_clusters_failures_and_cleanups_are_not_filed_again(
    slack: FakeSlack, store: RedisStore, prefix: str, tmp_path: Path,
) -> None:
    """A failure filed (incident file, thread line) and a cleanup named on alpha are not
    filed or named again once alpha is called gpu: one incident file, no new line."""
    from bot.cluster_names import note_names
    from probes.models import JobState
    from report.models import Recommendation
    from tests.bot.builders import detail, job

    before, after = _config(prefix, tmp_path, "alpha"), _config(prefix, tmp_path, "gpu")

    def ended(where: str) -> SweepResult:
        failed = job("7001", "sft-crash", cluster=where, bucket="sft", state="FAILED",
                     verdict="failed")
        done = job("7002", "sft-done", cluster=where, bucket="sft", state="COMPLETED",
                   verdict="done", recommendation=Recommendation(action="cleanup",
                                                                  why="sft-job-cleanup"))
        assert done.state is JobState.COMPLETED
        return sweep_result([detail(failed), detail(done)], clusters=(where,))

    sweeper = FakeSweeper(make=lambda: ended("gpu"), conf=after)
    async with running_bot(slack, store, sweeper, FakeClock()) as h:
        await note_names(store, before)
        first = await h.bot.followups.process(ended("alpha"), before)
        assert len(first) == 2, first
        await note_names(store, after)
        assert await h.bot.followups.process(ended("gpu"), after) == []
    assert len(list((tmp_path / "incidents").rglob("*.json"))) == 1


async def test_two_scheduled_sweeps_around_a_rename_post_nothing_new(
    slack: FakeSlack, store: RedisStore, prefix: str, tmp_path: Path,
) -> None:
    """The whole scheduled sweep: alpha's collapse DMed, its failure filed, its jobs tabled;
    the config renames alpha to gpu; the next sweep edits the parent and posts nothing else
    (no DM, no thread reply: no collapse, failure, job-end or 'started' news)."""
    from bot.config_source import ConfigSource
    from bot.scheduled import scheduled_sweep
    from tests.bot.builders import detail, job

    name = ["alpha"]

    def result() -> SweepResult:
        where = name[0]
        return sweep_result([
            collapsing("4242", cluster=where),
            detail(job("4100", "rl-ppo-llama-8b", cluster=where)),
            detail(job("7001", "sft-crash", cluster=where, bucket="sft", state="FAILED",
                       verdict="failed")),
        ], clusters=(where,))

    source = ConfigSource(lambda: _config(prefix, tmp_path, name[0]))
    sweeper = FakeSweeper(make=result, conf=_config(prefix, tmp_path, "alpha"))
    clock = FakeClock()
    async with running_bot(slack, store, sweeper, clock, config=source) as h:
        source.load()
        await scheduled_sweep(h.bot, 0)
        await h.bot.tasks.drain()
        posts = len(slack.to("/api/chat.postMessage"))
        assert posts >= 3  # the DM, the parent, its tables, the follow-up
        name[0] = "gpu"
        clock.advance(1800)
        source.load()
        await scheduled_sweep(h.bot, 1)
        await h.bot.tasks.drain()
        new = slack.to("/api/chat.postMessage")[posts:]
        assert new == [], [c.params.get("text") for c in new]
