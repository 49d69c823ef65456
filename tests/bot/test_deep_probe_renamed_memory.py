"""A renamed cluster's deep-probe memory is carried once, never over a newer one.

After renaming ``alpha`` to ``gpu``, ``after_sweep`` copied the run's memory from
``deep_probe:alpha:{id}`` to ``deep_probe:gpu:{id}`` on every sweep: a verdict remembered
under the new name since (a press of Deep probe on ``gpu:5151``) was overwritten at the next
sweep by the old offer's record (``deep_probe: null``), from which a KILL verdict's message is
rebuilt (``bot.actions``): the verdict was lost.
"""

from __future__ import annotations

from pathlib import Path

from bot.cluster_names import note_names
from bot.config import Config, DeepProbeSection, RedisSection, SlackSection
from bot.deep_probe import after_sweep, memory_name
from bot.store import RedisStore
from bot.sweep_result import SweepResult
from probes.config import ReplayCluster
from tests.bot.builders import FakeClock, FakeSweeper, detail, job, sweep_result
from tests.bot.conftest import running_bot
from tests.bot.fake_slack import FakeSlack


def _config(prefix: str, tmp_path: Path, name: str) -> Config:
    cluster = ReplayCluster(name=name, path=str(tmp_path / "rec"), owners={"alice": "UALICE"})
    return Config(clusters=(cluster,), redis=RedisSection(key_prefix=prefix),
                  slack=SlackSection(channel="C0SWEEP", operators=("UOPS",),
                                     incident_dir=str(tmp_path / "incidents")),
                  deep_probe=DeepProbeSection(offer=True))


def _flagged(where: str) -> SweepResult:
    return sweep_result([detail(job("5151", "rl-grpo-new", cluster=where,
                                    flags=("deep-probe",)))], clusters=(where,))


async def test_a_verdict_remembered_under_the_new_name_is_not_overwritten(
    slack: FakeSlack, store: RedisStore, prefix: str, tmp_path: Path,
) -> None:
    before, after = _config(prefix, tmp_path, "alpha"), _config(prefix, tmp_path, "gpu")
    sweeper = FakeSweeper(make=lambda: _flagged("gpu"), conf=after)
    async with running_bot(slack, store, sweeper, FakeClock()) as h:
        await note_names(store, before)
        assert await after_sweep(h.bot, _flagged("alpha"), before) == ["alpha:5151"]
        await note_names(store, after)
        assert await after_sweep(h.bot, _flagged("gpu"), after) == []
        verdict = {"cluster": "gpu", "job_id": "5151", "by": "UALICE",
                   "deep_probe": {"verdict": "KILL"}}
        await store.put_doc(memory_name("gpu", "5151"), verdict)
        assert await after_sweep(h.bot, _flagged("gpu"), after) == []
        assert await store.get_doc(memory_name("gpu", "5151")) == verdict
    assert len(slack.to("/api/chat.postMessage")) == 1
