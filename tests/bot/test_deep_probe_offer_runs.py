"""One deep-probe offer per array run, not one per task (fake Slack, real Redis).

An RL array run in waves (``sbatch --array=0-11%4``: each wave's tasks start as the last
wave's end) had every task flagged ``deep-probe`` as it started, and each task got its own
offer DM: twelve DMs for one run, four a sweep. The run is offered once (its first task's
button, the message counting its tasks running); later waves of the same run are not offered
again; another run still gets its own offer.
"""

from __future__ import annotations

from bot.config import DeepProbeSection
from bot.deep_probe import after_sweep
from report.models import JobDetail
from tests.bot.builders import blocks_text, detail, job, sweep_result
from tests.bot.conftest import Harness


def flagged(job_id: str, name: str = "rl-grid") -> JobDetail:
    return detail(job(job_id, name, flags=("deep-probe",)))


async def test_an_array_run_in_waves_is_offered_once(harness: Harness) -> None:
    """Wave 1 (four tasks) and a lone run: two runs offered (alice's, so one message with a
    button each: bot.deep_probe_post._offers); wave 2 (four more tasks): none."""
    config = harness.sweeper.conf.model_copy(update={"deep_probe": DeepProbeSection(offer=True)})
    wave1 = [flagged(f"1056_{i}") for i in (3, 0, 2, 1)]
    lone = flagged("2000", "rl-other")
    first = sweep_result([*wave1, lone], at=harness.clock())
    assert await after_sweep(harness.bot, first, config) == ["alpha:1056_0", "alpha:2000"]
    (offer,) = harness.slack.to("/api/chat.postMessage")
    assert [e["value"] for b in offer.params["blocks"] if b.get("type") == "actions"
            for e in b["elements"]] == ["alpha:1056_0", "alpha:2000"]
    text = blocks_text(offer.params["blocks"])
    assert "1056_0" in text and "4 tasks of array `alpha:1056` running" in text, text
    harness.clock.advance(1800)
    wave2 = [flagged(f"1056_{i}") for i in range(4, 8)]
    second = sweep_result([*wave2, lone], at=harness.clock())
    assert await after_sweep(harness.bot, second, config) == []
    assert len(harness.slack.to("/api/chat.postMessage")) == 1


async def test_the_offer_button_of_an_array_probes_its_first_task(harness: Harness) -> None:
    """The run's offer is bound to the task its button names (pressing it probes that one)."""
    config = harness.sweeper.conf.model_copy(update={"deep_probe": DeepProbeSection(offer=True)})
    result = sweep_result([flagged("1056_1"), flagged("1056_0")],
                          at=harness.clock())
    await after_sweep(harness.bot, result, config)
    (offer,) = harness.slack.to("/api/chat.postMessage")
    values = [e["value"] for b in offer.params["blocks"] if b.get("type") == "actions"
              for e in b["elements"]]
    assert values == ["alpha:1056_0"]
    doc = await harness.bot.store.get_doc(
        f"deep_probe_offer:{offer.answer['channel']}:{offer.answer['ts']}")
    assert doc is not None and doc["job_id"] == "1056_0"
